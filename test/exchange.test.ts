import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { ClientRequest } from 'node:http';
import type { Socket } from 'node:net';
import { type Clock, Deadline, systemClock } from '../lambda/clock';
import { loadConfig } from '../lambda/config';
import { checkTokenUrl, parseAllowlist } from '../lambda/policy/token-url-policy';
import { exchangeToken, type UpstreamReport } from '../lambda/upstream/exchange';
import { destroyAgents } from '../lambda/upstream/guarded-agents';
import { createHandler } from '../lambda/handler';
import { bodyOf, tokenEvent } from './support/events';
import { manualClock } from './support/manual-clock';
import { useScriptedIdp } from './support/scripted-idp';
import { DEMO_TOKEN, json } from './support/token-server';

// How the exchange behaves on the wire: what it sends, when it retries, what it reports. Every case
// goes through the handler to the scripted token server over real sockets.

const UPSTREAM_ERROR = { code: 'upstream_error', description: 'The identity provider could not be reached or gave an unusable answer' };

const idp = useScriptedIdp({ UPSTREAM_TIMEOUT_MS: '2000' });

const event = () =>
  tokenEvent({ client_id: 'service-a', client_secret: 'exchange-test-secret', access_token_url: `${idp.server.origin}/token` });

/**
 * Fail the next request that goes out on a reused socket with `error`, by destroying that real
 * socket with it: how a kept-alive connection the IdP dropped fails, with an error code of the
 * test's choosing (a scripted server can only ever cause ECONNRESET). Node publishes every client
 * request on this channel; the test only listens, the service never sees it.
 */
function failNextReusedSocket(error: Error): () => void {
  const onStart = (message: unknown): void => {
    const { request } = message as { request: ClientRequest };
    if (!request.reusedSocket) return;
    unsubscribe('http.client.request.start', onStart);
    const fail = (socket: Socket): void => {
      socket.destroy(error);
    };
    if (request.socket) fail(request.socket);
    else request.once('socket', fail);
  };
  subscribe('http.client.request.start', onStart);
  return () => unsubscribe('http.client.request.start', onStart);
}

const coded = (code: string | undefined): Error => Object.assign(new Error(`socket failed (${code ?? 'no code'})`), code ? { code } : {});

describe('the request sent to the IdP', () => {
  it('says it comes from token-exchange-service in User-Agent', async () => {
    // Act
    await idp.handle(event());

    // Assess
    expect(idp.server.received[0]?.headers['user-agent']).toBe('token-exchange-service');
  });
});

