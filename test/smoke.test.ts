import { execFile } from 'node:child_process';
import { createHash, createHmac } from 'node:crypto';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../lambda/config';
import { destroyAgents } from '../lambda/upstream/guarded-agents';
import { createHandler } from '../lambda/handler';
import { createHttpApiGateway, LOCAL_IAM_CALLER_HEADER, type LocalApi } from '../local/http-api-gateway';
import { type CredentialSources, startCredentialSources, storedCredentials } from './support/credential-sources';
import { recordingObservability } from './support/events';
import { idpEnv } from './support/idp-env';
import { DEMO_TOKEN, json, startTokenServer, type TokenServer } from './support/token-server';

// `npm run smoke` as a child process, against the local API Gateway and the handler in this process,
// and against scripted servers on 127.0.0.1. Its network is locked to loopback: the metadata address
// it names must be refused by the service, never connected to.

const REPO_ROOT = join(__dirname, '..');
const JAIL = join(__dirname, 'support', 'loopback-only-network.js');
const SECRET = 'smoke-client-secret-never-printed';
// Placeholders for the SDK's credential chain: the IAM stand-in checks signatures made with them.
const AWS_KEY = { id: 'AKIDSMOKETESTLOCAL', secret: 'smoke-test-signing-key-not-an-aws-key', session: 'smoke-test-session' };
const REGION = 'eu-west-1';

interface SmokeRun {
  code: number;
  output: string;
  networkAttempts: string[];
}

let scratch: string;

beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), 'smoke-'));
});

afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
  destroyAgents();
});

let runs = 0;
function smoke(args: string[], env: Record<string, string> = {}): Promise<SmokeRun> {
  const log = join(scratch, `run-${++runs}.network.log`);
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', join(REPO_ROOT, 'smoke', 'cli.ts'), ...args],
      {
        cwd: REPO_ROOT,
        env: {
          PATH: process.env.PATH,
          HOME: scratch,
          AWS_EC2_METADATA_DISABLED: 'true',
          NODE_OPTIONS: `--require ${JAIL}`,
          LOOPBACK_ONLY_LOG: log,
          ...env,
        },
        timeout: 60_000,
      },
      (error, stdout, stderr) => {
        const networkAttempts = existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n') : [];
        resolve({ code: typeof error?.code === 'number' ? error.code : error ? -1 : 0, output: `${stdout}${stderr}`, networkAttempts });
      },
    );
  });
}

async function listen(server: Server): Promise<string> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function close(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
}

/** The local API Gateway in front of the handler, as `npm start` serves it, allowing the given token URL origin. */
async function startService(env: Record<string, string>, api: LocalApi = 'http'): Promise<{ url: string; stop(): Promise<void> }> {
  const server = createHttpApiGateway({
    handler: createHandler(loadConfig(env), recordingObservability()),
    openApiPath: join(REPO_ROOT, 'openapi.yaml'),
    api,
  });
  const url = await listen(server);
  return { url, stop: () => close(server) };
}

/** A server answering every request with the same status and body. */
async function startFixedAnswer(status: number, body: string): Promise<{ url: string; stop(): Promise<void> }> {
  const server = createServer((_request, response) => {
    response.writeHead(status, { 'content-type': 'application/json' });
    response.end(body);
  });
  const url = await listen(server);
  return { url, stop: () => close(server) };
}

const lines = (output: string, verdict: string): string[] => output.split('\n').filter((line) => line.startsWith(`${verdict} `));

