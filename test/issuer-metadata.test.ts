import { Deadline, epochMs, systemClock } from '../lambda/clock';
import { createHook } from 'node:async_hooks';
import { ExchangeError } from '../lambda/errors';
import { destroyAgents } from '../lambda/upstream/guarded-agents';
import { IssuerMetadata, type MetadataReport } from '../lambda/upstream/issuer-metadata';
import { metadataUrls } from '../lambda/upstream/well-known';
import { checkTokenUrl, parseAllowlist, type TokenTarget } from '../lambda/policy/token-url-policy';
import { after, issuerScript, metadataDocument, silent, wellKnownPaths } from './support/scripted-issuer';
import { createTestCa } from './support/test-pki';
import { json, type Script, startTokenServer, type TokenServer } from './support/token-server';
import { lockNetwork, type NetworkJail, startTrapListeners, type TrapListeners } from './support/trap-listeners';

// The metadata of lambda/issuer-metadata.ts on its own: how long and how much it keeps (on a clock
// the tests move), how a request that joins a fetch keeps its own deadline, and where the policy
// refuses what a document names, against a scripted metadata server on 127.0.0.1.

let server: TokenServer;

beforeAll(async () => {
  server = await startTokenServer();
});

beforeEach(() => {
  server.received.length = 0;
});

afterAll(async () => {
  destroyAgents();
  await server.close();
});

/** A clock the tests move by hand. */
/** The system's timers with a wall clock of the test's. */
const wallClock = (now: () => number) => ({ ...systemClock(), epoch: () => epochMs(now()) });

function manualClock(start = 1_000_000): { now: () => number; advance: (ms: number) => void } {
  let time = start;
  return { now: () => time, advance: (ms) => (time += ms) };
}

const issuerAt = (path: string): string => `${server.origin}${path}`;
/** The issuer as the resolver hands it over: accepted by the policy under an allowlist naming the server. */
const targetOf = (issuer: string): TokenTarget => checkTokenUrl(issuer, parseAllowlist(server.origin), 'issuer');
const soon = (ms = 2000): Deadline => Deadline.after(systemClock(), ms);

/** The server plays each issuer path with a document naming `${issuer}/token`. */
function publish(...paths: string[]): void {
  const documents: Record<string, Script> = {};
  for (const path of paths) documents[wellKnownPaths(path).oidc] = json(200, metadataDocument(issuerAt(path), `${issuerAt(path)}/token`));
  server.answer(issuerScript(documents));
}

const fetchesOf = (path: string): number => server.received.filter((received) => received.url === wellKnownPaths(path).oidc).length;

/** The endpoint's URL, or the refusal as the caller would see it. */
async function outcome(
  metadata: IssuerMetadata,
  path: string,
  deadline = soon(),
  report: MetadataReport = {},
): Promise<string | { status: number; description: string }> {
  try {
    return (await metadata.tokenEndpoint(issuerAt(path), targetOf(issuerAt(path)), deadline, report)).url;
  } catch (error) {
    if (!(error instanceof ExchangeError)) throw error;
    return { status: error.statusCode, description: error.description };
  }
}

describe('metadataUrls', () => {
  it.each([
    [
      'https://idp.example.com',
      'https://idp.example.com/.well-known/openid-configuration',
      'https://idp.example.com/.well-known/oauth-authorization-server',
    ],
    [
      'https://idp.example.com/',
      'https://idp.example.com/.well-known/openid-configuration',
      'https://idp.example.com/.well-known/oauth-authorization-server',
    ],
    [
      'https://login.microsoftonline.com/tenant-id/v2.0',
      'https://login.microsoftonline.com/tenant-id/v2.0/.well-known/openid-configuration',
      'https://login.microsoftonline.com/.well-known/oauth-authorization-server/tenant-id/v2.0',
    ],
    [
      'https://acme.eu.auth0.com/',
      'https://acme.eu.auth0.com/.well-known/openid-configuration',
      'https://acme.eu.auth0.com/.well-known/oauth-authorization-server',
    ],
    [
      'https://keycloak.example.com:8443/realms/payments/',
      'https://keycloak.example.com:8443/realms/payments/.well-known/openid-configuration',
      'https://keycloak.example.com:8443/.well-known/oauth-authorization-server/realms/payments',
    ],
  ])("reads %s at OpenID Connect Discovery's address, then RFC 8414's", (issuer, oidc, oauth) => {
    expect(metadataUrls(new URL(issuer)).map(String)).toEqual([oidc, oauth]);
  });
});

