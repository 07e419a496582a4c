import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { TOKEN_PATHS } from '../lambda/request/routes';
import { parseTokenRequest } from '../lambda/request/token-request';
import { type ReceivedHttpRequest, toApiGatewayEvent, toRestApiEvent } from '../local/api-gateway-event';

const REPO_ROOT = join(__dirname, '..');
const START_TIMEOUT_MS = 20_000;
const REQUEST_TIMEOUT_MS = 10_000;
const STOP_TIMEOUT_MS = 5_000;
const WRONG_SECRET = `not-the-secret-${process.pid}`;

/** What `npm start` printed, read back the way a reader of the terminal would. */
interface Banner {
  text: string;
  serviceUrl: string;
  issuer: string;
  tokenUrl: string;
  postClient: { clientId: string; clientSecret: string };
  curl: { url: string; contentType: string; body: string };
  /** The second curl: the same request by issuer. */
  issuerCurl: { url: string; body: string };
  /** The third curl: a stored credential's token, as an IAM caller. */
  storedCurl: { url: string; iamCaller: string; body: string };
}

interface LocalServer {
  child: ChildProcess;
  /** Settles with the exit code once the process has exited and its stdout and stderr are closed. */
  closed: Promise<number | null>;
  banner: Banner;
  stdout(): string;
  stderr(): string;
}

