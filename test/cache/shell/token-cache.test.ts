import { ownEntry } from '../../../lambda/cache/core/lifetime';
import { randomBytes } from 'node:crypto';
import { Deadline, epochMs, systemClock } from '../../../lambda/clock';
import { cacheSettings } from '../../../lambda/cache/core/settings';
import type { CacheReport } from '../../../lambda/cache/report';
import { clientHoldKey, requestText, type SecretRequest } from '../../../lambda/cache/request-key';
import { secretsManagerPepper } from '../../../lambda/cache/shell/pepper';
import { holdItemKeys, requestItemKeys } from '../../../lambda/cache/shell/sealed-item';
import { type Runtime, SharedTier } from '../../../lambda/cache/shell/shared-tier';
import { dynamoDbTable, type Table } from '../../../lambda/cache/shell/table-calls';
import { type CacheAsk, TokenCache } from '../../../lambda/cache/shell/token-cache';
import { checkTokenUrl, parseAllowlist } from '../../../lambda/policy/token-url-policy';
import type { TokenRequest } from '../../../lambda/request/token-request';
import { exchangeToken } from '../../../lambda/upstream/exchange';
import { destroyAgents } from '../../../lambda/upstream/guarded-agents';
import { itemStates, PEPPER_SECRET, type SharedTable, startSharedTable } from '../../support/shared-table';
import { manualClock, settle } from '../../support/manual-clock';
import { DEMO_TOKEN, json, type Script, startTokenServer, type TokenServer } from '../../support/token-server';

// The token cache of one instance driven directly, with the real exchange against the scripted token
// server on 127.0.0.1: what a request through the handler seldom reaches, because the handler gives
// every request the same deadline (a request with less time left than the fetch it would share) and
// never has a bug in its exchange.

const SETTINGS = cacheSettings(5000);
let server: TokenServer;
let wall: number;
/** Each test's own client, so no test finds another's token in the table. */
let clientId: string;
const runtime: Runtime = { ...systemClock(() => wall), instance: 'i-token-cache', id: () => randomBytes(9).toString('base64url') };

beforeAll(async () => {
  server = await startTokenServer();
});
beforeEach(() => {
  wall = Date.now();
  clientId = `token-cache-${randomBytes(4).toString('hex')}`;
  server.answer(json(200, DEMO_TOKEN));
  server.received.length = 0;
});
afterAll(async () => {
  destroyAgents();
  await server.close();
});

/** The IdP answers `script` `ms` later. */
const after =
  (ms: number, script: Script): Script =>
  (request, response) => {
    setTimeout(() => void script(request, response), ms);
  };
const request = (): SecretRequest => ({
  clientId,
  clientSecret: 'token-cache-secret',
  accessTokenUrl: `${server.origin}/token`,
  grantType: 'client_credentials',
  authMethod: 'client_secret_basic',
});
/** A caller's `private_key_jwt` request of this test's client. */
const assertionRequest = (): TokenRequest => ({
  clientId,
  clientAssertion: 'header.payload.signature',
  accessTokenUrl: `${server.origin}/token`,
  grantType: 'client_credentials',
  authMethod: 'private_key_jwt',
});
/** One request to the cache, with a deadline of `ms` and the real exchange within it. */
function ask(ms = 5000, parts: Partial<CacheAsk> = {}): CacheAsk & { report: CacheReport } {
  const tokenRequest = request();
  const deadline = Deadline.after(runtime, ms);
  const target = checkTokenUrl(tokenRequest.accessTokenUrl, parseAllowlist(server.origin));
  return {
    request: tokenRequest,
    tokenUrl: target.url.href,
    noCache: false,
    arrivedAt: runtime.epoch(),
    deadline,
    exchange: () => exchangeToken(tokenRequest, target, deadline, {}),
    report: {},
    ...parts,
  };
}

