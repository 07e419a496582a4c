import type { ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { epochMs, monoMs, realRuntime } from '../../lambda/cache/time';
import { TokenCache } from '../../lambda/cache/token-cache';
import { loadConfig } from '../../lambda/config';
import { destroyAgents } from '../../lambda/upstream/guarded-agents';
import { createHandler, type TokenHandler } from '../../lambda/handler';
import type { RequestRecord } from '../../lambda/observability';
import { bodyOf, recordingObservability, SECRET_REQUEST, tokenEvent } from '../support/events';
import { issuingIdp, type TestClock, testClock } from '../support/fleet';
import { json, type ReceivedRequest, type Script, startTokenServer, type TokenServer } from '../support/token-server';

// TOKEN_CACHE=memory through the handler, against a scripted IdP over real sockets. The instance's wall
// clock is moved by hand, so lifetimes are crossed exactly, without sleeping through them.

const SECRET = 'memory-cache-test-secret';
let server: TokenServer;
let clock: TestClock;
let handle: TokenHandler;
let records: RequestRecord[];
let idp: ReturnType<typeof issuingIdp>;

const body = (overrides: Record<string, unknown> = {}) => ({
  client_id: 'service-a',
  client_secret: SECRET,
  access_token_url: `${server.origin}/token`,
  scope: 'read',
  ...overrides,
});
const ask = (overrides: Record<string, unknown> = {}, headers: Record<string, string> = {}) => {
  const event = tokenEvent(body(overrides));
  Object.assign(event.headers, headers);
  return handle(event);
};
const noCache = (overrides: Record<string, unknown> = {}) => ask(overrides, { 'cache-control': 'no-cache' });

const segment = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
/** A caller-signed assertion in place of a secret (its shape is all that is checked before the IdP). */
const KEYED = {
  client_secret: undefined,
  client_assertion: `${segment({ alg: 'ES256' })}.${segment({ sub: 'service-a' })}.c2ln`,
  client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
};

/** An IdP that answers `script` `ms` later. */
const after =
  (ms: number, script: Script): Script =>
  (request: ReceivedRequest, response: ServerResponse) => {
    setTimeout(() => void script(request, response), ms);
  };

function instance(env: Record<string, string> = {}): void {
  const observed = recordingObservability();
  records = observed.records;
  handle = createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: server.origin, TOKEN_CACHE: 'memory', ...env }), observed, systemClock(clock.now));
}

beforeAll(async () => {
  server = await startTokenServer();
});

beforeEach(() => {
  clock = testClock();
  idp = issuingIdp({ secret: () => SECRET });
  server.answer(idp);
  server.received.length = 0;
  instance();
});

afterAll(async () => {
  destroyAgents();
  await server.close();
});

