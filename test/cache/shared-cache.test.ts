import type { ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { sealState } from '../../lambda/cache/item-state';
import type { Entry } from '../../lambda/cache/lifetime';
import { holdItemKeys, requestItemKeys } from '../../lambda/cache/sealed-item';
import { epochMs } from '../../lambda/cache/time';
import { bodyOf, tokenEvent } from '../support/events';
import { freshInstance, type Instance, issuingIdp, type TestClock, testClock } from '../support/fleet';
import { itemStates, type RawItem, type SharedTable, startSharedTable } from '../support/shared-table';
import { json, type ReceivedRequest, type Script, startTokenServer, type TokenServer } from '../support/token-server';

// Every instance here is a fresh module instance of the handler, configured from process.env as the
// deployed function is: TOKEN_CACHE=shared, the table in dynalite and the pepper in a Secrets Manager
// stand-in, over real HTTP, through the real AWS SDK. Their wall clock stands still unless moved.

const SECRET = 'shared-cache-test-secret-5d1c';
let server: TokenServer;
let table: SharedTable;
let secret = SECRET;
let idp: ReturnType<typeof issuingIdp>;
let clock: TestClock;
const instances: Instance[] = [];

const body = (overrides: Record<string, unknown> = {}) => ({
  client_id: 'fleet-client',
  client_secret: SECRET,
  access_token_url: `${server.origin}/token`,
  scope: 'read',
  ...overrides,
});
const event = (requestBody: Record<string, unknown>, headers: Record<string, string> = {}) => {
  const built = tokenEvent(requestBody);
  Object.assign(built.headers, headers);
  return built;
};

function instance(env: Record<string, string> = {}, own: TestClock = clock): Instance {
  const created = freshInstance(env, own.now);
  instances.push(created);
  return created;
}

/** `count` instances that have each answered a request of their own, so each SDK has loaded all of itself. */
async function warmFleet(count: number, env: Record<string, string> = {}): Promise<Instance[]> {
  const fleet = Array.from({ length: count }, () => instance(env));
  for (const [index, member] of fleet.entries()) await member.handle(event(body({ client_id: `warm-${index}-${Math.random()}` })));
  server.received.length = 0;
  return fleet;
}

/** An IdP that answers `script` `ms` later. */
const after =
  (ms: number, script: Script): Script =>
  (request: ReceivedRequest, response: ServerResponse) => {
    setTimeout(() => void script(request, response), ms);
  };

const HOUR_TOKEN = { access_token: 'kept', token_type: 'Bearer', expires_in: 3600 };
/**
 * A 1 h token received `ago` ms before now: fresh until 3210 s, due for refresh until 3240 s (by the
 * instance that asked the IdP for it; by any instance from 3225 s), stale until 3600 s.
 */
const kept = (ago: number, token: Entry['token'] = HOUR_TOKEN): Entry => ({ token, receivedAt: epochMs(clock.now() - ago) });
const states = itemStates(() => clock.now());

beforeAll(async () => {
  server = await startTokenServer();
  table = await startSharedTable('shared-cache-test');
  Object.assign(process.env, {
    TOKEN_URL_ALLOWLIST: server.origin,
    // Table calls may take 1 s each: this machine is shared, and a slow call here would be a miss,
    // not the behaviour under test. shared-cache-faults.test.ts covers slow tables.
    UPSTREAM_TIMEOUT_MS: '10000',
  });
});

beforeEach(() => {
  secret = SECRET;
  clock = testClock();
  idp = issuingIdp({ secret: () => secret });
  server.answer(idp);
  server.received.length = 0;
});

afterEach(() => {
  for (const created of instances.splice(0)) created.close();
});

afterAll(async () => {
  await table.close();
  await server.close();
});

describe('TOKEN_CACHE=shared across instances', () => {
  it('answers a second, fresh instance from the table without asking the IdP', async () => {
    // Prepare
    const [first, second] = [instance(), instance()];
    const distinct = body({ client_id: 'fleet-client-hit' });

    // Act
    const fetched = await first.handle(event(distinct));
    const shared = await second.handle(event(distinct));

    // Assess
    expect(server.received).toHaveLength(1);
    expect([fetched.headers?.['x-token-cache'], shared.headers?.['x-token-cache']]).toEqual(['miss', 'hit']);
    expect(bodyOf(shared).access_token).toBe(bodyOf(fetched).access_token);
    expect(second.records[0]).toMatchObject({ cache: 'shared', outcome: 'ok', status: 200 });
    expect(typeof second.records[0]?.cache_table_latency_ms).toBe('number');
  });

  it('answers a repeat on the same instance from memory, without the table', async () => {
    const [first, second] = [instance(), instance()];
    const distinct = body({ client_id: 'fleet-client-memory' });
    await first.handle(event(distinct));
    await second.handle(event(distinct));

    await second.handle(event(distinct));

    expect(second.records.map((record) => record.cache)).toEqual(['shared', 'memory']);
    expect(second.records[1]?.cache_table_latency_ms).toBeUndefined();
  });

  it('lowers expires_in and ext_expires_in by the seconds since the IdP answered', async () => {
    const distinct = body({ client_id: 'fleet-client-lifetime' });
    await table.plant(table.keysOf(distinct), states.kept(kept(1_000_000, { ...HOUR_TOKEN, ext_expires_in: 7200 })));

    const answer = await instance().handle(event(distinct));

    expect(answer.headers?.['x-token-cache']).toBe('hit');
    expect(bodyOf(answer)).toEqual({ access_token: 'kept', token_type: 'Bearer', expires_in: 2600, ext_expires_in: 6200 });
    expect(server.received).toHaveLength(0);
  });

  it.each([
    ['no expires_in', null],
    ['an expires_in within the 30 s margin', 25],
    ['a non-numeric expires_in', 'soon'],
  ])('never keeps a token with %s for a later request', async (_case, expiresIn) => {
    server.answer(issuingIdp({ secret: () => secret, expiresIn }));
    const distinct = body({ client_id: `fleet-client-unusable-${String(expiresIn)}` });

    await instance().handle(event(distinct));
    const second = await instance().handle(event(distinct));

    expect(second.headers?.['x-token-cache']).toBe('miss');
    expect(server.received).toHaveLength(2);
  });
});

describe('TOKEN_CACHE=shared: refresh ahead across the fleet', () => {
  it('refreshes once for the fleet, every other request answered at once with the kept token', async () => {
    // Prepare: 4 instances holding a 1 h token in memory, moved into its refresh window; a slow IdP
    const fleet = await warmFleet(4);
    const distinct = body({ client_id: 'fleet-client-refresh' });
    const original = bodyOf((await fleet[0]?.handle(event(distinct))) ?? {}).access_token;
    for (const member of fleet.slice(1)) await member.handle(event(distinct));
    server.received.length = 0;
    clock.advance(3_215_000);
    server.answer(after(300, idp));

    // Act: one request per instance at once, then more while the refresh runs
    const first = fleet.map((member) => member.handle(event(distinct)));
    await sleep(100);
    const during = await Promise.all(fleet.map((member) => member.handle(event(distinct))));
    const answers = await Promise.all(first);

    // Assess
    expect(server.received).toHaveLength(1);
    expect(during.map((answer) => answer.headers?.['x-token-cache'])).toEqual(['hit', 'hit', 'hit', 'hit']);
    const refreshed = answers.filter((answer) => answer.headers?.['x-token-cache'] === 'miss');
    expect(refreshed).toHaveLength(1);
    expect(answers.filter((answer) => bodyOf(answer).access_token === original)).toHaveLength(4 - 1);
    expect(fleet.flatMap((member) => member.records).filter((record) => record.cache_refresh === 'ahead')).toHaveLength(1);
    // The refresh was the instance's that asked the IdP; the others never went to the table for it.
    expect(fleet[0]?.records.map((record) => record.cache_refresh)).toContain('ahead');
    const others = fleet.slice(1).flatMap((member) => member.records.slice(-2));
    expect(others.map((record) => [record.cache, record.cache_table_latency_ms])).toEqual(Array(6).fill(['memory', undefined]));
  });

  it('leaves the refresh to the instance that asked the IdP until the middle of the window, then to any', async () => {
    // Prepare: the token from the IdP on one instance, which then goes (Lambda recycles it); another took it from the table
    const [asker, other] = [instance(), instance()];
    const distinct = body({ client_id: 'fleet-client-refresh-orphaned' });
    await asker.handle(event(distinct));
    await other.handle(event(distinct));
    asker.close();
    // A token another instance received is judged 5 s older (the clocks' tolerance): the fleet's half opens at 3220 s
    clock.advance(3_219_999);

    // Act
    const early = await other.handle(event(distinct));
    clock.advance(1);
    const due = await other.handle(event(distinct));

    // Assess
    expect([early, due].map((answer) => [answer.headers?.['x-token-cache'], bodyOf(answer).access_token])).toEqual([
      ['hit', 'issued-1'],
      ['miss', 'issued-2'],
    ]);
    expect(other.records.slice(1).map((record) => [record.cache_refresh, typeof record.cache_table_latency_ms])).toEqual([
      [undefined, 'undefined'],
      ['ahead', 'number'],
    ]);
    expect(server.received).toHaveLength(2);
  });

  it('answers a fresh instance early in the window from the table, leaving the refresh to the instance that asked', async () => {
    const distinct = body({ client_id: 'fleet-client-refresh-newcomer' });
    await table.plant(table.keysOf(distinct), states.kept(kept(3_219_999)));
    const newcomer = instance();

    const answer = await newcomer.handle(event(distinct));

    expect([answer.headers?.['x-token-cache'], bodyOf(answer).access_token]).toEqual(['hit', 'kept']);
    expect(newcomer.records[0]).toMatchObject({ cache: 'shared', cache_refresh: undefined });
    expect(server.received).toHaveLength(0);
  });

  it('asks the table again no sooner than a second after it found another instance refreshing', async () => {
    // Prepare: two instances with the token in memory, in the second half of its refresh window; one refreshes slowly
    const [refresher, other] = [instance(), instance()];
    const distinct = body({ client_id: 'fleet-client-refresh-once-a-second' });
    await refresher.handle(event(distinct));
    await other.handle(event(distinct));
    clock.advance(3_226_000);
    server.answer(after(500, idp));
    const refreshing = refresher.handle(event(distinct));
    await sleep(100);

    // Act: the other instance finds the claim, then answers from memory; a second later it asks again
    await other.handle(event(distinct));
    await other.handle(event(distinct));
    clock.advance(1000);
    await other.handle(event(distinct));
    await refreshing;

    // Assess
    expect(other.records.slice(1).map((record) => [record.cache, typeof record.cache_table_latency_ms])).toEqual([
      ['memory', 'number'],
      ['memory', 'undefined'],
      ['memory', 'number'],
    ]);
    expect(server.received).toHaveLength(2);
  });

  it('moves every instance to the new token no later than its own copy goes stale', async () => {
    // Prepare: two instances with the token; one refreshes it
    const [refresher, other] = [instance(), instance()];
    const distinct = body({ client_id: 'fleet-client-switch' });
    await refresher.handle(event(distinct));
    await other.handle(event(distinct));
    clock.advance(3_215_000);
    await refresher.handle(event(distinct));

    // Act
    clock.advance(25_000);
    const stale = await other.handle(event(distinct));

    // Assess
    expect(bodyOf(stale).access_token).toBe('issued-2');
    expect(server.received).toHaveLength(2);
  });
});

describe('TOKEN_CACHE=shared: what the table holds, as a reader judges it', () => {
  it('waits on a claim dated as far ahead as a holder whose clock runs 5 s ahead writes it, until its renewals are missed', async () => {
    const distinct = body({ client_id: 'fleet-client-claim-at-bound' });
    await table.plant(table.keysOf(distinct), states.claim('silent', { agoMs: -5000, leftMs: 9900 }));

    const started = performance.now();
    const answer = await instance().handle(event(distinct));

    expect([answer.statusCode, answer.headers?.['x-token-cache']]).toEqual([200, 'miss']);
    expect(performance.now() - started).toBeGreaterThanOrEqual(750);
    expect(server.received).toHaveLength(1);
  });

  it('answers at once with the token a claim keeps while its holder refreshes it', async () => {
    const distinct = body({ client_id: 'fleet-client-claim-keeps' });
    await table.plant(table.keysOf(distinct), states.claim('refresher', { kept: kept(3_215_000) }));

    const answer = await instance().handle(event(distinct));

    expect([answer.headers?.['x-token-cache'], bodyOf(answer).access_token]).toEqual(['hit', 'kept']);
    expect(server.received).toHaveLength(0);
  });

  it.each([
    [5000, 'hit'],
    [5001, 'miss'],
  ])('takes a token dated %p ms ahead of its clock as %s: up to 5 s of another clock, no further', async (ahead, header) => {
    const distinct = body({ client_id: `fleet-client-dated-${ahead}` });
    await table.plant(table.keysOf(distinct), states.kept(kept(-ahead)));

    const answer = await instance().handle(event(distinct));

    expect(answer.headers?.['x-token-cache']).toBe(header);
  });

  it('keeps its own stale token for an IdP failure over a newer one in the table that has expired', async () => {
    // Prepare: this instance's 1 h token, stale; the table then holds a newer 35 s token, expired
    const member = instance();
    const distinct = body({ client_id: 'fleet-client-newer-expired' });
    await member.handle(event(distinct));
    clock.advance(3_300_000);
    await table.plant(table.keysOf(distinct), states.kept(kept(40_000, { ...HOUR_TOKEN, access_token: 'short', expires_in: 35 })));
    server.answer(json(500, { error: 'server_error' }));

    const answer = await member.handle(event(distinct));

    expect([answer.statusCode, answer.headers?.['x-token-cache'], bodyOf(answer).access_token]).toEqual([200, 'stale', 'issued-1']);
  });

  it('remembers a failure for its key alone: another secret of the client still reaches the IdP', async () => {
    const distinct = body({ client_id: 'fleet-client-failure-per-key' });
    server.answer(json(500, { error: 'server_error' }));
    const failed = await instance().handle(event(distinct));
    server.answer(json(200, { access_token: 'other-secret', token_type: 'Bearer', expires_in: 3600 }));

    const other = await instance().handle(event({ ...distinct, client_secret: 'another-secret-of-the-client' }));

    expect([failed.statusCode, other.statusCode]).toEqual([502, 200]);
    expect(server.received).toHaveLength(2);
  });

  it('answers a failure it remembers, with no token to stand in, without the table', async () => {
    const member = instance();
    server.answer(json(500, { error: 'server_error' }));
    const distinct = body({ client_id: 'fleet-client-remembered-here' });
    await member.handle(event(distinct));

    const again = await member.handle(event(distinct));

    expect(again.statusCode).toBe(502);
    expect(member.records[1]).toMatchObject({ cache_remembered: 'failure', cache_table_latency_ms: undefined });
    expect(server.received).toHaveLength(1);
  });
});

describe('TOKEN_CACHE=shared: a refresh that fails', () => {
  it('answers a fresh instance with the token the table keeps, as a hit, when its refresh fails', async () => {
    const distinct = body({ client_id: 'fleet-client-refresh-fails' });
    await table.plant(table.keysOf(distinct), states.kept(kept(3_230_000)));
    server.answer(json(500, { error: 'server_error' }));
    const member = instance();

    const answer = await member.handle(event(distinct));

    expect([answer.statusCode, answer.headers?.['x-token-cache'], bodyOf(answer).access_token]).toEqual([200, 'hit', 'kept']);
    expect(member.records[0]).toMatchObject({ cache: 'shared', cache_refresh: 'ahead' });
    expect(server.received).toHaveLength(1);
  });
});

describe('TOKEN_CACHE=shared: a refresh from a copy that fails', () => {
  it("answers with the copy it read from the table, and logs it as the table's", async () => {
    // Prepare: an instance that read the token from the table, which then reaches the middle of its refresh window
    const distinct = body({ client_id: 'fleet-client-copy-refresh-fails' });
    await table.plant(table.keysOf(distinct), states.kept(kept(3_000_000)));
    const member = instance();
    await member.handle(event(distinct));
    clock.advance(230_000);
    server.answer(json(500, { error: 'server_error' }));

    // Act
    const answer = await member.handle(event(distinct));

    // Assess
    expect([answer.statusCode, answer.headers?.['x-token-cache'], bodyOf(answer).access_token]).toEqual([200, 'hit', 'kept']);
    expect(member.records.map((record) => [record.cache, record.cache_refresh])).toEqual([
      ['shared', undefined],
      ['shared', 'ahead'],
    ]);
    expect(server.received).toHaveLength(1);
  });
});

describe('TOKEN_CACHE=shared: stale if error across the fleet', () => {
  it('answers a fresh instance with the stale token the table keeps when the IdP fails', async () => {
    const distinct = body({ client_id: 'fleet-client-stale' });
    await table.plant(table.keysOf(distinct), states.kept(kept(3_300_000)));
    server.answer(json(500, { error: 'server_error' }));

    const answers = [await instance().handle(event(distinct)), await instance().handle(event(distinct))];

    expect(answers.map((answer) => [answer.statusCode, answer.headers?.['x-token-cache'], bodyOf(answer).expires_in])).toEqual([
      [200, 'stale', 300],
      [200, 'stale', 300],
    ]);
    // The second answered from the failure the first left in the table.
    expect(server.received).toHaveLength(1);
    expect(instances[1]?.records[0]).toMatchObject({ cache: 'stale', cache_remembered: 'failure' });
  });

  it('never serves a stale token anywhere once the IdP has rejected its key', async () => {
    // Prepare: an instance holding the token, stale; a 401 on another instance
    const holder = instance();
    const distinct = body({ client_id: 'fleet-client-rejected' });
    await holder.handle(event(distinct));
    clock.advance(3_300_000);
    server.answer(json(401, { error: 'invalid_client' }));
    const rejected = await instance().handle(event(distinct));

    // Act: once the rejection is no longer remembered, the IdP fails
    clock.advance(5000);
    server.answer(json(500, { error: 'server_error' }));
    const failing = await holder.handle(event(distinct));

    // Assess
    expect([rejected.statusCode, failing.statusCode]).toEqual([401, 502]);
  });

  it('answers a stale token in place of a hold it remembers only once the table shows no rejection since', async () => {
    // Prepare: an instance holding the token, stale; the key's item holds a 30 s hold another instance earned
    const member = instance();
    const distinct = body({ client_id: 'fleet-client-confirmed-stale' });
    await member.handle(event(distinct));
    clock.advance(3_300_000);
    const hold = { code: 'upstream_throttled', until: epochMs(clock.now() + 30_000) } as const;
    await table.plant(table.keysOf(distinct), states.failure('elsewhere', hold));
    server.received.length = 0;

    // Act: the first request learns the hold from the table; the second remembers it, and still reads
    // the table; then a rejection lands there
    const first = await member.handle(event(distinct));
    const second = await member.handle(event(distinct));
    await table.plant(table.keysOf(distinct), states.failure('elsewhere', hold, { rejectedAt: clock.now() - 1 }));
    const rejected = await member.handle(event(distinct));

    // Assess
    expect([first, second].map((answer) => [answer.statusCode, answer.headers?.['x-token-cache']])).toEqual([
      [200, 'stale'],
      [200, 'stale'],
    ]);
    expect(typeof member.records[2]?.cache_table_latency_ms).toBe('number');
    // Standing in is no refresh ahead.
    expect(member.records.map((record) => record.cache_refresh)).toEqual([undefined, undefined, undefined, undefined]);
    expect(rejected.statusCode).toBe(503);
    expect(server.received).toHaveLength(0);
  });

  it("serves an instance's own stale copy when the table remembers another failure and keeps no token", async () => {
    // Prepare: an instance holding the token, stale; the table remembering a 502 with nothing kept
    const holder = instance();
    const distinct = body({ client_id: 'fleet-client-own-copy' });
    await holder.handle(event(distinct));
    clock.advance(3_300_000);
    await table.plant(table.keysOf(distinct), states.failure('elsewhere', { code: 'upstream_error', until: epochMs(clock.now() + 1000) }));
    server.received.length = 0;

    // Act
    const answer = await holder.handle(event(distinct));

    // Assess
    expect([answer.statusCode, answer.headers?.['x-token-cache'], bodyOf(answer).access_token]).toEqual([200, 'stale', 'issued-1']);
    expect(server.received).toHaveLength(0);
  });
});

describe('TOKEN_CACHE=shared and secrets', () => {
  it("answers a wrong secret with the IdP's 401, and leaves the right secret's entry as it was", async () => {
    const right = body({ client_id: 'fleet-client-wrong' });
    await instance().handle(event(right));

    const wrong = await instance().handle(event({ ...right, client_secret: 'guessed-secret' }));
    const after = await instance().handle(event(right));

    expect(wrong.statusCode).toBe(401);
    expect(bodyOf(wrong)).toEqual({ code: 'unauthorized', description: 'Unauthorized credentials provided' });
    expect([after.headers?.['x-token-cache'], bodyOf(after).access_token]).toEqual(['hit', 'issued-1']);
    expect(server.received).toHaveLength(2);
  });

  it('gets a fresh token for a rotated secret, which the next instance then shares', async () => {
    const old = body({ client_id: 'fleet-client-rotated' });
    await instance().handle(event(old));

    secret = 'rotated-secret-8e2a';
    const rotated = await instance().handle(event({ ...old, client_secret: secret }));
    const next = await instance().handle(event({ ...old, client_secret: secret }));

    expect([rotated.statusCode, bodyOf(rotated).access_token]).toEqual([200, 'issued-2']);
    expect([next.headers?.['x-token-cache'], bodyOf(next).access_token]).toEqual(['hit', 'issued-2']);
    expect(server.received).toHaveLength(2);
  });
});

describe('TOKEN_CACHE=shared under a burst', () => {
  // What the item held before the burst: each is claimed under its own condition (absent, the same
  // revision, no revision), which is what leaves one holder.
  const before: [string, (distinct: Record<string, unknown>) => Promise<void>][] = [
    ['nothing', async () => undefined],
    ['a stale entry', async (distinct) => table.plant(table.keysOf(distinct), states.kept(kept(3_300_000)))],
    [
      'a claim from longer ago than any holder holds one',
      async (distinct) => table.plant(table.keysOf(distinct), states.claim('gone', { agoMs: 60_000 })),
    ],
    [
      'an expired failure',
      async (distinct) => table.plant(table.keysOf(distinct), states.failure('x', { code: 'upstream_error', until: epochMs(clock.now()) })),
    ],
    ['no revision, no state', async (distinct) => table.put({ pk: { S: table.keysOf(distinct).itemKey }, expires: { N: '1' } })],
  ];

  it.each(before)('asks the IdP once when 8 instances miss the same token at once, the item holding %s', async (_case, plant) => {
    // Prepare: an IdP that takes its time, as real ones do
    const fleet = await warmFleet(8);
    server.answer(after(200, idp));
    const burst = body({ client_id: `fleet-client-burst-${_case.length}` });
    await plant(burst);

    // Act
    const answers = await Promise.all(fleet.map((member) => member.handle(event(burst))));

    // Assess
    expect(server.received).toHaveLength(1);
    expect(answers.map((answer) => answer.statusCode)).toEqual(Array(8).fill(200));
    expect(new Set(answers.map((answer) => bodyOf(answer).access_token)).size).toBe(1);
    expect(fleet.map((member) => member.records[1]?.cache).sort()).toEqual(['miss', ...Array(7).fill('shared')]);
  });

  it.each<[string, Script, number, string | undefined]>([
    ['an IdP failing with 500', json(500, { error: 'server_error' }), 502, undefined],
    ['an IdP rejecting the client', json(401, { error: 'invalid_client' }), 401, undefined],
    ['an IdP asking to wait', json(429, { error: 'slow_down' }, { 'retry-after': '20' }), 503, '20'],
  ])(
    'shares the outcome of one exchange with the fleet: a burst of 12 on 6 instances meeting %s',
    async (_case, script, status, retryAfter) => {
      const fleet = await warmFleet(6);
      server.answer(after(200, script));
      const burst = body({ client_id: `fleet-client-failing-${status}` });

      const answers = await Promise.all([...fleet, ...fleet].map((member) => member.handle(event(burst))));

      expect(answers.map((answer) => [answer.statusCode, answer.headers?.['retry-after']])).toEqual(Array(12).fill([status, retryAfter]));
      expect(server.received).toHaveLength(1);
    },
  );

  it('holds every secret of the client, on every instance, once the IdP asked a key with a kept token to wait', async () => {
    // Prepare: a kept token proves the key; once it is stale, the IdP asks to wait
    await instance().handle(event(body({ client_id: 'fleet-client-held' })));
    clock.advance(3_300_000);
    server.answer(json(429, { error: 'slow_down' }, { 'retry-after': '30' }));
    await instance().handle(event(body({ client_id: 'fleet-client-held' })));
    clock.advance(10_000);

    // Act
    const held = await instance().handle(event(body({ client_id: 'fleet-client-held', client_secret: 'another', scope: 'write' })));

    // Assess: another instance holds it 5 s longer, as it would a hold from a clock 5 s behind
    expect([held.statusCode, held.headers?.['retry-after']]).toEqual([503, '25']);
    expect(server.received).toHaveLength(2);
    expect(instances[2]?.records[0]).toMatchObject({ outcome: 'upstream_throttled', cache_remembered: 'hold' });
  });

  it('holds only the key that earned a hold when no kept token proves it, on every instance', async () => {
    // Prepare: a guessed secret, answered 429
    server.answer(json(429, { error: 'slow_down' }, { 'retry-after': '30' }));
    await instance().handle(event(body({ client_id: 'fleet-client-guessed', client_secret: 'a-guess' })));

    // Act
    const guessedAgain = await instance().handle(event(body({ client_id: 'fleet-client-guessed', client_secret: 'a-guess' })));
    server.answer(idp);
    const owner = await instance().handle(event(body({ client_id: 'fleet-client-guessed' })));

    // Assess
    expect([guessedAgain.statusCode, owner.statusCode, owner.headers?.['x-token-cache']]).toEqual([503, 200, 'miss']);
    expect(server.received).toHaveLength(2);
  });

  it('answers every request of a burst whose token comes just inside the deadline', async () => {
    // Prepare: a 3 s deadline and an IdP that takes 2.5 s; a direct call would have had its token
    const fleet = await warmFleet(4, { UPSTREAM_TIMEOUT_MS: '3000' });
    server.answer(after(2500, idp));
    const burst = body({ client_id: 'fleet-client-just-in-time' });

    // Act
    const answers = await Promise.all([...fleet, ...fleet].map((member) => member.handle(event(burst))));

    // Assess
    expect(answers.map((answer) => answer.statusCode)).toEqual(Array(8).fill(200));
    expect(server.received).toHaveLength(1);
  });

  it('shares a token that cannot be kept with the waiters of its exchange, in its time, and with no later request', async () => {
    // Prepare: no expires_in, and an IdP that takes a second
    const fleet = await warmFleet(3);
    server.answer(after(1000, issuingIdp({ secret: () => secret, expiresIn: null })));
    const burst = body({ client_id: 'fleet-client-no-expiry' });

    // Act
    const started = performance.now();
    const answers = await Promise.all([...fleet, ...fleet].map((member) => member.handle(event(burst))));
    const took = performance.now() - started;
    const later = await fleet[0]?.handle(event(burst));

    // Assess
    const tokens = new Set(answers.map((answer) => bodyOf(answer).access_token));
    expect(tokens.size).toBe(1);
    expect(took).toBeLessThan(1800);
    expect(tokens.has(bodyOf(later ?? {}).access_token)).toBe(false);
    expect(server.received).toHaveLength(2);
    // What the waiters read is left to the table's expiry a deadline (10 s here) and the clocks' tolerance (5 s) after the answer.
    const item = (await table.scan()).find((candidate) => candidate.pk?.S === table.keysOf(burst).itemKey);
    const expiresMs = Number(item?.expires?.N) * 1000;
    expect(expiresMs).toBeGreaterThan(clock.now());
    expect(expiresMs).toBeLessThanOrEqual(clock.now() + 16_000);
  });

  it('shares one exchange among no-cache requests across instances, and its token replaces the kept one', async () => {
    const fleet = await warmFleet(4);
    const burst = body({ client_id: 'fleet-client-no-cache' });
    await table.plant(table.keysOf(burst), states.kept(kept(60_000)));
    server.answer(after(200, idp));

    const answers = await Promise.all(fleet.map((member) => member.handle(event(burst, { 'cache-control': 'no-cache' }))));
    const next = await instance().handle(event(burst));

    const tokens = new Set(answers.map((answer) => bodyOf(answer).access_token));
    expect(tokens.size).toBe(1);
    expect(tokens.has('kept')).toBe(false);
    expect([next.headers?.['x-token-cache'], bodyOf(next).access_token]).toEqual(['hit', [...tokens][0]]);
    expect(server.received).toHaveLength(1);
  });
});

describe('TOKEN_CACHE=shared and private_key_jwt', () => {
  const segment = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const keyed = (clientId: string) => ({
    client_id: clientId,
    client_assertion: `${segment({ alg: 'ES256' })}.${segment({ sub: clientId })}.c2ln`,
    client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
    access_token_url: `${server.origin}/token`,
  });

  it("puts the hold a private_key_jwt request gets in the table, where every instance's private_key_jwt requests of the client see it, and no other", async () => {
    server.answer(json(429, { error: 'slow_down' }, { 'retry-after': '30' }));
    const throttled = await instance().handle(event(keyed('fleet-keyed-held')));

    const heldKeyed = await instance().handle(event(keyed('fleet-keyed-held')));
    server.answer(idp);
    const secret = await instance().handle(event(body({ client_id: 'fleet-keyed-held' })));

    expect([throttled.statusCode, heldKeyed.statusCode, secret.statusCode]).toEqual([503, 503, 200]);
    expect(server.received).toHaveLength(2);
    expect(instances[1]?.records[0]).toMatchObject({ cache: 'miss', cache_remembered: 'hold' });
  });

  it('sends a private_key_jwt request on when no hold is in the table', async () => {
    server.answer(json(200, { access_token: 'for-a-key', expires_in: 3600 }));
    const answers = [await instance().handle(event(keyed('fleet-keyed-free'))), await instance().handle(event(keyed('fleet-keyed-free')))];

    expect(answers.map((answer) => [answer.statusCode, answer.headers?.['x-token-cache']])).toEqual([
      [200, 'miss'],
      [200, 'miss'],
    ]);
    expect(server.received).toHaveLength(2);
  });
});

describe('TOKEN_CACHE=shared and deadlines', () => {
  it('lets a request that joined a wait outlive the first waiter: it waits on with its own deadline', async () => {
    // Prepare: a holder with a 3 s deadline whose IdP takes 1.7 s, and an instance with 1.5 s ones
    server.answer(after(1700, idp));
    const distinct = body({ client_id: 'fleet-client-joiner' });
    const holding = instance({ UPSTREAM_TIMEOUT_MS: '3000' }).handle(event(distinct));
    await sleep(100);
    const member = instance({ UPSTREAM_TIMEOUT_MS: '1500' });

    // Act: the first waiter gives up at 1.6 s; one that joined it at 0.8 s may wait until 2.3 s
    const first = member.handle(event(distinct));
    await sleep(700);
    const joined = member.handle(event(distinct));
    const answers = await Promise.all([first, joined, holding]);

    // Assess
    expect(answers.map((answer) => answer.statusCode)).toEqual([504, 200, 200]);
    expect(bodyOf(answers[1] ?? {}).access_token).toBe(bodyOf(answers[2] ?? {}).access_token);
    expect(server.received).toHaveLength(1);
  });
});

describe('TOKEN_CACHE=shared and clocks', () => {
  it.each([
    ['4 s ahead', 4000],
    ['4 s behind', -4000],
  ])("shares tokens with an instance whose clock is %s of the writer's", async (_case, skew) => {
    const distinct = body({ client_id: `fleet-client-skew-${skew}` });
    await instance().handle(event(distinct));

    const skewed = await instance({}, clock.skewed(skew)).handle(event(distinct));

    expect(skewed.headers?.['x-token-cache']).toBe('hit');
    expect(server.received).toHaveLength(1);
  });

  it('takes no token from a writer whose clock is far ahead: it fetches its own, and serves no token past its life', async () => {
    const distinct = body({ client_id: 'fleet-client-future' });
    await instance({}, clock.skewed(60_000)).handle(event(distinct));

    const behind = await instance().handle(event(distinct));

    expect([behind.headers?.['x-token-cache'], bodyOf(behind).access_token]).toEqual(['miss', 'issued-2']);
  });
});

describe('TOKEN_CACHE=shared and a table someone wrote to', () => {
  const SEALED = 'state';
  const tamperings: [string, (item: RawItem, other: RawItem) => RawItem][] = [
    ['a flipped bit in the sealed state', (item) => ({ ...item, [SEALED]: { B: flipped(item[SEALED]?.B) } })],
    ['a truncated sealed state', (item) => ({ ...item, [SEALED]: { B: item[SEALED]?.B?.subarray(0, 40) ?? Buffer.alloc(1) } })],
    ['a later expiry in the clear', (item) => ({ ...item, expires: { N: String(Number(item.expires?.N) + 86_400) } })],
    [
      "another request's sealed state moved here",
      (item, other) => ({ ...item, [SEALED]: other[SEALED] as AttributeValue, expires: other.expires as AttributeValue }),
    ],
    ['a string where the sealed state belongs', (item) => ({ ...item, [SEALED]: { S: 'eyJhY2Nlc3NfdG9rZW4iOiJmb3JnZWQifQ' } })],
    ['no expiry', ({ expires: _expires, ...item }) => item],
    ['a flipped bit and no revision', ({ rev: _rev, ...item }) => ({ ...item, [SEALED]: { B: flipped(item[SEALED]?.B) } })],
    [
      'a claim of the first format, dated years ahead',
      ({ rev }) => ({ pk: { S: '' }, lease: { N: String(Date.now() + 3e11) }, ...(rev ? { rev } : {}) }),
    ],
  ];

  it.each(tamperings)('treats %s as nothing there: the IdP answers at once, and its token replaces the item', async (_case, tamper) => {
    // Prepare: a good entry, and another request's, then the first one altered in place
    const distinct = body({ client_id: `fleet-client-tampered-${_case.length}` });
    const other = body({ client_id: `fleet-client-other-${_case.length}` });
    await instance().handle(event(distinct));
    await instance().handle(event(other));
    const items = await table.scan();
    const item = items.find((candidate) => candidate.pk?.S === table.keysOf(distinct).itemKey) as RawItem;
    const otherItem = items.find((candidate) => candidate.pk?.S === table.keysOf(other).itemKey) as RawItem;
    await table.put({ ...tamper(item, otherItem), pk: item.pk as AttributeValue });

    // Act
    const started = performance.now();
    const refetched = await instance().handle(event(distinct));
    const took = performance.now() - started;
    const next = await instance().handle(event(distinct));

    // Assess
    expect([refetched.statusCode, refetched.headers?.['x-token-cache'], bodyOf(refetched).access_token]).toEqual([200, 'miss', 'issued-3']);
    expect([next.headers?.['x-token-cache'], bodyOf(next).access_token]).toEqual(['hit', 'issued-3']);
    expect(took).toBeLessThan(500);
  });

  it.each<[string, (distinct: Record<string, unknown>) => Promise<void>]>([
    [
      'a claim sealed with the right keys but dated years ahead',
      (distinct) => table.plant(table.keysOf(distinct), states.claim('forged', { agoMs: -3e11 })),
    ],
    [
      'a rejection remembered for a year',
      (distinct) =>
        table.plant(table.keysOf(distinct), states.failure('forged', { code: 'unauthorized', until: epochMs(clock.now() + 3e10) })),
    ],
    ['a hold for a year', (distinct) => table.plant(table.holdKeysOf(distinct), states.hold(3e10))],
  ])('ignores %s: the IdP answers at once', async (_case, plant) => {
    const distinct = body({ client_id: `fleet-client-forged-${_case.length}` });
    await plant(distinct);

    const started = performance.now();
    const answer = await instance().handle(event(distinct));

    expect([answer.statusCode, answer.headers?.['x-token-cache']]).toEqual([200, 'miss']);
    expect(performance.now() - started).toBeLessThan(500);
    expect(server.received).toHaveLength(1);
  });

  it('ignores a hold or a failure written without the pepper, however it is dated', async () => {
    // Prepare: states sealed with keys derived from another pepper, as someone with write access
    // to the table but not to the secret would have to
    const distinct = body({ client_id: 'fleet-client-no-pepper' });
    const forgedPepper = Buffer.from('not-the-pepper-but-just-as-long-as-it');
    const rightKeys = table.keysOf(distinct);
    const forgedKeys = { ...requestItemKeys(forgedPepper, SECRET, 'x'), itemKey: rightKeys.itemKey };
    const hold = sealState({ ...holdItemKeys(forgedPepper, 'x'), itemKey: table.holdKeysOf(distinct).itemKey }, states.hold(30_000));
    const failure = sealState(forgedKeys, states.failure('x', { code: 'unauthorized', until: epochMs(clock.now() + 4000) }));
    await table.put({
      pk: { S: table.holdKeysOf(distinct).itemKey },
      state: { B: hold.sealed },
      expires: { N: String(hold.expiresSeconds) },
      rev: { S: 'h' },
    });
    await table.put({
      pk: { S: rightKeys.itemKey },
      state: { B: failure.sealed },
      expires: { N: String(failure.expiresSeconds) },
      rev: { S: 'f' },
    });

    // Act
    const answer = await instance().handle(event(distinct));

    // Assess
    expect(answer.statusCode).toBe(200);
    expect(server.received).toHaveLength(1);
  });
});

describe('what the table holds', () => {
  it('holds nothing usable and names no client: no token, secret, client id, scope, audience or token URL, in any form, whatever the outcome', async () => {
    // Prepare: distinctive values, and every kind of outcome: a token, a hit, a rejection, a hold, a failure
    const dumpSecret = 'dump-secret-9b7e41c2';
    secret = dumpSecret;
    server.answer(issuingIdp({ secret: () => secret, prefix: 'dump-access-token-3f61' }));
    const dump = body({
      client_id: 'dump-client-c0ffee',
      client_secret: dumpSecret,
      access_token_url: `${server.origin}/dump-token-path`,
      scope: 'dump:scope-7a1',
      audience: 'https://dump-audience.example',
    });
    await instance().handle(event(dump));
    await instance().handle(event(dump));
    await instance().handle(event({ ...dump, client_secret: 'dump-wrong-secret-1d0a' }));
    server.answer(json(500, { error: 'dump-server-error' }));
    await instance().handle(event({ ...dump, scope: 'dump:scope-8b2' }));
    server.answer(json(429, { error: 'dump-slow-down' }));
    await instance().handle(event({ ...dump, scope: 'dump:scope-9c3' }));

    // Act
    const items = await table.scan();

    // Assess
    const forbidden = [
      dumpSecret,
      'dump-wrong-secret-1d0a',
      'dump-access-token-3f61',
      'dump-client-c0ffee',
      'dump:scope-7a1',
      'dump:scope-8b2',
      'dump:scope-9c3',
      'dump-audience',
      'dump-token-path',
      'dump-server-error',
      'dump-slow-down',
      'unauthorized',
      'upstream',
      new URL(server.origin).host,
    ];
    const text = JSON.stringify(items, (_key, value: unknown) =>
      value instanceof Uint8Array ? Buffer.from(value).toString('base64') : value,
    );
    const bytes = Buffer.concat(
      items.flatMap((item) => Object.values(item).map((value) => Buffer.from(value.B ?? value.S ?? value.N ?? ''))),
    );
    for (const value of forbidden) {
      expect(text).not.toContain(value);
      expect(bytes.includes(Buffer.from(value))).toBe(false);
      expect(text).not.toContain(Buffer.from(value).toString('base64').replace(/=+$/, ''));
    }
    expect(new Set(items.map((item) => Object.keys(item).sort().join()))).toEqual(new Set(['expires,pk,rev,state']));
  });
});

function flipped(value: Uint8Array | undefined): Uint8Array {
  const copy = Buffer.from(value ?? Buffer.alloc(64));
  copy[copy.length - 20] = (copy[copy.length - 20] ?? 0) ^ 1;
  return copy;
}