describe('npm run smoke against the local service', () => {
  const idp = idpEnv();
  let service: { url: string; stop(): Promise<void> };

  beforeAll(async () => {
    service = await startService({ TOKEN_URL_ALLOWLIST: new URL(idp.tokenUrl).origin });
  });

  afterAll(() => service.stop());

  it('passes the contract checks of both routes and exits 0', async () => {
    // Act
    const run = await smoke([service.url]);

    // Assess
    expect(lines(run.output, 'PASS')).toEqual([
      'PASS POST /v1/oauth/token with an empty body: 400 invalid_request',
      'PASS POST /oauth/token with an empty body: 400 invalid_request',
      'PASS POST /v1/oauth/token naming the metadata address as token URL: 403 token_url_not_allowed',
      'PASS POST /oauth/token naming the metadata address as token URL: 403 token_url_not_allowed',
      `PASS POST /v1/oauth/no-such-route: API Gateway's 404 {"message":"Not Found"}`,
      "PASS GET /.well-known/jwks.json: not served (API Gateway's 404): no stored credential has a KMS key",
    ]);
    expect(run.code).toBe(0);
  });

  it('says it skipped the token checks without a client, an issuer or a credential, naming the variables that turn them on', async () => {
    // Act
    const run = await smoke([service.url]);

    // Assess
    expect(lines(run.output, 'SKIP')).toEqual([
      'SKIP a token through the service: no client: set SMOKE_CLIENT_ID, SMOKE_CLIENT_SECRET and SMOKE_TOKEN_URL to get one from that IdP',
      'SKIP a token by issuer: no issuer: set SMOKE_ISSUER (with the client) to get one by it',
      "SKIP a stored credential's token: no credential: set SMOKE_CREDENTIAL to one the signer may use (callerAuthorization=iam)",
    ]);
    expect(run.output).toContain('smoke: 6 passed, 0 failed, 3 not run');
    expect(run.code).toBe(0);
  });

  it('connects to nothing but the service: the metadata address is only named', async () => {
    // Act
    const run = await smoke([service.url]);

    // Assess
    expect(run.networkAttempts).toEqual([]);
    expect(run.code).toBe(0);
  });

  it('gets a token from the embedded IdP through the service with SMOKE_CLIENT_ID, SMOKE_CLIENT_SECRET and SMOKE_TOKEN_URL, and by SMOKE_ISSUER', async () => {
    // Act
    const run = await smoke([service.url], {
      SMOKE_CLIENT_ID: idp.basic.clientId,
      SMOKE_CLIENT_SECRET: idp.basic.clientSecret,
      SMOKE_TOKEN_URL: idp.tokenUrl,
      SMOKE_ISSUER: idp.issuer,
    });

    // Assess
    expect(run.output).toMatch(
      /^PASS POST \/v1\/oauth\/token with the SMOKE_CLIENT_ID client: 200 with an access token \(expires_in \d+\)$/m,
    );
    expect(run.output).toMatch(/^PASS POST \/v1\/oauth\/token by SMOKE_ISSUER: 200 with an access token \(expires_in \d+\)$/m);
    expect(run.output).toContain('smoke: 8 passed, 0 failed, 1 not run');
    expect(run.code).toBe(0);
  });

  it('fails the token check when the IdP rejects the secret, with the contract error', async () => {
    // Act
    const run = await smoke([service.url], {
      SMOKE_CLIENT_ID: idp.basic.clientId,
      SMOKE_CLIENT_SECRET: 'wrong',
      SMOKE_TOKEN_URL: idp.tokenUrl,
    });

    // Assess
    expect(run.output).toContain(
      'FAIL POST /v1/oauth/token with the SMOKE_CLIENT_ID client: expected 200 with a string access_token, got 401 unauthorized: Unauthorized credentials provided',
    );
    expect(run.code).toBe(1);
  });
});

