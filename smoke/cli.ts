import { type CheckResult, runSmokeChecks, type SigningMode, type StoredCredentialAsk, type TokenClient } from './checks';
import { httpSender } from './http';
import { type Signer, signingRegion, sigV4Signer } from './sigv4';

// `npm run smoke -- <base URL>`: checks a deployed (or local) service against the contract, one line
// per check (PASS, FAIL, or SKIP for a check not run), exit 0 when no check fails, 1 when one fails,
// 2 when it cannot start. `--help` prints the settings.

const USAGE = 'usage: npm run smoke -- <base URL of the service, e.g. https://abc123.execute-api.eu-west-1.amazonaws.com>';

const HELP = `${USAGE}

Checks both token routes against the contract (400 for an empty body, 403 for the metadata address
as token URL, API Gateway's own answer elsewhere: an HTTP API's 404, a REST API's 403) and the JWKS
(public keys, or not served), and with a client or a stored credential gets a token through the
service. A check without what it needs is skipped, and says so.

Environment:
  SMOKE_CLIENT_ID, SMOKE_CLIENT_SECRET, SMOKE_TOKEN_URL
                            all three: also get a token from that IdP through the service (and again,
                            behind a cache)
  SMOKE_ISSUER              with the client: also get a token by the IdP's issuer
  SMOKE_CREDENTIAL          a stored credential the signer may use: get its token, and check that a
                            name no entry has is refused; SMOKE_CREDENTIAL_SCOPE: the scope to ask
  SMOKE_EXPECT_CACHE_HIT=1  a second token request that is no cache hit fails
  SMOKE_SIGV4               unset: sign with SigV4 once API Gateway refuses an unsigned request (IAM);
                            1: sign every request, after checking an unsigned one is refused; 0: never sign
  AWS_REGION                the region to sign for, when the URL's host does not say it

Against npm start:
  SMOKE_CLIENT_ID=demo-client SMOKE_CLIENT_SECRET=demo-secret SMOKE_TOKEN_URL=http://127.0.0.1:3001/token \\
    npm run smoke -- http://localhost:3000
`;

class UsageError extends Error {}

function baseUrlFrom(args: readonly string[]): URL {
  const [text] = args;
  if (text === undefined || args.length !== 1) throw new UsageError(USAGE);
  if (text.startsWith('-')) throw new UsageError(`unknown option ${text}: --help prints the usage and settings\n${USAGE}`);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError(`not a URL: ${text}\n${USAGE}`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new UsageError(`the base URL must be http or https, got ${url.protocol}\n${USAGE}`);
  if (url.search !== '' || url.hash !== '') throw new UsageError(`the base URL takes no query or fragment: ${text}`);
  if (!url.pathname.endsWith('/')) url.pathname = `${url.pathname}/`;
  return url;
}

function tokenClientFrom(env: NodeJS.ProcessEnv): TokenClient | undefined {
  const names = ['SMOKE_CLIENT_ID', 'SMOKE_CLIENT_SECRET', 'SMOKE_TOKEN_URL'] as const;
  const missing = names.filter((name) => !env[name]);
  if (missing.length === names.length) {
    if (env.SMOKE_ISSUER) throw new UsageError(`SMOKE_ISSUER needs the client: set ${names.join(', ')} too`);
    return undefined;
  }
  if (missing.length > 0) throw new UsageError(`set ${names.join(', ')} together, or none of them: ${missing.join(', ')} missing`);
  const client = { clientId: env.SMOKE_CLIENT_ID ?? '', clientSecret: env.SMOKE_CLIENT_SECRET ?? '', tokenUrl: env.SMOKE_TOKEN_URL ?? '' };
  return env.SMOKE_ISSUER ? { ...client, issuer: env.SMOKE_ISSUER } : client;
}

function credentialFrom(env: NodeJS.ProcessEnv): StoredCredentialAsk | undefined {
  if (!env.SMOKE_CREDENTIAL) {
    if (env.SMOKE_CREDENTIAL_SCOPE) throw new UsageError('SMOKE_CREDENTIAL_SCOPE needs SMOKE_CREDENTIAL');
    return undefined;
  }
  return env.SMOKE_CREDENTIAL_SCOPE ? { name: env.SMOKE_CREDENTIAL, scope: env.SMOKE_CREDENTIAL_SCOPE } : { name: env.SMOKE_CREDENTIAL };
}

function signingModeFrom(value: string | undefined): SigningMode {
  if (value === undefined || value === '') return 'auto';
  if (value === '1') return 'always';
  if (value === '0') return 'never';
  throw new UsageError(
    `SMOKE_SIGV4 must be 1 (sign every request), 0 (never sign) or unset (sign once API Gateway asks for it), got "${value}"`,
  );
}

async function main(args: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(HELP);
    return 0;
  }
  const baseUrl = baseUrlFrom(args);
  const token = tokenClientFrom(env);
  const credential = credentialFrom(env);
  const signing = signingModeFrom(env.SMOKE_SIGV4);
  const region = signingRegion(baseUrl, env.AWS_REGION || env.AWS_DEFAULT_REGION);
  const signer: Signer | undefined = signing === 'never' || region === undefined ? undefined : sigV4Signer(region);

  process.stdout.write(`smoke test of ${baseUrl.href}\n`);
  const results = await runSmokeChecks(
    {
      send: httpSender(baseUrl, signer),
      signing,
      cannotSign: signer ? undefined : 'no region: set AWS_REGION (the host is no execute-api host that names one)',
      token,
      credential,
      expectCacheHit: env.SMOKE_EXPECT_CACHE_HIT === '1',
    },
    (result: CheckResult) => process.stdout.write(`${result.verdict} ${result.name}: ${result.detail}\n`),
  );
  const count = (verdict: CheckResult['verdict']) => results.filter((result) => result.verdict === verdict).length;
  const failed = count('FAIL');
  process.stdout.write(`smoke: ${count('PASS')} passed, ${failed} failed${count('SKIP') > 0 ? `, ${count('SKIP')} not run` : ''}\n`);
  return failed === 0 ? 0 : 1;
}

main(process.argv.slice(2), process.env).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`smoke: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = error instanceof UsageError ? 2 : 1;
  },
);
