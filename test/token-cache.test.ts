import { loadConfig } from '../lambda/config';
import type { IdpToken } from '../lambda/exchange';
import { destroyAgents } from '../lambda/guarded-agents';
import { createHandler, type TokenHandler } from '../lambda/handler';
import { TokenCache } from '../lambda/token-cache';
import { bodyOf, recordingObservability, tokenEvent } from './support/events';
import { DEMO_TOKEN, json, startTokenServer, type TokenServer } from './support/token-server';

describe('TokenCache', () => {
  const token = (expiresIn: unknown, accessToken = 'at'): IdpToken => ({ access_token: accessToken, expires_in: expiresIn });

  it('answers a repeat from memory with expires_in lowered to the time left', async () => {
    // Prepare
    let now = 1_000_000;
    const cache = new TokenCache(10, () => now);
    const fetchToken = jest.fn(async () => token(3600));
    await cache.get('k', fetchToken);

    // Act
    now += 100_500;
    const repeat = await cache.get('k', fetchToken);

    // Assess
    expect(fetchToken).toHaveBeenCalledTimes(1);
    expect(repeat).toEqual({ hit: true, token: { access_token: 'at', expires_in: 3499 } });
  });

  it('keeps a string expires_in a string', async () => {
    let now = 0;
    const cache = new TokenCache(10, () => now);
    await cache.get('k', async () => token('600'));

    now = 60_000;
    const repeat = await cache.get('k', async () => token('600'));

    expect(repeat.token.expires_in).toBe('540');
  });

  it('stops answering at expires_in less 10% when that is over 30 s', async () => {
    let now = 0;
    const cache = new TokenCache(10, () => now);
    const fetchToken = jest.fn(async () => token(3600));
    await cache.get('k', fetchToken);

    now = 3240_000 - 1;
    expect((await cache.get('k', fetchToken)).hit).toBe(true);
    now = 3240_000;
    expect((await cache.get('k', fetchToken)).hit).toBe(false);
    expect(fetchToken).toHaveBeenCalledTimes(2);
  });

  it('stops answering 30 s before expiry for short-lived tokens', async () => {
    let now = 0;
    const cache = new TokenCache(10, () => now);
    await cache.get('k', async () => token(120));

    now = 90_000 - 1;
    expect((await cache.get('k', async () => token(120))).hit).toBe(true);
    now = 90_000;
    expect((await cache.get('k', async () => token(120))).hit).toBe(false);
  });

  it.each([
    ['no expires_in', undefined],
    ['an expires_in within the margin', 30],
    ['a zero expires_in', 0],
    ['a negative expires_in', -5],
    ['a non-numeric expires_in', 'soon'],
    ['a fractional string expires_in', '3600.5'],
  ])('never keeps a token with %s', async (_case, expiresIn) => {
    const cache = new TokenCache();
    const fetchToken = jest.fn(async () => (expiresIn === undefined ? { access_token: 'at' } : token(expiresIn)));

    await cache.get('k', fetchToken);
    const second = await cache.get('k', fetchToken);

    expect(second.hit).toBe(false);
    expect(fetchToken).toHaveBeenCalledTimes(2);
    expect(cache.size).toBe(0);
  });

  it('never keeps a failure', async () => {
    const cache = new TokenCache();
    const failing = jest.fn(async (): Promise<IdpToken> => {
      throw new Error('rejected');
    });

    await expect(cache.get('k', failing)).rejects.toThrow('rejected');
    const recovered = await cache.get('k', async () => token(3600));

    expect(recovered.hit).toBe(false);
    expect(failing).toHaveBeenCalledTimes(1);
  });

  it('makes one call for identical concurrent requests and hands its token to all', async () => {
    // Prepare
    const cache = new TokenCache();
    let release: (value: IdpToken) => void = () => undefined;
    const fetchToken = jest.fn(() => new Promise<IdpToken>((resolve) => (release = resolve)));

    // Act
    const all = Promise.all([cache.get('k', fetchToken), cache.get('k', fetchToken), cache.get('k', fetchToken)]);
    release(token(3600));
    const results = await all;

    // Assess
    expect(fetchToken).toHaveBeenCalledTimes(1);
    expect(results).toEqual([
      { hit: false, token: token(3600) },
      { hit: true, token: token(3600) },
      { hit: true, token: token(3600) },
    ]);
  });

  it('shares the failure of that one call with every waiter, and keeps nothing', async () => {
    // Prepare
    const cache = new TokenCache();
    const failure = new Error('the IdP refused');
    let fail: (error: Error) => void = () => undefined;
    const fetchToken = jest.fn(() => new Promise<IdpToken>((_resolve, reject) => (fail = reject)));

    // Act
    const all = Promise.allSettled([cache.get('k', fetchToken), cache.get('k', fetchToken), cache.get('k', fetchToken)]);
    fail(failure);
    const results = await all;

    // Assess
    expect(fetchToken).toHaveBeenCalledTimes(1);
    expect(results).toEqual([
      { status: 'rejected', reason: failure },
      { status: 'rejected', reason: failure },
      { status: 'rejected', reason: failure },
    ]);
    expect(cache.size).toBe(0);
  });

  it('evicts the least recently used entry when full', async () => {
    const cache = new TokenCache(2);
    await cache.get('a', async () => token(3600, 'a'));
    await cache.get('b', async () => token(3600, 'b'));
    await cache.get('a', async () => token(3600, 'a2')); // a is now the most recent

    await cache.get('c', async () => token(3600, 'c'));

    expect(cache.size).toBe(2);
    expect((await cache.get('a', async () => token(3600, 'fresh'))).hit).toBe(true);
    expect((await cache.get('b', async () => token(3600, 'fresh'))).hit).toBe(false);
  });
});