describe('TOKEN_CACHE=memory: a kept token', () => {
  it.each([
    ['unset', {}],
    ['off', { TOKEN_CACHE: 'off' }],
  ])('is never kept when TOKEN_CACHE is %s: every request reaches the IdP, with no x-token-cache header', async (_case, env) => {
    instance({ TOKEN_CACHE: '', ...env });

    const answers = [await ask(), await ask()];

    expect(server.received).toHaveLength(2);
    expect(answers.map((answer) => answer.headers?.['x-token-cache'])).toEqual([undefined, undefined]);
  });

  it('answers a repeat without the IdP, with expires_in lowered by the seconds since the IdP answered', async () => {
    // Prepare
    const first = await ask();

    // Act
    clock.advance(100_500);
    const second = await ask();

    // Assess
    expect(server.received).toHaveLength(1);
    expect([first.headers?.['x-token-cache'], second.headers?.['x-token-cache']]).toEqual(['miss', 'hit']);
    expect(bodyOf(first)).toEqual({ access_token: 'issued-1', token_type: 'Bearer', expires_in: 3600 });
    expect(bodyOf(second)).toEqual({ access_token: 'issued-1', token_type: 'Bearer', expires_in: 3499 });
    expect(records.map((record) => record.cache)).toEqual(['miss', 'memory']);
  });

  it.each([
    ['client secret', { client_secret: 'another-secret' }],
    ['client id', { client_id: 'service-b' }],
    ['scope', { scope: 'write' }],
    ['audience', { audience: 'https://api.example.com' }],
    ['grant type', { grant_type: 'urn:example:grant' }],
    ['authentication method', { token_endpoint_auth_method: 'client_secret_post' }],
    ['Basic encoding', { basic_credentials_encoding: 'raw' }],
    ['resource', { resource: 'https://api.example.com/orders' }],
    ['token URL', { access_token_url: 'QUERY' }],
  ])('is kept apart when the %s differs', async (_field, change) => {
    server.answer(json(200, { access_token: 'any', expires_in: 3600 }));
    const changed = 'access_token_url' in change ? { access_token_url: `${server.origin}/token?tenant=b` } : change;

    await ask();
    const other = await ask(changed);

    expect(other.headers?.['x-token-cache']).toBe('miss');
    expect(server.received).toHaveLength(2);
  });

  it.each([
    ['no expires_in', null],
    ['an expires_in within the 30 s margin', 30],
    ['a non-numeric expires_in', 'soon'],
  ])('is not kept with %s: the next request asks the IdP again', async (_case, expiresIn) => {
    server.answer(issuingIdp({ secret: () => SECRET, expiresIn }));

    await ask();
    const second = await ask();

    expect(second.headers?.['x-token-cache']).toBe('miss');
    expect(server.received).toHaveLength(2);
  });

  it('is forgotten least recently used first, beyond the instance bound', async () => {
    const cache = new TokenCache(undefined, realRuntime(clock.now), 1000, 2);
    const request = (clientId: string) => ({
      clientId,
      clientSecret: 's',
      accessTokenUrl: 'https://idp.example/t',
      grantType: 'g',
      authMethod: 'client_secret_post' as const,
    });
    const resolve = (clientId: string, token: string) =>
      cache.resolve({
        request: request(clientId),
        tokenUrl: 'https://idp.example/t',
        noCache: false,
        arrivedAt: epochMs(clock.now()),
        deadline: monoMs(performance.now() + 1000),
        exchange: async () => ({ access_token: token, expires_in: 3600 }),
        report: {},
      });
    await resolve('a', 'a1');
    await resolve('b', 'b1');
    await resolve('a', 'a2'); // a is now the most recent

    await resolve('c', 'c1');

    expect((await resolve('a', 'a3')).token.access_token).toBe('a1');
    expect((await resolve('b', 'b2')).token.access_token).toBe('b2');
  });
});

describe('TokenCache and a bug', () => {
  it('passes on what an exchange throws that is no IdP failure, and remembers nothing of it', async () => {
    const cache = new TokenCache(undefined, realRuntime(clock.now), 1000);
    const resolve = (exchange: () => Promise<never> | Promise<{ access_token: string }>) =>
      cache.resolve({
        request: SECRET_REQUEST,
        tokenUrl: 'https://idp.example/t',
        noCache: false,
        arrivedAt: epochMs(clock.now()),
        deadline: monoMs(performance.now() + 1000),
        exchange,
        report: {},
      });

    await expect(resolve(async () => Promise.reject(new TypeError('a bug')))).rejects.toThrow(TypeError);
    const next = await resolve(async () => ({ access_token: 'after' }));

    expect(next).toEqual({ token: { access_token: 'after' }, header: 'miss' });
  });
});