/** Starts the local server exactly as `npm start` does, on free ports, with `settings`, and waits for its banner's `curls` curls. */
async function startLocalServer(settings: Record<string, string> = {}, curls = 3): Promise<LocalServer> {
  const env: NodeJS.ProcessEnv = { ...process.env, PORT: '0', IDP_PORT: '0', LOG_LEVEL: 'INFO', DEBUG: '*' };
  for (const name of [
    'TOKEN_URL_ALLOWLIST',
    'TOKEN_CACHE',
    'UPSTREAM_TIMEOUT_MS',
    'POWERTOOLS_METRICS_DISABLED',
    'API',
    'STORED_CREDENTIALS',
  ]) {
    delete env[name];
  }
  Object.assign(env, settings);
  // Its own process group, so afterAll can stop tsx and the node process it spawns even if a test failed.
  const child = spawn(join(REPO_ROOT, 'node_modules/.bin/tsx'), ['local/server.ts'], {
    cwd: REPO_ROOT,
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    stdout += chunk.toString('utf8');
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
  });
  const closed = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  const server: LocalServer = { child, closed, banner: undefined as unknown as Banner, stdout: () => stdout, stderr: () => stderr };

  const deadline = Date.now() + START_TIMEOUT_MS;
  // The curls, by token URL, by issuer and (with the demo's stored credentials) by stored credential, end the banner.
  while ((stdout.match(/-d '[^']*'\n/g) ?? []).length < curls || (curls < 3 && !stdout.includes('SigV4 signature'))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      stopLocalServer(server);
      throw new Error(`the local server did not print its banner (exit ${child.exitCode}); stderr:\n${stderr}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  if (curls === 3) server.banner = parseBanner(stdout);
  return server;
}

function parseBanner(text: string): Banner {
  const match = (pattern: RegExp): string => {
    const found = pattern.exec(text)?.[1];
    if (found === undefined) throw new Error(`the banner has no match for ${pattern}:\n${text}`);
    return found;
  };
  const curls = [...text.matchAll(/curl -s (\S+) [\s\S]*?-d '([^']+)'\n/g)];
  const [, byIssuer, last] = curls;
  if (curls.length !== 3 || byIssuer === undefined || last === undefined)
    throw new Error(`the banner has ${curls.length} curls, not 3:\n${text}`);
  return {
    text: text.slice(0, (last.index ?? 0) + last[0].length),
    serviceUrl: match(/listening on (http:\/\/\S+)/),
    issuer: match(/issuer +(http\S+)/),
    tokenUrl: match(/token URL +(http\S+)/),
    postClient: {
      clientId: match(/demo client\s+(\S+) \/ \S+\s+\(client_secret_post\)/),
      clientSecret: match(/ \/ (\S+)\s+\(client_secret_post\)/),
    },
    curl: { url: match(/curl -s (\S+)/), contentType: match(/-H 'content-type: ([^']+)'/), body: match(/-d '([^']+)'/) },
    issuerCurl: { url: byIssuer[1] ?? '', body: byIssuer[2] ?? '' },
    storedCurl: { url: last[1] ?? '', iamCaller: /-H 'x-local-iam-caller: ([^']+)'/.exec(last[0])?.[1] ?? '', body: last[2] ?? '' },
  };
}

/** Kills the whole process group (tsx and the node process it spawned); a no-op once it is gone. */
function stopLocalServer(server: LocalServer | undefined): void {
  const pid = server?.child.pid;
  if (pid === undefined) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // ESRCH: already gone.
  }
}

/** The exit code once the process has exited and its output is fully read; undefined if not within `ms`. */
async function exitWithin(server: LocalServer, ms: number): Promise<number | null | undefined> {
  const timeout = new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), ms).unref());
  return Promise.race([server.closed, timeout]);
}

function post(url: string, body: string, contentType = 'application/json'): Promise<Response> {
  return fetch(url, { method: 'POST', headers: { 'content-type': contentType }, body, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
}

describe.each([
  ['the HTTP API', 'http'],
  ['a REST API', 'rest'],
])('npm start (local/server.ts) as %s', (apiName, api) => {
  let server: LocalServer | undefined;
  const local = (): LocalServer => {
    if (!server) throw new Error('the local server did not start');
    return server;
  };
  /** `apigw-requestid` and status of every answer the handler gave, to match against the log lines. */
  const handled: { requestId: string; status: number }[] = [];

  async function postToken(path: string, body: string, contentType?: string): Promise<Response> {
    const response = await post(`${local().banner.serviceUrl}${path}`, body, contentType);
    handled.push({ requestId: response.headers.get('apigw-requestid') ?? '', status: response.status });
    return response;
  }

  function expectContractHeaders(response: Response): void {
    expect(response.headers.get('content-type')).toBe('application/json');
    expect(response.headers.get('cache-control')).toBe('no-store');
    expect(response.headers.get('pragma')).toBe('no-cache');
  }

  beforeAll(async () => {
    server = await startLocalServer({ API: api });
  }, START_TIMEOUT_MS + 5_000);

  it(`says in its banner that it stands in for ${apiName}`, () => {
    expect(local().banner.text).toContain(`as ${apiName}: the handler gets payload ${api === 'rest' ? '1.0' : '2.0'} events`);
  });

  afterAll(async () => {
    stopLocalServer(server);
    if (server) await exitWithin(server, STOP_TIMEOUT_MS);
  }, STOP_TIMEOUT_MS + 5_000);

  it('prints a curl whose request returns a token from the embedded IdP', async () => {
    // Prepare
    const { curl, serviceUrl, tokenUrl } = local().banner;
    expect(curl.url).toBe(`${serviceUrl}/v1/oauth/token`);
    expect(JSON.parse(curl.body)).toMatchObject({ access_token_url: tokenUrl });

    // Act
    const response = await post(curl.url, curl.body, curl.contentType);
    handled.push({ requestId: response.headers.get('apigw-requestid') ?? '', status: response.status });

    // Assess
    expect(response.status).toBe(200);
    expectContractHeaders(response);
    const token = await response.json();
    expect(token).toEqual({ access_token: expect.any(String), token_type: 'Bearer', expires_in: expect.any(Number), scope: 'read' });
  });

  it("prints a curl by issuer whose request returns a token: the endpoint read from the embedded IdP's metadata", async () => {
    // Prepare
    const { issuerCurl, serviceUrl, issuer, curl } = local().banner;
    expect(issuerCurl.url).toBe(`${serviceUrl}/v1/oauth/token`);
    expect(JSON.parse(issuerCurl.body)).toEqual({ ...JSON.parse(curl.body), access_token_url: undefined, issuer });

    // Act
    const response = await postToken('/v1/oauth/token', issuerCurl.body);

    // Assess
    expect(response.status).toBe(200);
    expectContractHeaders(response);
    const token = await response.json();
    expect(token).toEqual({ access_token: expect.any(String), token_type: 'Bearer', expires_in: expect.any(Number), scope: 'read' });
  });

  it('prints a curl by stored credential whose request returns a token from a client that has no secret', async () => {
    // Prepare
    const { storedCurl, serviceUrl } = local().banner;
    expect(storedCurl.url).toBe(`${serviceUrl}/v1/oauth/token`);
    expect(JSON.parse(storedCurl.body)).toEqual({ credential: 'demo-keyless', scope: 'read' });
    const headers = { 'content-type': 'application/json', 'x-local-iam-caller': storedCurl.iamCaller };

    // Act
    const response = await fetch(storedCurl.url, {
      method: 'POST',
      headers,
      body: storedCurl.body,
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    handled.push({ requestId: response.headers.get('apigw-requestid') ?? '', status: response.status });
    const anonymous = await postToken('/v1/oauth/token', storedCurl.body);

    // Assess
    expect(response.status).toBe(200);
    expectContractHeaders(response);
    expect(await response.json()).toEqual({
      access_token: expect.any(String),
      token_type: 'Bearer',
      expires_in: expect.any(Number),
      scope: 'read',
    });
    expect(anonymous.status).toBe(403);
    expect(((await anonymous.json()) as { code?: string }).code).toBe('credential_not_allowed');
  });

  it('says in its banner how to act as an IAM caller locally, and that the deployed API takes the caller from SigV4', () => {
    const { text, serviceUrl } = local().banner;
    expect(text).toContain('Act as an IAM caller with the x-local-iam-caller header: only this local gateway reads it');
    expect(text).toContain('SigV4 signature');
    expect(text).toMatch(
      new RegExp(`the IdP knows it only by the JWKS URL http://127\\.0\\.0\\.1:${new URL(serviceUrl).port}/\\.well-known/jwks\\.json`),
    );
  });

  it('serves the JWKS of the keyless client: one RSA public key, cacheable for 5 minutes', async () => {
    // Act
    const response = await fetch(`${local().banner.serviceUrl}/.well-known/jwks.json`, { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });

    // Assess
    expect(response.status).toBe(200);
    expect(response.headers.get('cache-control')).toBe('public, max-age=300');
    const { keys } = (await response.json()) as { keys: Record<string, string>[] };
    expect(keys.map((key) => Object.keys(key).sort())).toEqual([['alg', 'e', 'kid', 'kty', 'n', 'use']]);
  });

  it.each(TOKEN_PATHS)('answers the same request on %s', async (path) => {
    // Act
    const response = await postToken(path, local().banner.curl.body);

    // Assess
    expect(response.status).toBe(200);
    expectContractHeaders(response);
    expect(((await response.json()) as { access_token?: unknown }).access_token).toEqual(expect.any(String));
  });

  it('accepts a form-urlencoded body (base64-encoded by the HTTP API, as text by a REST API)', async () => {
    // Prepare
    const fields = JSON.parse(local().banner.curl.body) as Record<string, string>;

    // Act
    const response = await postToken('/oauth/token', new URLSearchParams(fields).toString(), 'application/x-www-form-urlencoded');

    // Assess
    expect(response.status).toBe(200);
    expectContractHeaders(response);
    expect(await response.json()).toMatchObject({ access_token: expect.any(String), scope: 'read' });
  });

  it('gets a token for the client registered for client_secret_post', async () => {
    // Prepare
    const { postClient, tokenUrl } = local().banner;
    const body = JSON.stringify({
      client_id: postClient.clientId,
      client_secret: postClient.clientSecret,
      access_token_url: tokenUrl,
      token_endpoint_auth_method: 'client_secret_post',
    });

    // Act
    const response = await postToken('/v1/oauth/token', body);

    // Assess
    expect(response.status).toBe(200);
    expect(((await response.json()) as { access_token?: unknown }).access_token).toEqual(expect.any(String));
  });

  it('returns 401 when the IdP rejects the secret', async () => {
    // Prepare
    const body = JSON.stringify({ ...JSON.parse(local().banner.curl.body), client_secret: WRONG_SECRET });

    // Act
    const response = await postToken('/v1/oauth/token', body);

    // Assess
    expect(response.status).toBe(401);
    expectContractHeaders(response);
    expect(await response.text()).toBe('{"code":"unauthorized","description":"Unauthorized credentials provided"}');
  });

  it("returns the handler's 413 for a body over the contract's 64 KiB", async () => {
    // Act
    const response = await postToken('/v1/oauth/token', JSON.stringify({ padding: 'x'.repeat(70 * 1024) }));

    // Assess
    expect(response.status).toBe(413);
    expectContractHeaders(response);
    expect(((await response.json()) as { code?: unknown }).code).toBe('payload_too_large');
  });

  // The 404 and the 10 MB 413 are API Gateway's own answers, not the function's: they carry only a
  // content type, as the deployed API does, and not the contract's cache headers.
  it.each([
    ['an unknown path', 'POST', '/v1/oauth/tokens'],
    ['GET on the token route', 'GET', '/v1/oauth/token'],
  ])('answers 404 like API Gateway for %s', async (_name, method, path) => {
    // Act
    const response = await fetch(`${local().banner.serviceUrl}${path}`, { method, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });

    // Assess
    expect(response.status).toBe(404);
    expect(response.headers.get('content-type')).toBe('application/json');
    expect(response.headers.get('cache-control')).toBeNull();
    expect(await response.text()).toBe('{"message":"Not Found"}');
  });

  it('answers 413 like API Gateway for a body over its 10 MB limit, without invoking the handler', async () => {
    // Act
    const response = await post(`${local().banner.serviceUrl}/v1/oauth/token`, 'x'.repeat(10 * 1024 * 1024 + 1));

    // Assess
    expect(response.status).toBe(413);
    expect(response.headers.get('content-type')).toBe('application/json');
    expect(await response.text()).toBe('{"message":"Request Entity Too Large"}');
  });

  it('serves openapi.yaml from the repository root', async () => {
    // Act
    const response = await fetch(`${local().banner.serviceUrl}/openapi.yaml`, { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });

    // Assess
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/yaml');
    expect(await response.text()).toBe(readFileSync(join(REPO_ROOT, 'openapi.yaml'), 'utf8'));
  });

  // The two tests below stop the server and read everything it printed, so they stay last.
  it('stops cleanly on SIGTERM', async () => {
    // Act
    local().child.kill('SIGTERM');

    // Assess
    expect(await exitWithin(local(), STOP_TIMEOUT_MS)).toBe(0);
  });

  it('logs one JSON line and one EMF metrics line per handled request, with its request id, outcome and status, one ColdStart, and never a secret', () => {
    // Prepare
    const { text: banner } = local().banner;
    const afterBanner = local()
      .stdout()
      .slice(local().stdout().indexOf(banner) + banner.length);
    const lines = afterBanner.split('\n').filter((line) => line.trim() !== '');

    // Assess
    const parsed = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    const records = parsed.filter((line) => line.message === 'token request');
    const metrics = parsed.filter((line) => '_aws' in line && line.ColdStart === undefined);
    const coldStarts = parsed.filter((line) => line.ColdStart === 1);
    expect(coldStarts).toHaveLength(1);
    expect(records.length + metrics.length + coldStarts.length).toBe(parsed.length);
    // The JWKS is fetched by the IdP too, whenever it checks an assertion: the token routes are what the tests sent.
    const tokenRecords = records.filter((record) => record.route !== 'GET /.well-known/jwks.json');
    expect(tokenRecords.map((record) => ({ requestId: record.function_request_id, status: record.status }))).toEqual(handled);
    // A stored credential's request has a line of its own, by credential.
    const byCredential = metrics.filter((metric) => 'CredentialRequests' in metric);
    expect(byCredential.map((metric) => [metric.credential, metric.outcome])).toEqual([['demo-keyless', 'ok']]);
    expect(
      metrics.filter((metric) => 'Requests' in metric).map((metric) => ({ outcome: metric.outcome, requests: metric.Requests })),
    ).toEqual(records.map((record) => ({ outcome: record.outcome, requests: 1 })));
    for (const record of records) expect(record.outcome).toEqual(expect.any(String));
    // DEBUG=* is set for the child: simple-oauth2 would print the form body and the Basic header.
    const basic = JSON.parse(local().banner.curl.body) as { client_id: string; client_secret: string };
    const secrets = [basic.client_secret, local().banner.postClient.clientSecret, WRONG_SECRET];
    const basicHeaders = [basic.client_secret, WRONG_SECRET].map((secret) =>
      Buffer.from(`${basic.client_id}:${secret}`).toString('base64'),
    );
    const printed = afterBanner + local().stderr();
    for (const secret of [...secrets, ...basicHeaders]) expect(printed).not.toContain(secret);
  });
});