describe('a kept-alive socket that fails', () => {
  // A pooled socket to the server, so the next exchange reuses it.
  beforeEach(async () => {
    destroyAgents();
    await idp.handle(event());
    idp.server.received.length = 0;
  });

  afterEach(() => destroyAgents());

  it.each(['ECONNRESET', 'EPIPE', 'ECONNABORTED'])(
    'is retried once on a fresh connection when it fails with %s before any answer',
    async (code) => {
      // Prepare
      const stop = failNextReusedSocket(coded(code));
      const connectionsBefore = idp.server.connections;

      // Act
      const result = await idp.handle(event());
      stop();

      // Assess
      expect(result.statusCode).toBe(200);
      expect(bodyOf(result)).toEqual(DEMO_TOKEN);
      expect(idp.server.connections).toBe(connectionsBefore + 1);
    },
  );

  it.each([
    ['an error without a code', undefined],
    ['ETIMEDOUT', 'ETIMEDOUT'],
    ['ECONNREFUSED', 'ECONNREFUSED'],
  ])('is not retried when it fails with %s', async (_case, code) => {
    // Prepare
    const stop = failNextReusedSocket(coded(code));
    const connectionsBefore = idp.server.connections;

    // Act
    const result = await idp.handle(event());
    stop();

    // Assess
    expect(result.statusCode).toBe(502);
    expect(bodyOf(result)).toEqual(UPSTREAM_ERROR);
    expect(idp.server.connections).toBe(connectionsBefore);
  });

  it("is not retried for a caller's private_key_jwt assertion: the IdP would take its jti for a replay", async () => {
    // Prepare: a caller-signed assertion (only its shape is checked here), and a dead pooled socket
    const segment = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
    const assertion = `${segment({ alg: 'ES256' })}.${segment({ jti: 'once-only' })}.c2lnbmF0dXJl`;
    const stop = failNextReusedSocket(coded('ECONNRESET'));
    const connectionsBefore = idp.server.connections;

    // Act
    const result = await idp.handle(
      tokenEvent({
        client_id: 'service-a',
        client_assertion: assertion,
        client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
        access_token_url: `${idp.server.origin}/token`,
      }),
    );
    stop();

    // Assess
    expect(result.statusCode).toBe(502);
    expect(idp.server.received).toHaveLength(0);
    expect(idp.server.connections).toBe(connectionsBefore);
  });

  it('is retried when the IdP really resets it on the next request', async () => {
    // Prepare: the server drops the connection that carried the first request
    const reused = idp.server.connections;
    idp.server.answer((received, response) => {
      if (received.connection === reused) response.socket?.resetAndDestroy();
      else void json(200, DEMO_TOKEN)(received, response);
    });

    // Act
    const result = await idp.handle(event());

    // Assess
    expect(result.statusCode).toBe(200);
    expect(idp.server.received.map((received) => received.connection)).toEqual([reused, reused + 1]);
  });

  it('is not retried once the IdP has answered: a reset after the headers is a 502 after one request', async () => {
    // Prepare: headers and part of the body, then a reset
    idp.server.answer((_received, response) => {
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': '200' });
      response.write('{"access_token":');
      setTimeout(() => response.socket?.resetAndDestroy(), 20);
    });

    // Act
    const result = await idp.handle(event());

    // Assess
    expect(result.statusCode).toBe(502);
    expect(bodyOf(result)).toEqual(UPSTREAM_ERROR);
    expect(idp.server.received).toHaveLength(1);
    expect(idp.observed.records[0]?.idp_status).toBe(200);
  });
});

describe('an attempt that times out on a kept-alive socket', () => {
  it('is not retried on another pooled socket: a 504 after one request', async () => {
    // Prepare: two pooled sockets (two exchanges at once), then an IdP that never answers. Timing
    // out destroys the request, which fails like a stale socket would (ECONNRESET).
    destroyAgents();
    await Promise.all([idp.handle(event()), idp.handle(event())]);
    idp.server.received.length = 0;
    idp.server.answer(() => undefined);
    const quick = createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: idp.server.origin, UPSTREAM_TIMEOUT_MS: '300' }), idp.observed);
    const connectionsBefore = idp.server.connections;

    // Act
    const result = await quick(event());

    // Assess
    expect(result.statusCode).toBe(504);
    expect(idp.server.received).toHaveLength(1);
    // Only the timed-out socket was closed: the next exchange reuses the other one.
    idp.server.answer(json(200, DEMO_TOKEN));
    expect((await idp.handle(event())).statusCode).toBe(200);
    expect(idp.server.connections).toBe(connectionsBefore);
    destroyAgents();
  });
});