describe('npm run smoke and tokens', () => {
  let idp: TokenServer;

  beforeAll(async () => {
    idp = await startTokenServer(json(200, DEMO_TOKEN));
  });

  afterAll(() => idp.close());

  const client = () => ({ SMOKE_CLIENT_ID: 'smoke-client', SMOKE_CLIENT_SECRET: SECRET, SMOKE_TOKEN_URL: `${idp.origin}/token` });

  it('never prints the token or the client secret', async () => {
    // Prepare
    const service = await startService({ TOKEN_URL_ALLOWLIST: idp.origin });

    // Act
    const run = await smoke([service.url], client());
    await service.stop();

    // Assess
    expect(run.code).toBe(0);
    expect(run.output).not.toContain(DEMO_TOKEN.access_token);
    expect(run.output).not.toContain(SECRET);
  });

  it('calls again behind a cache and says the second call was a hit', async () => {
    // Prepare
    const service = await startService({ TOKEN_URL_ALLOWLIST: idp.origin, TOKEN_CACHE: 'memory' });

    // Act
    const run = await smoke([service.url], client());
    await service.stop();

    // Assess
    expect(run.output).toContain('PASS the same token request again: 200, a hit: answered from the cache');
    expect(run.code).toBe(0);
  });

  it('fails a second call that is no hit when SMOKE_EXPECT_CACHE_HIT=1', async () => {
    // Prepare: a token too short-lived to keep, so both calls are misses
    idp.answer(json(200, { ...DEMO_TOKEN, expires_in: 20 }));
    const service = await startService({ TOKEN_URL_ALLOWLIST: idp.origin, TOKEN_CACHE: 'memory' });

    // Act
    const run = await smoke([service.url], { ...client(), SMOKE_EXPECT_CACHE_HIT: '1' });
    await service.stop();
    idp.answer(json(200, DEMO_TOKEN));

    // Assess
    expect(run.output).toMatch(/^FAIL the same token request again: 200, not a hit \(x-token-cache: miss\)/m);
    expect(run.code).toBe(1);
  });
});

describe('npm run smoke against a broken service', () => {
  it('exits 1 on a service answering 500, naming the answer in each check', async () => {
    // Prepare
    const broken = await startFixedAnswer(500, '{"message":"Internal Server Error"}');

    // Act
    const run = await smoke([broken.url]);
    await broken.stop();

    // Assess
    expect(lines(run.output, 'FAIL')).toHaveLength(6);
    expect(run.output).toContain(
      'FAIL POST /v1/oauth/token with an empty body: expected 400 invalid_request, got 500 {"message":"Internal Server Error"}',
    );
    expect(run.output).toContain(
      'FAIL GET /.well-known/jwks.json: expected 200 {"keys":[...]}, got 500 {"message":"Internal Server Error"}',
    );
    expect(run.code).toBe(1);
  });

  it('exits 1 on a refused connection, and runs nothing more', async () => {
    // Prepare: a port that was free a moment ago, now closed
    const gone = await startFixedAnswer(200, '{}');
    await gone.stop();

    // Act
    const run = await smoke([gone.url]);

    // Assess
    expect(run.output).toContain('FAIL POST /v1/oauth/token with an empty body: connection refused (ECONNREFUSED)');
    expect(lines(run.output, 'SKIP')).toHaveLength(5);
    expect(run.code).toBe(1);
  });

  it.each([
    [
      'a private member',
      '{"keys":[{"kty":"RSA","kid":"k","use":"sig","alg":"RS256","n":"x","e":"AQAB","d":"private"}]}',
      'a key is not a public signing JWK',
    ],
    ['no keys array', '{"key":{}}', 'expected 200 {"keys":[...]}, got 200'],
  ])('fails the JWKS check for a JWK Set with %s', async (_case, body, detail) => {
    // Prepare
    const wrong = await startFixedAnswer(200, body);

    // Act
    const run = await smoke([wrong.url]);
    await wrong.stop();

    // Assess
    expect(run.output).toContain(`FAIL GET /.well-known/jwks.json: ${detail}`);
  });

  it('fails a check whose answer has the right status but not the contract body', async () => {
    // Prepare
    const wrong = await startFixedAnswer(400, '{"error":"bad_request"}');

    // Act
    const run = await smoke([wrong.url]);
    await wrong.stop();

    // Assess
    expect(run.output).toContain(
      'FAIL POST /oauth/token with an empty body: expected 400 invalid_request, got 400 a 23-byte body that is no JSON error',
    );
    expect(run.code).toBe(1);
  });
});