describe('toApiGatewayEvent', () => {
  const formRequest: ReceivedHttpRequest = {
    method: 'POST',
    target: '/v1/oauth/token?a=1&a=2&b=x%20y',
    rawHeaders: [
      'Host',
      'localhost:3000',
      'Content-Type',
      'application/x-www-form-urlencoded',
      'X-Repeated',
      'one',
      'x-repeated',
      'two',
      'Cookie',
      'c1=v1; c2=v2',
      'User-Agent',
      'curl/8.5.0',
    ],
    body: Buffer.from('client_id=demo&client_secret=s&access_token_url=https%3A%2F%2Fidp.example.com%2Ftoken'),
  };
  const decision = { routeKey: 'POST /v1/oauth/token', requestId: 'req-1' };

  it('lower-cases header names, joins repeated headers with commas and leaves cookies out of the headers', () => {
    // Act
    const event = toApiGatewayEvent(formRequest, decision);

    // Assess
    expect(event.headers).toMatchObject({
      host: 'localhost:3000',
      'content-type': 'application/x-www-form-urlencoded',
      'x-repeated': 'one,two',
    });
    expect(Object.keys(event.headers).every((name) => name === name.toLowerCase())).toBe(true);
    expect(event.headers.cookie).toBeUndefined();
  });

  it('base64-encodes a form body, and the handler reads back the same fields', () => {
    // Act
    const event = toApiGatewayEvent(formRequest, decision);

    // Assess
    expect(event.isBase64Encoded).toBe(true);
    expect(event.body).toBe(formRequest.body.toString('base64'));
    expect(parseTokenRequest(event)).toMatchObject({
      clientId: 'demo',
      clientSecret: 's',
      accessTokenUrl: 'https://idp.example.com/token',
    });
  });

  it('passes a JSON body as plain text', () => {
    // Prepare
    const body = '{"client_id":"demo"}';
    const request = { ...formRequest, rawHeaders: ['Content-Type', 'application/json; charset=utf-8'], body: Buffer.from(body) };

    // Act
    const event = toApiGatewayEvent(request, decision);

    // Assess
    expect(event.isBase64Encoded).toBe(false);
    expect(event.body).toBe(body);
  });

  it('leaves out the body of a request that has none', () => {
    // Act
    const event = toApiGatewayEvent({ ...formRequest, body: Buffer.alloc(0) }, decision);

    // Assess
    expect(event.body).toBeUndefined();
    expect(event.isBase64Encoded).toBe(false);
  });

  it('fills the route key, path, query and the request context the handler reads as API Gateway does', () => {
    // Act
    const event = toApiGatewayEvent(formRequest, decision);

    // Assess
    expect(event).toMatchObject({
      version: '2.0',
      routeKey: 'POST /v1/oauth/token',
      rawPath: '/v1/oauth/token',
      rawQueryString: 'a=1&a=2&b=x%20y',
    });
    expect(event.requestContext).toEqual({ http: { method: 'POST', path: '/v1/oauth/token' }, requestId: 'req-1', stage: '$default' });
  });
});