describe('the deadline', () => {
  it('ends an answer that started in time but does not finish, at the deadline and not a whole timeout later', async () => {
    // Prepare: headers at 300 ms of a 600 ms deadline, then a body that never ends. A timer armed
    // with the whole timeout when the body starts (wreck's own) would end it near 900 ms.
    idp.server.answer((_received, response) => {
      setTimeout(() => {
        response.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
        response.write('{"access_token":');
      }, 300);
    });
    const quick = createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: idp.server.origin, UPSTREAM_TIMEOUT_MS: '600' }), idp.observed);

    // Act
    const started = performance.now();
    const result = await quick(event());
    const elapsed = performance.now() - started;

    // Assess
    expect(result.statusCode).toBe(504);
    expect(elapsed).toBeLessThan(800);
    destroyAgents();
  });

  it('sends nothing once it has passed: the request has its 504 due already', async () => {
    // Prepare: a deadline that passed while the request waited elsewhere (the shared table, say).
    const clock = manualClock();
    const deadline = Deadline.after(clock, 300);
    clock.advance(300);
    const target = checkTokenUrl(`${idp.server.origin}/token`, parseAllowlist(idp.server.origin));
    const request = {
      clientId: 'service-a',
      clientSecret: 'exchange-test-secret',
      accessTokenUrl: `${idp.server.origin}/token`,
      grantType: 'client_credentials',
      authMethod: 'client_secret_basic',
    } as const;
    const report: UpstreamReport = {};
    const sent = idp.server.received.length;

    // Act
    const exchanged = exchangeToken(request, target, deadline, report);

    // Assess
    await expect(exchanged).rejects.toMatchObject({ code: 'upstream_timeout' });
    expect(report.failure).toBe('timeout');
    expect(idp.server.received.length).toBe(sent);
  });

  it('is disarmed once the IdP has answered: no timer is left to run until it', async () => {
    // Prepare: the system's clock, its timers counted while armed; only the handler's own are seen,
    // not the sockets' or the server's, which come and go on their own schedule.
    const system = systemClock();
    let armed = 0;
    let everArmed = 0;
    const counting: Clock = {
      ...system,
      sleep: (ms, signal) => {
        armed++;
        everArmed++;
        return system.sleep(ms, signal).finally(() => armed--);
      },
    };
    const handle = createHandler(
      loadConfig({ TOKEN_URL_ALLOWLIST: idp.server.origin, UPSTREAM_TIMEOUT_MS: '2000' }),
      idp.observed,
      counting,
    );

    // Act
    const result = await handle(event());
    await new Promise((resolve) => setImmediate(resolve));

    // Assess: the deadline was armed, and is released with the answer; armed, it would hold the
    // attempt, its request and socket for 2 s more.
    expect(result.statusCode).toBe(200);
    expect(everArmed).toBeGreaterThan(0);
    expect(armed).toBe(0);
  });
});

describe('a fresh socket that fails', () => {
  it('is not retried: a reset before any answer is a 502 after one request', async () => {
    // Prepare: no pooled socket, so the exchange connects afresh
    destroyAgents();
    idp.server.answer((_received, response) => {
      response.socket?.resetAndDestroy();
    });

    // Act
    const result = await idp.handle(event());

    // Assess
    expect(result.statusCode).toBe(502);
    expect(bodyOf(result)).toEqual(UPSTREAM_ERROR);
    expect(idp.server.received).toHaveLength(1);
  });
});

describe('the timings reported for a request', () => {
  it('are milliseconds between the IdP delay and the wall time around the call, the IdP part within the whole', async () => {
    // Prepare: an IdP that takes at least 50 ms
    idp.server.answer((received, response) => {
      setTimeout(() => void json(200, DEMO_TOKEN)(received, response), 50);
    });

    // Act
    const started = performance.now();
    await idp.handle(event());
    const elapsed = performance.now() - started;

    // Assess
    const [record] = idp.observed.records;
    const { latency_ms: latencyMs, idp_latency_ms: idpLatencyMs } = record ?? {};
    expect(idpLatencyMs).toBeGreaterThanOrEqual(45);
    expect(idpLatencyMs).toBeLessThanOrEqual(latencyMs ?? Number.NaN);
    // Rounded to 0.1 ms, so up to 0.05 ms above the time measured around it.
    expect(latencyMs).toBeLessThanOrEqual(elapsed + 0.05);
    expect([latencyMs, idpLatencyMs].map((ms) => Math.round((ms ?? Number.NaN) * 10) / 10)).toEqual([latencyMs, idpLatencyMs]);
  });

  it('are reported for a request refused before any exchange, with no IdP part', async () => {
    // Act
    const started = performance.now();
    await idp.handle(tokenEvent({ client_id: 'service-a' }));
    const elapsed = performance.now() - started;

    // Assess
    const [record] = idp.observed.records;
    expect(record?.latency_ms).toBeGreaterThanOrEqual(0);
    expect(record?.latency_ms).toBeLessThanOrEqual(elapsed + 0.05); // rounded to 0.1 ms
    expect(record?.idp_latency_ms).toBeUndefined();
  });
});