describe('npm run smoke against an API that takes IAM callers', () => {
  let service: { url: string; stop(): Promise<void> };
  let front: Server;
  let frontUrl: string;
  const verified: string[] = [];

  beforeAll(async () => {
    service = await startService({ TOKEN_URL_ALLOWLIST: 'https://login.example.com' });
    front = createServer((request, response) => {
      void (async () => {
        const body = await readBody(request);
        // The JWKS route takes no caller authentication; the others only signed callers.
        const open = request.method === 'GET' && request.url === '/.well-known/jwks.json';
        if (!open && !signatureIsValid(request, body)) {
          response.writeHead(403, { 'content-type': 'application/json' });
          response.end('{"message":"Forbidden"}');
          return;
        }
        if (!open) verified.push(`${request.method} ${request.url}`);
        const answer = await fetch(`${service.url}${request.url}`, {
          method: request.method,
          headers: { 'content-type': 'application/json' },
          body: request.method === 'GET' ? undefined : body,
        });
        response.writeHead(answer.status, { 'content-type': 'application/json' });
        response.end(await answer.text());
      })();
    });
    frontUrl = await listen(front);
  });

  afterAll(async () => {
    await close(front);
    await service.stop();
  });

  beforeEach(() => {
    verified.length = 0;
  });

  const credentials = {
    AWS_ACCESS_KEY_ID: AWS_KEY.id,
    AWS_SECRET_ACCESS_KEY: AWS_KEY.secret,
    AWS_SESSION_TOKEN: AWS_KEY.session,
    AWS_REGION: REGION,
  };

  it('signs every request with SigV4 from the credential chain once API Gateway refuses an unsigned one', async () => {
    // Act
    const run = await smoke([frontUrl], credentials);

    // Assess
    expect(run.output).toContain(
      `PASS POST /v1/oauth/token with an empty body, unsigned: API Gateway's 403 {"message":"Forbidden"}: the API takes IAM callers, so the checks sign their requests with SigV4 from here on`,
    );
    expect(verified).toEqual([
      'POST /v1/oauth/token',
      'POST /oauth/token',
      'POST /v1/oauth/token',
      'POST /oauth/token',
      'POST /v1/oauth/no-such-route',
    ]);
    expect(run.code).toBe(0);
  });

  it('with SMOKE_SIGV4=1 checks that an unsigned request is refused, then signs every other', async () => {
    // Act
    const run = await smoke([frontUrl], { ...credentials, SMOKE_SIGV4: '1' });

    // Assess
    expect(run.output).toContain(
      `PASS POST /v1/oauth/token unsigned (SMOKE_SIGV4=1): API Gateway's 403 {"message":"Forbidden"}: only signed requests reach the function`,
    );
    expect(verified).toHaveLength(5);
    expect(run.code).toBe(0);
  });

  it('with SMOKE_SIGV4=0 never signs, so every check fails on the 403', async () => {
    // Act
    const run = await smoke([frontUrl], { ...credentials, SMOKE_SIGV4: '0' });

    // Assess: the JWKS, the one route without caller authentication, is the one to pass.
    expect(lines(run.output, 'FAIL')).toHaveLength(5);
    expect(verified).toEqual([]);
    expect(run.code).toBe(1);
  });

  it('fails, naming what is missing, when there is no region to sign for', async () => {
    // Act
    const { AWS_REGION: _region, ...withoutRegion } = credentials;
    const run = await smoke([frontUrl], withoutRegion);

    // Assess
    expect(run.output).toContain('cannot sign with SigV4: no region: set AWS_REGION');
    expect(run.code).toBe(1);
  });

  it('with SMOKE_SIGV4=1 fails against an API that takes unsigned requests', async () => {
    // Act
    const run = await smoke([service.url], { ...credentials, SMOKE_SIGV4: '1' });

    // Assess
    expect(run.output).toContain(
      `FAIL POST /v1/oauth/token unsigned (SMOKE_SIGV4=1): expected API Gateway's 403 {"message":"Forbidden"} (IAM callers only), got 400 invalid_request`,
    );
    expect(run.code).toBe(1);
  });
});