describe('the handler with TOKEN_CACHE', () => {
  let server: TokenServer;
  let handle: TokenHandler;
  const body = (overrides: Record<string, unknown> = {}) => ({
    client_id: 'service-a',
    client_secret: 'cache-test-secret',
    access_token_url: `${server.origin}/token`,
    scope: 'read',
    ...overrides,
  });

  beforeAll(async () => {
    server = await startTokenServer();
  });

  beforeEach(() => {
    server.received.length = 0;
    server.answer(json(200, DEMO_TOKEN));
    handle = createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: server.origin, TOKEN_CACHE: 'on' }), recordingObservability());
  });

  afterAll(async () => {
    destroyAgents();
    await server.close();
  });

  it.each([
    ['unset', {}],
    ['off', { TOKEN_CACHE: 'off' }],
  ])('is off when TOKEN_CACHE is %s: every request reaches the IdP and there is no x-token-cache header', async (_case, env) => {
    // Prepare
    handle = createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: server.origin, ...env }), recordingObservability());

    // Act
    const first = await handle(tokenEvent(body()));
    const second = await handle(tokenEvent(body()));

    // Assess
    expect(server.received).toHaveLength(2);
    expect([first.headers?.['x-token-cache'], second.headers?.['x-token-cache']]).toEqual([undefined, undefined]);
  });

  it('answers a repeat without the IdP and says so in x-token-cache', async () => {
    const first = await handle(tokenEvent(body()));
    const second = await handle(tokenEvent(body()));

    expect(server.received).toHaveLength(1);
    expect(first.headers?.['x-token-cache']).toBe('miss');
    expect(second.headers?.['x-token-cache']).toBe('hit');
    expect(bodyOf(second).access_token).toBe(DEMO_TOKEN.access_token);
    expect(second.headers?.['cache-control']).toBe('no-store');
  });

  it('shares one IdP call between identical concurrent requests', async () => {
    server.answer((received, response) => {
      setTimeout(() => void json(200, DEMO_TOKEN)(received, response), 50);
    });

    const results = await Promise.all(Array.from({ length: 5 }, () => handle(tokenEvent(body()))));

    expect(server.received).toHaveLength(1);
    expect(results.map((result) => result.statusCode)).toEqual([200, 200, 200, 200, 200]);
  });

  it('shares one IdP rejection between identical concurrent requests, then asks the IdP again', async () => {
    // Prepare
    server.answer((received, response) => {
      setTimeout(() => void json(401, { error: 'invalid_client' })(received, response), 50);
    });

    // Act
    const results = await Promise.all(Array.from({ length: 3 }, () => handle(tokenEvent(body()))));
    server.answer(json(200, DEMO_TOKEN));
    const after = await handle(tokenEvent(body()));

    // Assess
    expect(results.map((result) => [result.statusCode, bodyOf(result).code])).toEqual([
      [401, 'unauthorized'],
      [401, 'unauthorized'],
      [401, 'unauthorized'],
    ]);
    expect(after.headers?.['x-token-cache']).toBe('miss');
    expect(server.received).toHaveLength(2);
  });

  it.each([
    ['client secret', { client_secret: 'another-secret' }],
    ['client id', { client_id: 'service-b' }],
    ['scope', { scope: 'write' }],
    ['audience', { audience: 'https://api.example.com' }],
    ['grant type', { grant_type: 'urn:example:grant' }],
    ['auth method', { token_endpoint_auth_method: 'client_secret_post' }],
  ])('keeps tokens apart when the %s differs', async (_field, change) => {
    await handle(tokenEvent(body()));
    const other = await handle(tokenEvent(body(change)));

    expect(other.headers?.['x-token-cache']).toBe('miss');
    expect(server.received).toHaveLength(2);
  });

  it('keeps tokens apart for different token URLs', async () => {
    await handle(tokenEvent(body()));
    await handle(tokenEvent(body({ access_token_url: `${server.origin}/token?tenant=b` })));

    expect(server.received).toHaveLength(2);
  });

  it('never caches a rejection', async () => {
    server.answer(json(401, { error: 'invalid_client' }));
    const rejected = await handle(tokenEvent(body()));
    server.answer(json(200, DEMO_TOKEN));
    const accepted = await handle(tokenEvent(body()));

    expect(rejected.statusCode).toBe(401);
    expect(accepted.headers?.['x-token-cache']).toBe('miss');
    expect(server.received).toHaveLength(2);
  });

  it('never caches a token without expires_in', async () => {
    server.answer(json(200, { access_token: 'forever', token_type: 'Bearer' }));

    await handle(tokenEvent(body()));
    const second = await handle(tokenEvent(body()));

    expect(second.headers?.['x-token-cache']).toBe('miss');
    expect(server.received).toHaveLength(2);
  });
});