describe('TOKEN_CACHE=memory: refresh ahead', () => {
  it('refreshes a token 30 s before it goes stale by one request, while the others are answered at once', async () => {
    // Prepare: a 1 h token goes stale at 3240 s; its refresh window opens at 3210 s
    await ask();
    clock.advance(3_215_000);
    server.answer(after(300, idp));

    // Act
    const refreshing = ask();
    await sleep(50);
    const during = await Promise.all([ask(), ask()]);
    const refreshed = await refreshing;
    const next = await ask();

    // Assess
    expect(during.map((answer) => [answer.headers?.['x-token-cache'], bodyOf(answer).access_token])).toEqual([
      ['hit', 'issued-1'],
      ['hit', 'issued-1'],
    ]);
    expect([refreshed.headers?.['x-token-cache'], bodyOf(refreshed).access_token]).toEqual(['miss', 'issued-2']);
    expect([next.headers?.['x-token-cache'], bodyOf(next).access_token, bodyOf(next).expires_in]).toEqual(['hit', 'issued-2', 3600]);
    expect(server.received).toHaveLength(2);
    // Logged as each answer left: the two answered at once first, then the refresh.
    expect(records.map((record) => [record.cache, record.cache_refresh])).toEqual([
      ['miss', undefined],
      ['memory', undefined],
      ['memory', undefined],
      ['miss', 'ahead'],
      ['memory', undefined],
    ]);
  });

  it('never refreshes in the first half of a token’s life', async () => {
    // A 2 min token: stale at 90 s, so the window would open at 60 s, half its life.
    server.answer(issuingIdp({ secret: () => SECRET, expiresIn: 120 }));
    await ask();

    clock.advance(59_999);
    const early = await ask();
    clock.advance(1);
    const due = await ask();

    expect([early.headers?.['x-token-cache'], due.headers?.['x-token-cache']]).toEqual(['hit', 'miss']);
    expect(server.received).toHaveLength(2);
  });

  it('answers the kept token when the refresh fails, and tries again no sooner than a second later', async () => {
    // Prepare
    await ask();
    clock.advance(3_215_000);
    server.answer(json(500, { error: 'server_error' }));

    // Act
    const failed = await ask();
    const soon = await ask();
    clock.advance(1000);
    const later = await ask();

    // Assess
    expect(
      [failed, soon, later].map((answer) => [answer.statusCode, answer.headers?.['x-token-cache'], bodyOf(answer).access_token]),
    ).toEqual([
      [200, 'hit', 'issued-1'],
      [200, 'hit', 'issued-1'],
      [200, 'hit', 'issued-1'],
    ]);
    expect(server.received).toHaveLength(3);
  });

  it('passes on a rejection during a refresh, and serves the kept token no more', async () => {
    await ask();
    clock.advance(3_215_000);
    server.answer(json(401, { error: 'invalid_client' }));

    const rejected = await ask();
    clock.advance(5000);
    server.answer(json(503, { error: 'temporarily_unavailable' }));
    const failing = await ask();

    expect([rejected.statusCode, failing.statusCode]).toEqual([401, 502]);
  });
});

describe('TOKEN_CACHE=memory: stale if error', () => {
  // A 1 h token is stale from 3240 s until it expires at 3600 s.
  const stale = async () => {
    await ask();
    clock.advance(3_300_000);
  };

  it.each<[string, Script, Record<string, string>]>([
    ['the IdP fails (502)', json(500, { error: 'server_error' }), {}],
    ['the IdP asks to wait (503)', json(429, { error: 'slow_down' }, { 'retry-after': '5' }), {}],
    [
      'the IdP does not answer in time (504)',
      after(500, json(200, { access_token: 'late', expires_in: 3600 })),
      { UPSTREAM_TIMEOUT_MS: '100' },
    ],
  ])('answers a stale token when %s, with what is left of its life', async (_case, failure, env) => {
    // Prepare
    instance(env);
    await stale();
    server.answer(failure);

    // Act
    const answer = await ask();

    // Assess
    expect(answer.statusCode).toBe(200);
    expect(answer.headers?.['x-token-cache']).toBe('stale');
    expect(bodyOf(answer)).toEqual({ access_token: 'issued-1', token_type: 'Bearer', expires_in: 300 });
    expect(records[1]).toMatchObject({ outcome: 'ok', status: 200, cache: 'stale' });
  });

  it('answers a stale token from the remembered failure too, without the IdP', async () => {
    await stale();
    server.answer(json(500, { error: 'server_error' }));
    await ask();

    const again = await ask();

    expect(again.headers?.['x-token-cache']).toBe('stale');
    expect(server.received).toHaveLength(2);
    expect(records[2]).toMatchObject({ cache: 'stale', cache_remembered: 'failure' });
  });

  it('never answers a token it could not keep (expires_in 25 s), though it has not expired', async () => {
    server.answer(issuingIdp({ secret: () => SECRET, expiresIn: 25 }));
    await ask();
    server.answer(json(500, { error: 'server_error' }));

    const answer = await ask();

    expect([answer.statusCode, answer.headers?.['x-token-cache']]).toEqual([502, undefined]);
    expect(server.received).toHaveLength(2);
  });

  it('never answers an expired token', async () => {
    await ask();
    clock.advance(3_600_000);
    server.answer(json(500, { error: 'server_error' }));

    expect((await ask()).statusCode).toBe(502);
  });

  it('never answers a token whose key the IdP has rejected since', async () => {
    await stale();
    server.answer(json(401, { error: 'invalid_client' }));
    const rejected = await ask();
    clock.advance(5000);
    server.answer(json(500, { error: 'server_error' }));

    const failed = await ask();

    expect([rejected.statusCode, failed.statusCode]).toEqual([401, 502]);
  });

  it('never answers a no-cache request with a stale token', async () => {
    await stale();
    server.answer(json(500, { error: 'server_error' }));

    expect((await noCache()).statusCode).toBe(502);
  });
});