describe('how long metadata is kept', () => {
  it('keeps it for ten minutes by default', async () => {
    // Prepare
    const clock = manualClock();
    const metadata = new IssuerMetadata(parseAllowlist(server.origin), undefined, wallClock(clock.now));
    publish('/a');

    // Act
    await outcome(metadata, '/a');
    clock.advance(599_999);
    await outcome(metadata, '/a');
    const fetchesWhileKept = fetchesOf('/a');
    clock.advance(1);
    await outcome(metadata, '/a');

    // Assess
    expect([fetchesWhileKept, fetchesOf('/a')]).toEqual([1, 2]);
  });

  it('keeps 500 issuers by default, least recently used out first', async () => {
    // Prepare
    const metadata = new IssuerMetadata(parseAllowlist(server.origin), undefined, wallClock(manualClock().now));
    const paths = Array.from({ length: 501 }, (_, index) => `/i${index}`);
    publish(...paths);

    // Act: the 501st pushes out the first; the second is still kept.
    for (const path of paths) await outcome(metadata, path);
    await outcome(metadata, '/i1');
    await outcome(metadata, '/i0');

    // Assess
    expect([fetchesOf('/i0'), fetchesOf('/i1')]).toEqual([2, 1]);
  });

  it('answers from the kept copy until its time is up, then fetches again', async () => {
    // Prepare
    const clock = manualClock();
    const metadata = new IssuerMetadata(parseAllowlist(server.origin), { ttlMs: 60_000, maxIssuers: 10 }, wallClock(clock.now));
    publish('/a');

    // Act
    await outcome(metadata, '/a');
    clock.advance(59_999);
    const lastKeptReport: MetadataReport = {};
    await outcome(metadata, '/a', soon(), lastKeptReport);
    const fetchesWhileKept = fetchesOf('/a');
    clock.advance(1);
    await outcome(metadata, '/a');

    // Assess
    expect(fetchesWhileKept).toBe(1);
    expect(lastKeptReport).toEqual({});
    expect(fetchesOf('/a')).toBe(2);
  });

  it('never answers from an expired copy when the new fetch fails', async () => {
    // Prepare
    const clock = manualClock();
    const metadata = new IssuerMetadata(parseAllowlist(server.origin), { ttlMs: 60_000, maxIssuers: 10 }, wallClock(clock.now));
    publish('/a');
    await outcome(metadata, '/a');
    clock.advance(60_000);
    server.answer(issuerScript({ [wellKnownPaths('/a').oidc]: json(503, {}) }));

    // Act
    const result = await outcome(metadata, '/a');

    // Assess
    expect(result).toEqual({ status: 502, description: 'The identity provider could not be reached or gave an unusable answer' });
  });

  it('keeps the most recently used issuers when there are more than it holds', async () => {
    // Prepare
    const metadata = new IssuerMetadata(parseAllowlist(server.origin), { ttlMs: 60_000, maxIssuers: 2 }, wallClock(manualClock().now));
    publish('/a', '/b', '/c');

    // Act: /a is used again after /b, so /b is the least recently used when /c comes.
    for (const path of ['/a', '/b', '/a', '/c', '/a', '/c', '/b']) await outcome(metadata, path);

    // Assess
    expect([fetchesOf('/a'), fetchesOf('/b'), fetchesOf('/c')]).toEqual([1, 2, 1]);
  });

  it('keeps nothing of an endpoint the policy refuses: the next request asks again', async () => {
    // Prepare: the endpoint is on another origin than the one allowlisted.
    const metadata = new IssuerMetadata(parseAllowlist(server.origin));
    server.answer(
      issuerScript({ [wellKnownPaths('/a').oidc]: json(200, metadataDocument(issuerAt('/a'), 'https://elsewhere.example.com/token')) }),
    );

    // Act
    const results = [await outcome(metadata, '/a'), await outcome(metadata, '/a')];

    // Assess
    expect(results).toEqual([
      { status: 403, description: "the issuer's token_endpoint is not in the allowlist" },
      { status: 403, description: "the issuer's token_endpoint is not in the allowlist" },
    ]);
    expect(fetchesOf('/a')).toBe(2);
  });
});