describe('TOKEN_CACHE=memory', () => {
  it('passes on what an exchange throws that is no IdP failure, and remembers nothing of it', async () => {
    const cache = new TokenCache(undefined, runtime, SETTINGS);
    const bug = new TypeError('a bug in the exchange');

    await expect(cache.resolve(ask(5000, { exchange: () => Promise.reject(bug) }))).rejects.toBe(bug);
    const next = await cache.resolve(ask());

    expect(next.header).toBe('miss');
    expect(server.received).toHaveLength(1);
  });

  it('remembers no timeout of an exchange that had less than the whole deadline: the next request asks again', async () => {
    // Prepare: the IdP answers after 400 ms, past a request that had 300 ms left.
    server.answer(after(400, json(200, DEMO_TOKEN)));
    const cache = new TokenCache(undefined, runtime, SETTINGS);
    const cut = ask(300);

    // Act
    const first = cache.resolve(cut);
    await expect(first).rejects.toMatchObject({ code: 'upstream_timeout' });
    const next = await cache.resolve(ask());

    // Assess
    expect(next.header).toBe('miss');
    expect(server.received).toHaveLength(2);
    expect(cut.report.remembered).toBeUndefined();
  });

  it('ends a request that shares a fetch at its own deadline, when that comes first', async () => {
    // Prepare: the IdP takes 500 ms; a second request with 200 ms left arrives while the first one's fetch runs.
    server.answer(after(500, json(200, DEMO_TOKEN)));
    const cache = new TokenCache(undefined, runtime, SETTINGS);
    const first = cache.resolve(ask(5000));
    const second = ask(200);

    // Act
    const shared = cache.resolve(second);

    // Assess
    await expect(shared).rejects.toMatchObject({ code: 'upstream_timeout' });
    expect((await first).header).toBe('miss');
    expect(server.received).toHaveLength(1);
    expect(second.report.tier).toBe('miss');
  });
});

describe('TOKEN_CACHE=memory, a timeout remembered', () => {
  // A 500 ms deadline: the take-over margin is its fifth, 100 ms.
  const FAST = cacheSettings(500);

  /** A request that met the IdP's silence for its whole deadline: remembered for 1 s, dated at that deadline. */
  async function timedOut(cache: TokenCache): Promise<void> {
    server.answer(after(1500, json(200, DEMO_TOKEN)));
    await expect(cache.resolve(ask(500))).rejects.toMatchObject({ code: 'upstream_timeout' });
    server.answer(json(200, DEMO_TOKEN));
  }

  it('is no answer to a request that came before it and outlasts it by more than the margin: that request asks the IdP (seed 1523688207@600)', async () => {
    const cache = new TokenCache(undefined, runtime, FAST);
    await timedOut(cache);

    const outlasting = await cache.resolve(ask(500, { arrivedAt: epochMs(wall - 100) }));

    expect(outlasting.header).toBe('miss');
    expect(server.received).toHaveLength(2);
  });

  it('answers a request that came after it, or that has no more than the margin left', async () => {
    const cache = new TokenCache(undefined, runtime, FAST);
    await timedOut(cache);

    await expect(cache.resolve(ask(500, { arrivedAt: epochMs(wall + 1) }))).rejects.toMatchObject({ code: 'upstream_timeout' });
    await expect(cache.resolve(ask(90, { arrivedAt: epochMs(wall - 100) }))).rejects.toMatchObject({ code: 'upstream_timeout' });
    expect(server.received).toHaveLength(1);
  });
});

describe('TOKEN_CACHE=memory, a request that shares a fetch', () => {
  it('asks again when the fetch brought a token that cannot be kept, received before it came', async () => {
    // Prepare: the IdP answers in 300 ms with a 20 s token; the second request is dated after that answer.
    server.answer(after(300, json(200, { ...DEMO_TOKEN, expires_in: 20 })));
    const cache = new TokenCache(undefined, runtime, SETTINGS);
    const first = cache.resolve(ask());

    // Act
    const later = await cache.resolve(ask(5000, { arrivedAt: epochMs(wall + 1000) }));

    // Assess
    expect([(await first).header, later.header]).toEqual(['miss', 'miss']);
    expect(server.received).toHaveLength(2);
  });

  it('asks again when the fetch failed with a failure whose time was over before it came', async () => {
    server.answer(after(300, json(500, { error: 'server_error' })));
    const cache = new TokenCache(undefined, runtime, SETTINGS);
    const first = cache.resolve(ask());
    const laterAsk = ask(5000, { arrivedAt: epochMs(wall + 2000) });

    const later = cache.resolve(laterAsk);

    await expect(first).rejects.toMatchObject({ code: 'upstream_error' });
    await expect(later).rejects.toMatchObject({ code: 'upstream_error' });
    // It asked again, and memory (whose clock stands at the first's) answered the failure it remembers.
    expect(laterAsk.report.remembered).toBe('failure');
  });

  it("gives a no-cache request the fetch's failure, which no request remembered before it came", async () => {
    server.answer(after(300, json(500, { error: 'server_error' })));
    const cache = new TokenCache(undefined, runtime, SETTINGS);
    const first = cache.resolve(ask());

    const noCache = cache.resolve(ask(5000, { noCache: true }));

    await expect(noCache).rejects.toMatchObject({ code: 'upstream_error' });
    await expect(first).rejects.toMatchObject({ code: 'upstream_error' });
    expect(server.received).toHaveLength(1);
  });
});

