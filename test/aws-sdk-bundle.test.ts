import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as sdk from '../lambda/bundle/aws-sdk';
import * as sdkWithKms from '../lambda/bundle/aws-sdk-kms';
import { defaultProvider } from '../lambda/bundle/env-credentials';

// The SDK as the deployed function has it (infra/bundling.ts): lambda/bundle/aws-sdk.ts is the entry of
// aws-sdk.js (aws-sdk-kms.ts where a stored credential signs in KMS), and env-credentials.ts stands in
// for the default credential chain there. That the
// deployed bundle serves the shared cache from that file is tested in test/infra/lambda-bundle.test.ts.

const LAMBDA = join(__dirname, '..', 'lambda');

/** Every value `lambda/` imports or requires from an SDK client package, by package: what aws-sdk.js must export. */
function clientImports(): { name: string; from: string }[] {
  const files = readdirSync(LAMBDA, { recursive: true, encoding: 'utf8' }).filter(
    (file) => file.endsWith('.ts') && !file.startsWith('bundle'),
  );
  return files.flatMap((file) =>
    [
      ...readFileSync(join(LAMBDA, file), 'utf8').matchAll(
        /^\s*(?:import \{([^}]*)\} from|const \{([^}]*)\} = require\() ?'(@aws-sdk\/client-[a-z-]+)'/gm,
      ),
    ].flatMap(([, imported, required, from = '']) =>
      (imported ?? required ?? '')
        .split(',')
        .map((name) => name.trim())
        .filter((name) => name !== '' && !name.startsWith('type '))
        .map((name) => ({ name, from })),
    ),
  );
}

describe("aws-sdk.ts and aws-sdk-kms.ts, the entries of the deployed function's SDK file", () => {
  it('export every client, command and error the shared tier and stored credentials use, as the SDK packages define them', () => {
    // Prepare
    const imports = clientImports();

    // Assess: the control, that the scan finds the shared tier's imports at all
    expect(imports.map(({ name }) => name)).toEqual(
      expect.arrayContaining(['DynamoDBClient', 'GetSecretValueCommand', 'KMSClient', 'SignCommand']),
    );
    for (const { name, from } of imports) {
      const defined = (require(from) as Record<string, unknown>)[name];
      expect({ name, exported: (sdkWithKms as Record<string, unknown>)[name] }).toEqual({ name, exported: defined });
      // KMS's client is left out of the file of a deployment that signs nothing in KMS.
      const exported = (sdk as Record<string, unknown>)[name];
      expect({ name, exported }).toEqual({ name, exported: from === '@aws-sdk/client-kms' ? undefined : defined });
    }
  });
});

describe('env-credentials.ts, which stands in for the default credential chain in the SDK file', () => {
  const saved = { ...process.env };
  afterEach(() => {
    for (const name of ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN']) {
      if (saved[name] === undefined) delete process.env[name];
      else process.env[name] = saved[name];
    }
  });

  it("gives the role's credentials from the environment, as Lambda sets them", async () => {
    Object.assign(process.env, {
      AWS_ACCESS_KEY_ID: 'AKIDLAMBDAROLE',
      AWS_SECRET_ACCESS_KEY: 'role-secret',
      AWS_SESSION_TOKEN: 'role-session',
    });

    const credentials = await defaultProvider()();

    expect(credentials).toMatchObject({ accessKeyId: 'AKIDLAMBDAROLE', secretAccessKey: 'role-secret', sessionToken: 'role-session' });
  });

  it('fails without them, so a table call fails and the request goes to the IdP without the table', async () => {
    delete process.env.AWS_ACCESS_KEY_ID;
    delete process.env.AWS_SECRET_ACCESS_KEY;

    await expect(defaultProvider()()).rejects.toMatchObject({ name: 'CredentialsProviderError' });
  });
});