describe('TOKEN_CACHE=memory: a burst', () => {
  it('shares one exchange: the first request a miss, the others hits', async () => {
    server.answer(after(100, idp));

    const answers = await Promise.all(Array.from({ length: 5 }, () => ask()));

    expect(server.received).toHaveLength(1);
    expect(answers.map((answer) => answer.headers?.['x-token-cache'])).toEqual(['miss', 'hit', 'hit', 'hit', 'hit']);
    expect(new Set(answers.map((answer) => bodyOf(answer).access_token))).toEqual(new Set(['issued-1']));
  });

  it.each([
    [500, 502],
    [401, 401],
  ])('shares the failure of its exchange: an IdP %i is %i for all', async (status, answered) => {
    server.answer(after(100, json(status, { error: 'nope' })));

    const answers = await Promise.all(Array.from({ length: 4 }, () => ask()));

    expect(answers.map((answer) => answer.statusCode)).toEqual(Array(4).fill(answered));
    expect(server.received).toHaveLength(1);
    // They shared the exchange: no remembered failure answered any of them.
    expect(records.map((record) => record.cache_remembered)).toEqual(Array(4).fill(undefined));
  });

  it('shares a token that cannot be kept with those waiting for it, and with no later request', async () => {
    server.answer(after(100, issuingIdp({ secret: () => SECRET, expiresIn: null })));

    const burst = await Promise.all(Array.from({ length: 3 }, () => ask()));
    const later = await ask();

    expect(burst.map((answer) => bodyOf(answer).access_token)).toEqual(['issued-1', 'issued-1', 'issued-1']);
    expect(bodyOf(later).access_token).toBe('issued-2');
    expect(server.received).toHaveLength(2);
  });
});

describe('TOKEN_CACHE=memory: remembered failures', () => {
  it('remembers a rejection for 5 s for its key, and answers it without the IdP', async () => {
    server.answer(json(401, { error: 'invalid_client' }));
    await ask();

    clock.advance(4999);
    const remembered = await ask();
    clock.advance(1);
    server.answer(idp);
    const after5s = await ask();

    expect([remembered.statusCode, after5s.statusCode]).toEqual([401, 200]);
    expect(server.received).toHaveLength(2);
    expect(records[1]).toMatchObject({ outcome: 'unauthorized', cache: 'miss', cache_remembered: 'failure' });
  });

  it('remembers any other failure for 1 s', async () => {
    server.answer(json(500, { error: 'server_error' }));
    await ask();

    clock.advance(999);
    const remembered = await ask();
    clock.advance(1);
    server.answer(idp);
    const after1s = await ask();

    expect([remembered.statusCode, after1s.statusCode]).toEqual([502, 200]);
    expect(server.received).toHaveLength(2);
  });

  it("keeps one secret's rejection from another secret of the same client", async () => {
    await ask({ client_secret: 'a-wrong-secret' });

    const right = await ask();

    expect(right.statusCode).toBe(200);
    expect(server.received).toHaveLength(2);
  });
});