describe('a request that joins a fetch under way', () => {
  it('gives up at its own deadline, while the fetch goes on for the request that began it', async () => {
    // Prepare
    const metadata = new IssuerMetadata(parseAllowlist(server.origin));
    const document = metadataDocument(issuerAt('/slow'), `${issuerAt('/slow')}/token`);
    server.answer(issuerScript({ [wellKnownPaths('/slow').oidc]: after(1500, json(200, document)) }));
    const starterReport: MetadataReport = {};
    const joinerReport: MetadataReport = {};

    // Act
    const started = performance.now();
    const starter = outcome(metadata, '/slow', soon(6000), starterReport);
    const joiner = await outcome(metadata, '/slow', soon(200), joinerReport);
    const joinerElapsed = performance.now() - started;
    const starterResult = await starter;

    // Assess
    expect(joiner).toEqual({ status: 504, description: 'The identity provider did not answer in time' });
    // A timer's delay is whole milliseconds, so it may end a fraction of one early.
    expect(joinerElapsed).toBeGreaterThanOrEqual(198);
    // Well before the fetch's answer at 1.5 s.
    expect(joinerElapsed).toBeLessThan(1200);
    expect(joinerReport).toMatchObject({ failure: 'timeout', latencyMs: expect.any(Number) });
    expect(starterResult).toBe(`${issuerAt('/slow')}/token`);
    expect(starterReport).toMatchObject({ status: 200 });
    expect(starterReport.failure).toBeUndefined();
    expect(fetchesOf('/slow')).toBe(1);
  });

  it('leaves no unhandled rejection when every waiter gave up before the fetch failed', async () => {
    // Prepare
    const metadata = new IssuerMetadata(parseAllowlist(server.origin));
    server.answer(issuerScript({ [wellKnownPaths('/late').oidc]: after(300, json(500, {})) }));
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => {
      unhandled.push(reason);
    };
    process.on('unhandledRejection', onUnhandled);

    try {
      // Act: the waiter gives up at 50 ms; the fetch itself has until 2 s, and fails at 300 ms.
      const report: MetadataReport = {};
      const fetch = metadata.tokenEndpoint(issuerAt('/late'), targetOf(issuerAt('/late')), soon(2000), {});
      const waiter = await outcome(metadata, '/late', soon(50), report);
      await fetch.catch(() => undefined);
      await new Promise((resolve) => setTimeout(resolve, 50));

      // Assess
      expect(waiter).toEqual({ status: 504, description: 'The identity provider did not answer in time' });
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('stops waiting at once when its deadline has already passed', async () => {
    // Prepare
    const metadata = new IssuerMetadata(parseAllowlist(server.origin));
    server.answer(issuerScript({ [wellKnownPaths('/gone').oidc]: silent }));

    // Act
    const result = await outcome(metadata, '/gone', soon(-1));

    // Assess
    expect(result).toEqual({ status: 504, description: 'The identity provider did not answer in time' });
  });
});

describe('each metadata request, and what it leaves behind', () => {
  /** The script, with the time the server's side of each connection it answered closed. */
  function closeTimes(script: Script): { script: Script; closedAt: number[] } {
    const closedAt: number[] = [];
    return {
      closedAt,
      script: (request, response) => {
        response.socket?.once('close', () => closedAt.push(performance.now()));
        return script(request, response);
      },
    };
  }

  beforeEach(() => destroyAgents());

  it('reports the time it waited for the network, to a tenth of a millisecond', async () => {
    // Prepare
    const metadata = new IssuerMetadata(parseAllowlist(server.origin));
    const document = metadataDocument(issuerAt('/timed'), `${issuerAt('/timed')}/token`);
    server.answer(issuerScript({ [wellKnownPaths('/timed').oidc]: after(100, json(200, document)) }));
    const report: MetadataReport = {};

    // Act
    const started = performance.now();
    await outcome(metadata, '/timed', soon(), report);
    const elapsed = performance.now() - started;

    // Assess
    expect(report.latencyMs).toBeGreaterThanOrEqual(99);
    expect(report.latencyMs).toBeLessThanOrEqual(elapsed + 0.05);
    expect(Number.isInteger(Math.round((report.latencyMs ?? 0) * 10))).toBe(true);
    expect((report.latencyMs ?? 0) * 10).toBeCloseTo(Math.round((report.latencyMs ?? 0) * 10), 6);
  });

  it('hangs up at once on an answer that is not a 2xx, rather than reading its body', async () => {
    // Prepare: a 404 that would go on sending for a long time.
    const metadata = new IssuerMetadata(parseAllowlist(server.origin));
    const paths = wellKnownPaths('/gone');
    const slowNotFound = closeTimes((_request, response) => {
      response.writeHead(404, { 'content-type': 'text/html' });
      response.write('<html>');
    });
    server.answer(
      issuerScript({
        [paths.oidc]: slowNotFound.script,
        [paths.oauth]: json(200, metadataDocument(issuerAt('/gone'), `${issuerAt('/gone')}/token`)),
      }),
    );

    // Act
    const started = performance.now();
    const result = await outcome(metadata, '/gone', soon(10_000));
    await new Promise((resolve) => setTimeout(resolve, 100));

    // Assess: the second form answered, and the first connection was closed long before the deadline.
    expect(result).toBe(`${issuerAt('/gone')}/token`);
    expect(slowNotFound.closedAt).toHaveLength(1);
    expect((slowNotFound.closedAt[0] ?? Infinity) - started).toBeLessThan(3000);
  });

  it('hangs up at once on a document declared too large, before its body', async () => {
    // Prepare
    const metadata = new IssuerMetadata(parseAllowlist(server.origin));
    const declaredTooLarge = closeTimes((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': String(10 * 1024 * 1024) });
      response.write('{"issuer":');
    });
    server.answer(issuerScript({ [wellKnownPaths('/big').oidc]: declaredTooLarge.script }));
    const report: MetadataReport = {};

    // Act
    const started = performance.now();
    await outcome(metadata, '/big', soon(10_000), report);
    await new Promise((resolve) => setTimeout(resolve, 100));

    // Assess
    expect(report.failure).toBe('too_large');
    expect((declaredTooLarge.closedAt[0] ?? Infinity) - started).toBeLessThan(3000);
  });

  it('gives up a document that never ends at the deadline, and closes its connection then', async () => {
    // Prepare: the headers and a first part come at once, the rest never.
    const metadata = new IssuerMetadata(parseAllowlist(server.origin));
    const stalled = closeTimes((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.write('{"issuer":');
    });
    server.answer(issuerScript({ [wellKnownPaths('/stalled').oidc]: stalled.script }));
    const report: MetadataReport = {};

    // Act
    const started = performance.now();
    const result = await outcome(metadata, '/stalled', soon(400), report);
    await new Promise((resolve) => setTimeout(resolve, 100));

    // Assess
    expect(result).toEqual({ status: 504, description: 'The identity provider did not answer in time' });
    expect(report.failure).toBe('timeout');
    expect((stalled.closedAt[0] ?? Infinity) - started).toBeGreaterThanOrEqual(399);
    expect((stalled.closedAt[0] ?? Infinity) - started).toBeLessThan(2000);
  });

  it('answers 502 at once for a document cut short, without waiting for the deadline', async () => {
    // Prepare: a declared length, half the body, then the connection drops.
    const metadata = new IssuerMetadata(parseAllowlist(server.origin));
    server.answer(
      issuerScript({
        [wellKnownPaths('/cut').oidc]: (_request, response) => {
          response.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
          response.write('{"issuer":"');
          setTimeout(() => response.socket?.destroy(), 20);
        },
      }),
    );
    const report: MetadataReport = {};

    // Act
    const started = performance.now();
    const result = await outcome(metadata, '/cut', soon(10_000), report);

    // Assess
    expect(result).toEqual({ status: 502, description: 'The identity provider could not be reached or gave an unusable answer' });
    expect(report.failure).toBe('unreachable');
    expect(performance.now() - started).toBeLessThan(3000);
  });

  it('answers 504 for an issuer that cannot be reached once the deadline has passed', async () => {
    // Prepare: nothing listens any more, and the deadline is already behind.
    const closed = await startTokenServer();
    const deadOrigin = closed.origin;
    await closed.close();
    const metadata = new IssuerMetadata(parseAllowlist(deadOrigin));
    const issuer = `${deadOrigin}/x`;
    const report: MetadataReport = {};

    // Act
    let status: number | undefined;
    try {
      await metadata.tokenEndpoint(issuer, checkTokenUrl(issuer, parseAllowlist(deadOrigin), 'issuer'), soon(-1), report);
    } catch (error) {
      status = (error as ExchangeError).statusCode;
    }

    // Assess
    expect(status).toBe(504);
    expect(report.failure).toBe('timeout');
  });

  it('calls any failure a timeout once the deadline has passed, even one that comes before its timer', async () => {
    // Prepare: the guard's refusal comes on the next tick, before any timer can run.
    const metadata = new IssuerMetadata([]);
    const issuer = issuerAt('/late');
    const refusing: TokenTarget = { url: new URL(issuer), permit: { key: 'refuse-all', allows: () => false }, field: 'issuer' };
    const report: MetadataReport = {};

    // Act
    let status: number | undefined;
    try {
      await metadata.tokenEndpoint(issuer, refusing, soon(-1), report);
    } catch (error) {
      status = (error as ExchangeError).statusCode;
    }

    // Assess
    expect(status).toBe(504);
    expect(report.failure).toBe('timeout');
  });

  it('leaves no deadline timer behind once the metadata has come', async () => {
    // Prepare: watch the timers armed for the deadline, a minute away, apart from the sockets' own
    // (the agent's 15 s idle timeout, the server's 5 s keep-alive).
    server.answer(
      issuerScript({ [wellKnownPaths('/timers').oidc]: json(200, metadataDocument(issuerAt('/timers'), `${issuerAt('/timers')}/token`)) }),
    );
    const metadata = new IssuerMetadata(parseAllowlist(server.origin));
    const armed = new Set<number>();
    let everArmed = 0;
    const hook = createHook({
      init(id, type, _trigger, resource) {
        if (type !== 'Timeout' || ((resource as { _idleTimeout?: number })._idleTimeout ?? 0) <= 30_000) return;
        armed.add(id);
        everArmed++;
      },
      destroy(id) {
        armed.delete(id);
      },
    });

    // Act
    hook.enable();
    try {
      await outcome(metadata, '/timers', soon(60_000));
      await new Promise((resolve) => setTimeout(resolve, 50));
    } finally {
      hook.disable();
    }

    // Assess: two were armed (the request's and the wait's), and both are gone.
    expect(everArmed).toBe(2);
    expect([...armed]).toEqual([]);
  });
});

describe('where the policy refuses what a request by issuer reaches', () => {
  let trap: TrapListeners;
  let jail: NetworkJail;

  beforeAll(async () => {
    trap = await startTrapListeners();
    jail = lockNetwork();
  });

  afterAll(async () => {
    jail.release();
    await trap.close();
  });

  beforeEach(() => {
    destroyAgents();
    jail.reset();
  });

  const serverPort = (): number => Number(new URL(server.origin).port);

  // No allowlist for the endpoint: any public https URL. The issuer is taken as the resolver would
  // hand over one accepted by the policy, so the loopback server can play a public issuer.
  it.each([
    ['the EC2 metadata address', 'https://169.254.169.254/latest/meta-data/iam/security-credentials/'],
    ['the ECS credentials address', 'https://169.254.170.2/v2/credentials/'],
    ['a loopback address', 'https://127.0.0.1:{trap}/token'],
    ['the IPv6 loopback', 'https://[::1]:{trap}/token'],
    ['localhost', 'https://localhost:{trap}/token'],
    ['a private address', 'https://10.0.0.1/token'],
    ['an IPv4-mapped metadata address', 'https://[::ffff:169.254.169.254]/token'],
  ])('refuses a token endpoint at %s with 403, connecting only to the issuer', async (_case, endpoint) => {
    // Prepare
    const url = endpoint.replace('{trap}', String(trap.port));
    const metadata = new IssuerMetadata([]);
    server.answer(issuerScript({ [wellKnownPaths('/idp').oidc]: json(200, metadataDocument(issuerAt('/idp'), url)) }));
    const report: MetadataReport = {};

    // Act
    const result = await outcome(metadata, '/idp', soon(), report);

    // Assess
    expect(result).toEqual({ status: 403, description: "the issuer's token_endpoint points to an address that is not allowed" });
    expect(report.failure).toBe('token_endpoint_not_allowed');
    expect(jail.attempts).toEqual([{ host: '127.0.0.1', port: serverPort(), allowed: true }]);
    expect(jail.lookups).toEqual([]);
    expect(trap.accepted).toEqual([]);
  });

  it('refuses an http token endpoint with no allowlist entry naming http', async () => {
    // Prepare
    const metadata = new IssuerMetadata([]);
    server.answer(
      issuerScript({ [wellKnownPaths('/idp').oidc]: json(200, metadataDocument(issuerAt('/idp'), 'http://idp.example.com/token')) }),
    );

    // Act
    const result = await outcome(metadata, '/idp');

    // Assess
    expect(result).toEqual({ status: 403, description: "the issuer's token_endpoint must use https" });
    expect(jail.lookups).toEqual([]);
  });

  it("refuses the issuer's own address at connect time with 403, before a byte is sent", async () => {
    // Prepare: a permit that allows nothing, as the guard holds a public-only issuer whose name resolves to loopback.
    const metadata = new IssuerMetadata([]);
    const issuer = issuerAt('/idp');
    const refusing: TokenTarget = { url: new URL(issuer), permit: { key: 'refuse-all', allows: () => false }, field: 'issuer' };
    const report: MetadataReport = {};
    const connectionsBefore = server.connections;

    // Act
    let result: unknown;
    try {
      await metadata.tokenEndpoint(issuer, refusing, soon(), report);
    } catch (error) {
      result = { status: (error as ExchangeError).statusCode, description: (error as ExchangeError).description };
    }

    // Assess
    expect(result).toEqual({ status: 403, description: 'issuer points to an address that is not allowed' });
    expect(report.failure).toBe('address_not_allowed');
    expect(server.connections).toBe(connectionsBefore);
    expect(jail.attempts).toEqual([]);
  });
});

describe('an issuer served over HTTPS', () => {
  let tlsServer: TokenServer;

  beforeAll(async () => {
    tlsServer = await startTokenServer(json(200, {}), createTestCa('Untrusted test CA').issue(['localhost']));
  });

  afterAll(async () => {
    await tlsServer.close();
  });

  it('is reached over TLS: a certificate from an untrusted CA is a 502, and no request is sent', async () => {
    // Prepare
    const issuer = `${tlsServer.origin}/realms/tls`;
    const metadata = new IssuerMetadata(parseAllowlist(tlsServer.origin));
    const report: MetadataReport = {};

    // Act
    let status: number | undefined;
    try {
      await metadata.tokenEndpoint(issuer, checkTokenUrl(issuer, parseAllowlist(tlsServer.origin), 'issuer'), soon(), report);
    } catch (error) {
      status = (error as ExchangeError).statusCode;
    }

    // Assess
    expect(status).toBe(502);
    expect(report.failure).toBe('unreachable');
    expect(tlsServer.connections).toBe(1);
    expect(tlsServer.received).toEqual([]);
  });
});