describe('npm run smoke against a REST API that takes IAM callers, with stored credentials', () => {
  const SIGNER = 'arn:aws:sts::123456789012:assumed-role/orders-service/smoke';
  let idp: TokenServer;
  let sources: CredentialSources;
  let service: { url: string; stop(): Promise<void> };
  let front: Server;
  let frontUrl: string;

  beforeAll(async () => {
    idp = await startTokenServer(json(200, DEMO_TOKEN));
    sources = await startCredentialSources();
    const key = sources.kms.createKey('RSA_2048');
    const credentials = storedCredentials({
      name: 'orders',
      clientId: 'orders',
      tokenUrl: `${idp.origin}/token`,
      method: 'private_key_jwt',
      keyId: key.arn,
    });
    service = await startService({ TOKEN_URL_ALLOWLIST: idp.origin, STORED_CREDENTIALS: credentials }, 'rest');
    // A REST API as API Gateway runs one: its own 403 for a route it lacks and for an unsigned caller, the verified caller passed on.
    front = createServer((request, response) => {
      void (async () => {
        const body = await readBody(request);
        const route = ['POST /v1/oauth/token', 'POST /oauth/token', 'GET /.well-known/jwks.json'].includes(
          `${request.method} ${request.url}`,
        );
        const open = request.method === 'GET';
        if (!route || (!open && !signatureIsValid(request, body))) {
          response.writeHead(403, { 'content-type': 'application/json' });
          response.end('{"message":"Missing Authentication Token"}');
          return;
        }
        const answer = await fetch(`${service.url}${request.url}`, {
          method: request.method,
          headers: { 'content-type': 'application/json', ...(open ? {} : { [LOCAL_IAM_CALLER_HEADER]: SIGNER }) },
          body: open ? undefined : body,
        });
        response.writeHead(answer.status, {
          'content-type': 'application/json',
          'cache-control': answer.headers.get('cache-control') ?? '',
        });
        response.end(await answer.text());
      })();
    });
    frontUrl = await listen(front);
  });

  afterAll(async () => {
    await close(front);
    await service.stop();
    await Promise.all([idp.close(), sources.close()]);
  });

  it("signs once it meets the REST API's 403, takes its 403 for a route it lacks, checks the JWKS and gets the credential's token", async () => {
    // Act
    const run = await smoke([frontUrl], {
      AWS_ACCESS_KEY_ID: AWS_KEY.id,
      AWS_SECRET_ACCESS_KEY: AWS_KEY.secret,
      AWS_SESSION_TOKEN: AWS_KEY.session,
      AWS_REGION: REGION,
      SMOKE_CREDENTIAL: 'orders',
      SMOKE_CREDENTIAL_SCOPE: 'read',
    });

    // Assess
    expect(lines(run.output, 'PASS')).toEqual([
      `PASS POST /v1/oauth/token with an empty body, unsigned: API Gateway's 403 {"message":"Missing Authentication Token"}: the API takes IAM callers, so the checks sign their requests with SigV4 from here on`,
      'PASS POST /v1/oauth/token with an empty body: 400 invalid_request',
      'PASS POST /oauth/token with an empty body: 400 invalid_request',
      'PASS POST /v1/oauth/token naming the metadata address as token URL: 403 token_url_not_allowed',
      'PASS POST /oauth/token naming the metadata address as token URL: 403 token_url_not_allowed',
      `PASS POST /v1/oauth/no-such-route: API Gateway's 403 {"message":"Missing Authentication Token"}`,
      'PASS GET /.well-known/jwks.json: 200 with 1 public key(s), max-age 300',
      'PASS POST /v1/oauth/token for the stored credential orders: 200 with an access token (expires_in 3600)',
      'PASS POST /v1/oauth/token for a credential no entry has: 403 credential_not_allowed',
    ]);
    expect(idp.received.at(-1)?.form.get('scope')).toBe('read');
    expect(run.code).toBe(0);
  });
});