describe('TOKEN_CACHE=memory: the IdP asks to wait', () => {
  it('holds every secret and scope of the client at that token URL once the IdP asked a key with a kept token to wait', async () => {
    // Prepare: a kept token proves the key; once it is stale, the IdP asks to wait
    await ask();
    clock.advance(3_300_000);
    server.answer(json(429, { error: 'slow_down' }, { 'retry-after': '30' }));
    const first = await ask();

    // Act
    clock.advance(10_500);
    const held = await Promise.all([ask({ client_secret: 'another-secret' }), ask({ scope: 'write' })]);
    server.answer(idp);
    const otherClient = await ask({ client_id: 'service-b' });
    const otherUrl = await ask({ access_token_url: `${server.origin}/token?tenant=b` });
    clock.advance(19_500);
    const afterwards = await ask({ scope: 'write' });

    // Assess
    expect([first.statusCode, first.headers?.['x-token-cache']]).toEqual([200, 'stale']);
    expect(held.map((answer) => [answer.statusCode, answer.headers?.['retry-after']])).toEqual([
      [503, '20'],
      [503, '20'],
    ]);
    expect([otherClient.statusCode, otherUrl.statusCode, afterwards.statusCode]).toEqual([200, 200, 200]);
    expect(server.received).toHaveLength(5);
    expect(records[2]).toMatchObject({ outcome: 'upstream_throttled', cache_remembered: 'hold' });
  });

  it('holds only the key that earned a hold when no kept token proves it: a caller who knows only a client id cannot lock its owner out', async () => {
    // Prepare: the IdP answers failing secrets with 429
    server.answer(json(429, { error: 'slow_down' }, { 'retry-after': '30' }));
    const guessed = await ask({ client_secret: 'a-guess' });
    const guessedAgain = await ask({ client_secret: 'a-guess' });

    // Act
    server.answer(idp);
    const owner = await ask();

    // Assess
    expect([guessed.statusCode, guessedAgain.statusCode, guessedAgain.headers?.['retry-after']]).toEqual([503, 503, '30']);
    expect([owner.statusCode, owner.headers?.['x-token-cache']]).toEqual([200, 'miss']);
    expect(server.received).toHaveLength(2);
  });

  it('holds a no-cache request too', async () => {
    server.answer(json(429, { error: 'slow_down' }, { 'retry-after': '30' }));
    await ask();

    expect((await noCache()).statusCode).toBe(503);
    expect(server.received).toHaveLength(1);
  });

  it("holds a client's private_key_jwt requests, and only them, once one of them was asked to wait", async () => {
    // Prepare
    server.answer(json(429, { error: 'slow_down' }, { 'retry-after': '5' }));
    const throttled = await ask(KEYED);

    // Act
    const heldKeyed = await ask(KEYED);
    server.answer(idp);
    const secret = await ask();

    // Assess
    expect([throttled.statusCode, heldKeyed.statusCode, secret.statusCode]).toEqual([503, 503, 200]);
    expect(server.received).toHaveLength(2);
  });

  it('holds private_key_jwt requests of the client once a key with a kept token was asked to wait', async () => {
    await ask();
    clock.advance(3_300_000);
    server.answer(json(429, { error: 'slow_down' }, { 'retry-after': '5' }));
    await ask();

    const heldKeyed = await ask(KEYED);

    expect(heldKeyed.statusCode).toBe(503);
    expect(server.received).toHaveLength(2);
  });

  it('never shortens a hold: a shorter retry-after that comes later leaves the longer one in force', async () => {
    // Prepare: two private_key_jwt requests out at once; the IdP asks the first to wait 30 s, the second 5 s
    let calls = 0;
    server.answer((request, response) => {
      const seconds = ++calls === 1 ? '30' : '5';
      void after(calls === 1 ? 50 : 100, json(429, { error: 'slow_down' }, { 'retry-after': seconds }))(request, response);
    });
    await Promise.all([ask(KEYED), ask(KEYED)]);

    // Act
    clock.advance(10_000);
    const held = await ask(KEYED);

    // Assess
    expect([held.statusCode, held.headers?.['retry-after']]).toEqual([503, '20']);
    expect(server.received).toHaveLength(2);
  });

  it('tells a held private_key_jwt request the seconds left, rounded up', async () => {
    server.answer(json(429, { error: 'slow_down' }, { 'retry-after': '5' }));
    await ask(KEYED);
    clock.advance(2500);

    const held = await ask(KEYED);

    expect([held.statusCode, held.headers?.['retry-after']]).toEqual([503, '3']);
    expect(server.received).toHaveLength(1);
  });
});