describe('TOKEN_CACHE=shared', () => {
  let table: SharedTable;
  beforeAll(async () => {
    table = await startSharedTable('token-cache-test');
  });
  afterAll(async () => {
    await table.close();
  });

  async function sharedCache(): Promise<TokenCache> {
    const shared = new SharedTier({
      table: dynamoDbTable(table.tableName, SETTINGS.callLimitMs, runtime),
      settings: SETTINGS,
      pepper: secretsManagerPepper(PEPPER_SECRET, runtime, SETTINGS.pepper),
      runtime,
    });
    // The pepper loaded, as a warm instance's is.
    await shared.holdOn([], Deadline.after(runtime, 2000), {});
    return new TokenCache(shared, runtime, SETTINGS);
  }

  it('lets a request answered from memory wait for a look in the table under way, and answer after it', async () => {
    // Prepare: a kept token, 30 s later due for a look in the table.
    const cache = await sharedCache();
    await cache.resolve(ask());
    wall += 30_000;

    // Act: the look starts; a request that comes meanwhile waits for it.
    const looking = cache.resolve(ask());
    const meanwhile = await cache.resolve(ask());

    // Assess
    expect([(await looking).header, meanwhile.header]).toEqual(['hit', 'hit']);
    expect(server.received).toHaveLength(1);
  });

  it('answers a request whose deadline ends during the look with the token memory keeps', async () => {
    const cache = await sharedCache();
    await cache.resolve(ask());
    wall += 30_000;

    const looking = cache.resolve(ask());
    const late = ask(0);
    const meanwhile = await cache.resolve(late);

    expect(meanwhile).toMatchObject({ header: 'hit', token: { access_token: DEMO_TOKEN.access_token } });
    expect(late.report.tier).toBe('memory');
    await looking;
  });

  it('lets a request whose deadline outlasts the holder another request here waits on by more than a fifth go on its own', async () => {
    // Prepare: another instance holds the key's claim with 2.1 s left; a request here with 3 s left waits on it,
    // so the fetch it started is answered by 2.1 s from now.
    const cache = await sharedCache();
    const tokenRequest = request();
    const keys = requestItemKeys(
      table.pepper,
      tokenRequest.clientSecret,
      requestText(tokenRequest, new URL(tokenRequest.accessTokenUrl).href),
    );
    await table.plant(keys, itemStates(() => wall).claim('other', { leftMs: 2100 }));
    const waiting = ask(3000);
    const first = cache.resolve(waiting);
    while (waiting.report.tableLatencyMs === undefined) await settle();
    await settle();

    // Act: a request with 3.5 s left would share a fetch due in 3 s, but not one due in 2.1 s.
    const outlasting = ask(3500);
    const own = await cache.resolve(outlasting);

    // Assess: it took the claim over and asked the IdP; the waiting request got that token through the table.
    expect([own.header, outlasting.report.tier]).toEqual(['miss', 'miss']);
    expect([(await first).header, waiting.report.tier]).toEqual(['hit', 'shared']);
    expect(server.received).toHaveLength(1);
  });

  /**
   * A cache on a manual clock (no hedge or deadline passes unless the test moves it) over the table. While `gate.closed`,
   * a read of an item other than the request's own is made at once, but its answer is held until the test opens the gate.
   * Each write takes `gate.writeMs` of the clock.
   */
  async function gatedCache(tokenRequest: TokenRequest) {
    const clock = manualClock(wall);
    const manual: Runtime = { ...clock, instance: 'i-token-cache-gated', id: () => randomBytes(9).toString('base64url') };
    const dynamo = dynamoDbTable(table.tableName, SETTINGS.callLimitMs, manual);
    const ownItem =
      'clientSecret' in tokenRequest && tokenRequest.clientSecret !== undefined
        ? requestItemKeys(table.pepper, tokenRequest.clientSecret, requestText(tokenRequest as SecretRequest, tokenRequest.accessTokenUrl))
            .itemKey
        : undefined;
    let open: () => void = () => undefined;
    const gate = {
      closed: false,
      held: 0,
      writes: 0,
      writeMs: 0,
      opened: new Promise<void>((resolve) => (open = resolve)),
      open: () => open(),
    };
    const gatedTable: Table = {
      calls: (report) => {
        const calls = dynamo.calls(report);
        return {
          get: async (itemKey) => {
            const holding = gate.closed && itemKey !== ownItem;
            const item = await calls.get(itemKey);
            if (holding) {
              gate.held++;
              await gate.opened;
            }
            return item;
          },
          put: (itemKey, state, expected, rev) => {
            clock.advance(gate.writeMs);
            return calls.put(itemKey, state, expected, rev).finally(() => gate.writes++);
          },
        };
      },
    };
    const pepper = secretsManagerPepper(PEPPER_SECRET, manual, SETTINGS.pepper);
    const shared = new SharedTier({ table: gatedTable, settings: SETTINGS, pepper, runtime: manual });
    await shared.holdOn([], Deadline.after(systemClock(), 2000), {});
    const target = checkTokenUrl(tokenRequest.accessTokenUrl, parseAllowlist(server.origin));
    /** The request with `ms` left on the manual clock. */
    const on = (ms: number): CacheAsk => {
      const deadline = Deadline.after(manual, ms);
      const exchange = () => exchangeToken(tokenRequest, target, deadline, {});
      return { ...ask(ms), request: tokenRequest, tokenUrl: target.url.href, arrivedAt: manual.epoch(), deadline, exchange };
    };
    return { cache: new TokenCache(shared, manual, SETTINGS), gate, on };
  }

  it('holds back an exchange about to go out when another request here met a hold on the key meanwhile', async () => {
    // Prepare
    const { cache, gate, on } = await gatedCache(request());

    // Act: a request with 1.5 s left claims the key and waits for its hold read; one with 5 s left goes on its own,
    // takes the claim over, and meets a 429 for the key alone.
    gate.closed = true;
    const first = cache.resolve(on(1500));
    while (gate.held === 0 || gate.writes === 0) await settle();
    gate.closed = false;
    server.answer(json(429, { error: 'slow_down' }, { 'retry-after': '30' }));
    const second = cache.resolve(on(5000));
    await expect(second).rejects.toMatchObject({ code: 'upstream_throttled' });
    gate.open();

    // Assess: the first request, its hold read answered, sends nothing: it answers the hold met here.
    await expect(first).rejects.toMatchObject({ code: 'upstream_throttled' });
    expect(server.received).toHaveLength(1);
  });

  it("holds back a caller's private_key_jwt request when another one of its client met a 429 here while the table was read", async () => {
    // Prepare: the table shows no hold when read; its answer comes only after the other request met the 429.
    const assertion = assertionRequest();
    const { cache, gate, on } = await gatedCache(assertion);
    gate.closed = true;
    const first = cache.resolve(on(5000));
    while (gate.held < 2) await settle();
    gate.closed = false;
    server.answer(json(429, { error: 'slow_down' }, { 'retry-after': '30' }));
    await expect(cache.resolve(on(5000))).rejects.toMatchObject({ code: 'upstream_throttled', retryAfterSeconds: 30 });

    // Act
    gate.open();

    // Assess: memory is asked again after the table's read: nothing is sent.
    await expect(first).rejects.toMatchObject({ code: 'upstream_throttled', retryAfterSeconds: 30 });
    expect(server.received).toHaveLength(1);
  });

  it("answers a caller's private_key_jwt request held here with the fleet's longer hold on its client", async () => {
    // Prepare: a 429 of 5 s held this client's assertions here; then the fleet holds the whole client 30 s.
    const assertion = assertionRequest();
    const { cache, on } = await gatedCache(assertion);
    server.answer(json(429, { error: 'slow_down' }, { 'retry-after': '5' }));
    await expect(cache.resolve(on(5000))).rejects.toMatchObject({ retryAfterSeconds: 5 });
    await table.plant(holdItemKeys(table.pepper, clientHoldKey(clientId, assertion.accessTokenUrl)), itemStates(() => wall).hold(30_000));

    // Act
    const held = cache.resolve(on(5000));

    // Assess
    await expect(held).rejects.toMatchObject({ code: 'upstream_throttled', retryAfterSeconds: 30 });
    expect(server.received).toHaveLength(1);
  });

  it("answers a no-cache request held here with the fleet's longer hold on its client", async () => {
    // Prepare: a 429 of 5 s held the key here; then the fleet holds the whole client 30 s.
    const tokenRequest = request();
    const { cache, on } = await gatedCache(tokenRequest);
    server.answer(json(429, { error: 'slow_down' }, { 'retry-after': '5' }));
    await expect(cache.resolve(on(5000))).rejects.toMatchObject({ retryAfterSeconds: 5 });
    await table.plant(
      holdItemKeys(table.pepper, clientHoldKey(clientId, tokenRequest.accessTokenUrl)),
      itemStates(() => wall).hold(30_000),
    );

    // Act
    const held = cache.resolve({ ...on(5000), noCache: true });

    // Assess
    await expect(held).rejects.toMatchObject({ code: 'upstream_throttled', retryAfterSeconds: 30 });
    expect(server.received).toHaveLength(1);
  });

  it('tells a hold it was told of with the seconds left as the answer leaves, not as the hold was learnt', async () => {
    // Prepare: the client is held 30 s in the table; the request claims the key before its hold read comes back.
    const tokenRequest = request();
    const { cache, gate, on } = await gatedCache(tokenRequest);
    await table.plant(
      holdItemKeys(table.pepper, clientHoldKey(clientId, tokenRequest.accessTokenUrl)),
      itemStates(() => wall).hold(30_000),
    );
    gate.closed = true;
    const held = cache.resolve(on(5000));
    while (gate.held === 0 || gate.writes === 0) await settle();

    // Act: the hold read comes back; publishing the hold to the key's waiters takes 2 s.
    gate.writeMs = 2000;
    gate.open();

    // Assess
    await expect(held).rejects.toMatchObject({ code: 'upstream_throttled', retryAfterSeconds: 28 });
    expect(server.received).toHaveLength(0);
  });

  it("gives a request that shares a fetch the table's token as the table's", async () => {
    // Prepare: the fleet keeps a token of the key.
    const tokenRequest = request();
    const keys = requestItemKeys(table.pepper, tokenRequest.clientSecret, requestText(tokenRequest, tokenRequest.accessTokenUrl));
    const fleets = { ...DEMO_TOKEN, access_token: 'the-fleets' };
    await table.plant(keys, itemStates(() => wall).kept({ ...ownEntry(fleets, epochMs(wall - 1000), 'planted'), copy: true }));
    const cache = await sharedCache();

    // Act: the second request comes while the first one's look in the table runs.
    const first = cache.resolve(ask());
    const sharing = ask();
    const second = await cache.resolve(sharing);

    // Assess
    expect([(await first).token.access_token, second.token.access_token, second.header, sharing.report.tier]).toEqual([
      'the-fleets',
      'the-fleets',
      'hit',
      'shared',
    ]);
    expect(server.received).toHaveLength(0);
  });

  it('passes on a bug in the exchange, and the next request asks the IdP', async () => {
    const cache = await sharedCache();
    const bug = new TypeError('a bug in the exchange');

    await expect(cache.resolve(ask(5000, { exchange: () => Promise.reject(bug) }))).rejects.toBe(bug);
    const next = await cache.resolve(ask());

    expect(next.header).toBe('miss');
    expect(server.received).toHaveLength(1);
  });
});