describe('npm run smoke usage', () => {
  it.each(['--help', '-h'])('prints the usage and every setting with %s, exits 0 and contacts nothing', async (flag) => {
    const run = await smoke([flag]);

    expect(run.output).toContain('usage: npm run smoke -- <base URL');
    for (const name of [
      'SMOKE_CLIENT_ID',
      'SMOKE_CLIENT_SECRET',
      'SMOKE_TOKEN_URL',
      'SMOKE_ISSUER',
      'SMOKE_CREDENTIAL',
      'SMOKE_CREDENTIAL_SCOPE',
      'SMOKE_EXPECT_CACHE_HIT',
      'SMOKE_SIGV4',
      'AWS_REGION',
    ]) {
      expect(run.output).toContain(name);
    }
    expect(run.output).toContain('npm run smoke -- http://localhost:3000');
    expect(run.code).toBe(0);
    expect(run.networkAttempts).toEqual([]);
  });

  it('exits 2 on an option it does not know, instead of taking it for a URL', async () => {
    const run = await smoke(['--verbose']);

    expect(run.output).toContain('unknown option --verbose: --help prints the usage and settings');
    expect(run.code).toBe(2);
  });

  it('exits 2 with the usage when no base URL is given', async () => {
    const run = await smoke([]);

    expect(run.output).toContain('usage: npm run smoke -- <base URL');
    expect(run.code).toBe(2);
  });

  it.each([
    ['SMOKE_ISSUER without the client', { SMOKE_ISSUER: 'https://idp.example.com' }, 'SMOKE_ISSUER needs the client: set SMOKE_CLIENT_ID'],
    [
      'SMOKE_CREDENTIAL_SCOPE without SMOKE_CREDENTIAL',
      { SMOKE_CREDENTIAL_SCOPE: 'read' },
      'SMOKE_CREDENTIAL_SCOPE needs SMOKE_CREDENTIAL',
    ],
  ])('exits 2 for %s, naming what is missing', async (_case, env, message) => {
    const run = await smoke(['http://127.0.0.1:9'], env);

    expect(run.output).toContain(message);
    expect(run.code).toBe(2);
  });

  it('exits 2 naming the missing variables when only some of the token client is set', async () => {
    const run = await smoke(['http://127.0.0.1:9'], { SMOKE_CLIENT_ID: 'demo-client' });

    expect(run.output).toContain(
      'set SMOKE_CLIENT_ID, SMOKE_CLIENT_SECRET, SMOKE_TOKEN_URL together, or none of them: SMOKE_CLIENT_SECRET, SMOKE_TOKEN_URL missing',
    );
    expect(run.code).toBe(2);
  });
});

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

const sha256 = (data: string): string => createHash('sha256').update(data).digest('hex');
const hmac = (key: Buffer | string, data: string): Buffer => createHmac('sha256', key).update(data).digest();

/**
 * SigV4 checked independently of the signer under test (AWS's "Create a signed AWS API request"):
 * the credential scope names this key, region and execute-api, the session token is signed, and the
 * signature over the request as received matches.
 */
function signatureIsValid(request: IncomingMessage, body: string): boolean {
  const match =
    /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$/.exec(
      request.headers.authorization ?? '',
    );
  const amzDate = request.headers['x-amz-date'];
  if (!match || typeof amzDate !== 'string') return false;
  const [, keyId, date, region, service, signedHeaders = '', signature] = match;
  const names = signedHeaders.split(';');
  if (keyId !== AWS_KEY.id || region !== REGION || service !== 'execute-api' || !amzDate.startsWith(date ?? '-')) return false;
  if (!names.includes('host') || !names.includes('x-amz-security-token') || request.headers['x-amz-security-token'] !== AWS_KEY.session)
    return false;
  const canonicalHeaders = names.map((name) => `${name}:${String(request.headers[name] ?? '').trim()}\n`).join('');
  const canonicalRequest = [request.method, request.url, '', canonicalHeaders, signedHeaders, sha256(body)].join('\n');
  const scope = `${date}/${region}/${service}/aws4_request`;
  const stringToSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256(canonicalRequest)].join('\n');
  const signingKey = hmac(hmac(hmac(hmac(`AWS4${AWS_KEY.secret}`, date ?? ''), region ?? ''), service ?? ''), 'aws4_request');
  return hmac(signingKey, stringToSign).toString('hex') === signature;
}