describe('TOKEN_CACHE=memory: cache-control: no-cache', () => {
  it('asks the IdP for a token kept more than 5 s, and the new token replaces the kept one', async () => {
    await ask();
    clock.advance(5001);

    const fresh = await noCache();
    const next = await ask();

    expect([fresh.headers?.['x-token-cache'], bodyOf(fresh).access_token]).toEqual(['miss', 'issued-2']);
    expect(bodyOf(next).access_token).toBe('issued-2');
    expect(records[1]).toMatchObject({ no_cache: true });
    expect([records[0], records[2]].map((record) => record && 'no_cache' in record)).toEqual([false, false]);
  });

  it('answers with a token the IdP issued at most 5 s before the request', async () => {
    await ask();
    clock.advance(5000);

    const recent = await noCache();

    expect([recent.headers?.['x-token-cache'], bodyOf(recent).access_token]).toEqual(['hit', 'issued-1']);
    expect(server.received).toHaveLength(1);
  });

  it('shares one exchange among a burst of no-cache requests', async () => {
    await ask();
    clock.advance(60_000);
    server.answer(after(100, idp));

    const burst = await Promise.all(Array.from({ length: 4 }, () => noCache()));

    expect(new Set(burst.map((answer) => bodyOf(answer).access_token))).toEqual(new Set(['issued-2']));
    expect(server.received).toHaveLength(2);
  });

  it('shares an exchange under way with a no-cache request: its token is new to the request', async () => {
    // Prepare: the first exchange brings a token that cannot be kept, in 300 ms; the no-cache request comes 100 ms in
    server.answer(after(300, json(200, { access_token: 'unkept', token_type: 'Bearer' })));
    const first = ask();
    await sleep(100);

    // Act
    const fresh = await noCache();

    // Assess
    expect([bodyOf(await first).access_token, bodyOf(fresh).access_token, fresh.headers?.['x-token-cache']]).toEqual([
      'unkept',
      'unkept',
      'hit',
    ]);
    expect(server.received).toHaveLength(1);
  });

  it('shares a failing exchange with a burst of no-cache requests: its failure is new to each of them', async () => {
    server.answer(after(100, json(500, { error: 'server_error' })));

    const burst = await Promise.all(Array.from({ length: 3 }, () => noCache()));

    expect(burst.map((answer) => answer.statusCode)).toEqual([502, 502, 502]);
    expect(server.received).toHaveLength(1);
  });

  it('ignores a remembered failure', async () => {
    server.answer(json(500, { error: 'server_error' }));
    await ask();
    server.answer(idp);

    expect((await noCache()).statusCode).toBe(200);
  });

  it.each([
    ['pragma: no-cache, without cache-control (RFC 9111 5.4)', { pragma: 'no-cache' }, 2],
    ['no-cache among other directives, in any case', { 'cache-control': 'max-age=0, No-Cache' }, 2],
    ['max-age=0 alone, which does not ask for it', { 'cache-control': 'max-age=0' }, 1],
    ['pragma: no-cache beside a cache-control without it', { 'cache-control': 'max-age=0', pragma: 'no-cache' }, 1],
  ])('reads %s', async (_case, headers, requests) => {
    await ask();
    clock.advance(60_000);

    await ask({}, headers);

    expect(server.received).toHaveLength(requests);
  });
});

describe('TOKEN_CACHE=memory and private_key_jwt', () => {
  it('never answers from memory nor shares an exchange, and says miss', async () => {
    const segment = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
    const keyed = {
      client_secret: undefined,
      client_assertion: `${segment({ alg: 'ES256' })}.${segment({ sub: 'service-a' })}.c2ln`,
      client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
    };
    server.answer(after(50, json(200, { access_token: 'for-a-key', expires_in: 3600 })));

    const answers = await Promise.all([ask(keyed), ask(keyed)]);

    expect(answers.map((answer) => answer.headers?.['x-token-cache'])).toEqual(['miss', 'miss']);
    expect(server.received).toHaveLength(2);
  });

  it('remembers nothing of a rejection, for the client or for the others: only a throttling IdP holds', async () => {
    server.answer(json(401, { error: 'invalid_client' }));
    const rejected = await ask(KEYED);
    server.answer(json(200, { access_token: 'granted', token_type: 'Bearer', expires_in: 3600 }));

    const answers = [await ask(KEYED), await ask()];

    expect([rejected, ...answers].map((answer) => answer.statusCode)).toEqual([401, 200, 200]);
    expect(server.received).toHaveLength(3);
  });
});