describe('toRestApiEvent', () => {
  const request: ReceivedHttpRequest = {
    method: 'POST',
    target: '/oauth/token?a=1&a=2&b=x%20y',
    rawHeaders: [
      'Host',
      'localhost:3000',
      'Content-Type',
      'application/x-www-form-urlencoded',
      'X-Repeated',
      'one',
      'x-repeated',
      'two',
      'Cookie',
      'c=v',
    ],
    body: Buffer.from('client_id=demo&client_secret=s&access_token_url=https%3A%2F%2Fidp.example.com%2Ftoken'),
  };
  const gateway = { resource: '/oauth/token', requestId: 'req-1' };

  it("keeps header names as sent, each header's last value in headers and all of them in multiValueHeaders, cookies included", () => {
    // Act
    const event = toRestApiEvent(request, gateway);

    // Assess
    expect(event.headers).toEqual({
      Host: 'localhost:3000',
      'Content-Type': 'application/x-www-form-urlencoded',
      'X-Repeated': 'two',
      Cookie: 'c=v',
    });
    expect(event.multiValueHeaders['X-Repeated']).toEqual(['one', 'two']);
  });

  it('passes a form body as text, as a REST API without binary media types does, and the handler reads the same fields', () => {
    // Act
    const event = toRestApiEvent(request, gateway);

    // Assess
    expect([event.body, event.isBase64Encoded]).toEqual([request.body.toString('utf8'), false]);
    expect(parseTokenRequest(event)).toMatchObject({
      clientId: 'demo',
      clientSecret: 's',
      accessTokenUrl: 'https://idp.example.com/token',
    });
  });

  it('fills the resource, method, path, query, stage and the verified caller where a REST API puts them', () => {
    // Act
    const event = toRestApiEvent({ ...request, body: Buffer.alloc(0) }, { ...gateway, iamCaller: 'arn:aws:iam::000000000000:role/r' });

    // Assess
    expect(event).toMatchObject({
      resource: '/oauth/token',
      path: '/oauth/token',
      httpMethod: 'POST',
      queryStringParameters: { a: '2', b: 'x y' },
      multiValueQueryStringParameters: { a: ['1', '2'], b: ['x y'] },
      body: null,
    });
    expect(event.requestContext).toMatchObject({
      stage: '$default',
      requestId: 'req-1',
      identity: { userArn: 'arn:aws:iam::000000000000:role/r' },
    });
    expect(toRestApiEvent({ ...request, target: '/oauth/token' }, gateway).queryStringParameters).toBeNull();
  });
});

