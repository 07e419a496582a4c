import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Template } from 'aws-cdk-lib/assertions';
import { TokenExchangeStack } from '../../infra/token-exchange-stack';
import { manyCredentials } from './many-credentials';
import { newApp } from './stack-fixture';

// A platform's 300 stored credentials: too many for Lambda's 4 KB of environment (30 entries were
// 8.9 KB), so they ride in the package; the stack must stay within what Lambda, IAM and
// CloudFormation accept, or the deploy fails late.

const COUNT = 300;
let template: Template;
let assetDir: string;

beforeAll(() => {
  const app = newApp({ bundle: true });
  const stack = new TokenExchangeStack(app, 'ManyCredentials', {
    allowAnyPublicTokenUrl: true,
    callerAuthorization: 'iam',
    storedCredentials: manyCredentials(COUNT),
  });
  const assembly = app.synth();
  template = Template.fromJSON(assembly.getStackArtifact(stack.artifactId).template as Record<string, unknown>);
  const [asset] = readdirSync(assembly.directory).filter((name) => name.startsWith('asset.'));
  assetDir = join(assembly.directory, asset as string);
}, 120_000);

/** The template's value with every pseudo parameter filled in by its longest possible value. */
function filledIn(value: unknown): unknown {
  return JSON.parse(
    JSON.stringify(value)
      .replaceAll('{"Ref":"AWS::Partition"}', '"aws-iso-b"')
      .replaceAll('{"Ref":"AWS::Region"}', '"ap-southeast-7xxxxx"')
      .replaceAll('{"Ref":"AWS::AccountId"}', '"123456789012"'),
    (_key, node) =>
      node && typeof node === 'object' && 'Fn::Join' in node ? (node['Fn::Join'][1] as string[]).join(node['Fn::Join'][0]) : node,
  );
}

describe(`a credentials file of ${COUNT} entries`, () => {
  it("packages every entry beside the code, in a package far within Lambda's 50 MB zipped and 250 MB unzipped", () => {
    const files = readdirSync(assetDir);
    const bytes = files.reduce((total, name) => total + statSync(join(assetDir, name)).size, 0);

    expect(files.sort()).toEqual(['index.js', 'index.js.map', 'stored-credentials.json']);
    expect((JSON.parse(readFileSync(join(assetDir, 'stored-credentials.json'), 'utf8')) as unknown[]).length).toBe(COUNT);
    expect(bytes).toBeLessThan(5 * 1024 * 1024);
  });

  it("keeps the function's environment within Lambda's 4 KB", () => {
    const [fn] = Object.values(template.findResources('AWS::Lambda::Function')) as { Properties: { Environment: { Variables: object } } }[];

    const bytes = Object.entries(fn?.Properties.Environment.Variables ?? {}).reduce(
      (total, [name, value]) => total + name.length + JSON.stringify(value).length,
      0,
    );
    expect(bytes).toBeLessThan(4096);
  });

  it("grants the secrets and keys of yours in managed policies each within IAM's 6,144 characters, ten at most", () => {
    const policies = Object.values(template.findResources('AWS::IAM::ManagedPolicy')) as { Properties: { PolicyDocument: unknown } }[];

    expect(policies.length).toBeGreaterThan(1);
    expect(policies.length).toBeLessThanOrEqual(10);
    for (const { Properties } of policies) expect(JSON.stringify(filledIn(Properties.PolicyDocument)).length).toBeLessThanOrEqual(6144);
    const granted = policies.flatMap(({ Properties }) => JSON.stringify(filledIn(Properties.PolicyDocument)).match(/arn:[^"]+/g) ?? []);
    expect(new Set(granted).size).toBe(manyCredentials(COUNT).filter((entry) => entry.key === undefined).length);
  });

  it("keeps the role's inline policies within IAM's 10,240 characters", () => {
    const [role] = Object.values(template.findResources('AWS::IAM::Role')) as { Properties: { Policies: unknown[] } }[];

    expect(JSON.stringify(filledIn(role?.Properties.Policies)).length).toBeLessThan(10_240);
  });

  it("stays within CloudFormation's 500 resources and 1 MB template", () => {
    expect(Object.keys(template.toJSON().Resources as object).length).toBeLessThanOrEqual(500);
    expect(JSON.stringify(template.toJSON()).length).toBeLessThan(1024 * 1024);
    template.resourceCountIs('AWS::KMS::Key', manyCredentials(COUNT).filter((entry) => entry.key === 'kms').length);
  });
});

describe("a credentials file whose keys would pass CloudFormation's 500 resources", () => {
  it('is refused at synth, saying why', () => {
    const keyless = manyCredentials(260).map(({ keyId: _, secretName: __, secretId: ___, ...entry }) => ({
      ...entry,
      method: 'private_key_jwt' as const,
      key: 'kms' as const,
    }));
    const stack = new TokenExchangeStack(newApp({ bundle: false }), 'TooManyKeys', {
      allowAnyPublicTokenUrl: true,
      callerAuthorization: 'iam',
      storedCredentials: keyless,
    });

    expect(() => Template.fromStack(stack)).toThrow(/the template holds \d+ resources and CloudFormation takes 500/);
  });
});