describe('npm start with settings of its own', () => {
  const tsx = join(REPO_ROOT, 'node_modules/.bin/tsx');

  it('answers --help with what it does and its settings, and starts nothing', () => {
    // Act
    const help = execFileSync(tsx, ['local/server.ts', '--help'], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
      stdio: 'pipe',
      timeout: START_TIMEOUT_MS,
    });

    // Assess
    expect(help).toContain('npm start [-- --api rest]');
    for (const setting of ['API=http|rest', 'PORT, IDP_PORT', 'TOKEN_CACHE=shared', 'STORED_CREDENTIALS_FILE'])
      expect(help).toContain(setting);
  });

  it('refuses an API it does not stand in for, naming the setting', () => {
    // Act
    const run = spawnSync(tsx, ['local/server.ts'], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
      env: { ...process.env, API: 'soap' },
      timeout: START_TIMEOUT_MS,
    });

    // Assess
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('npm start failed: API (or --api) must be http or rest, got "soap"');
  });

  it("serves the shell's STORED_CREDENTIALS instead of the demo's, and says so in its banner", async () => {
    // Prepare
    const entry = {
      name: 'mine',
      clientId: 'c',
      tokenUrl: 'https://idp.example.com/token',
      method: 'client_secret_post',
      secretId: 'mine',
    };
    const callers = ['arn:aws:iam::000000000000:role/mine'];
    const server = await startLocalServer(
      { STORED_CREDENTIALS: JSON.stringify([{ ...entry, callers }]), TOKEN_URL_ALLOWLIST: 'https://idp.example.com' },
      2,
    );
    try {
      const url = /listening on (http:\/\/\S+)/.exec(server.stdout())?.[1] ?? '';
      const ask = (credential: string) =>
        fetch(`${url}/v1/oauth/token`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-local-iam-caller': 'arn:aws:sts::000000000000:assumed-role/demo-caller/local' },
          body: JSON.stringify({ credential }),
          signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        });

      // Act
      const [demo, mine] = [await ask('demo-keyless'), await ask('mine')];

      // Assess: the demo credential is gone; the demo caller is not among this one's callers.
      expect(server.stdout()).toContain("Stored credentials: yours, from STORED_CREDENTIALS (1: mine), not the demo's.");
      expect([demo.status, mine.status]).toEqual([403, 403]);
    } finally {
      stopLocalServer(server);
      await exitWithin(server, STOP_TIMEOUT_MS);
    }
  });
});
