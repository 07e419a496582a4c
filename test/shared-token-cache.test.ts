import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { entryKeys, expirySeconds, sealEntry } from '../lambda/sealed-token';
import { type SecretRequest, tokenShapingFields } from '../lambda/token-cache';
import { parseTokenRequest } from '../lambda/token-request';
import { bodyOf, tokenEvent } from './support/events';
import { freshInstance, type Instance, issuingIdp } from './support/fleet';
import { type RawItem, type SharedTable, startSharedTable } from './support/shared-table';
import { startTokenServer, type TokenServer } from './support/token-server';

// Every instance here is a fresh module instance of the handler, configured from process.env as the
// deployed function is: TOKEN_CACHE=shared, the table in dynalite over real HTTP, the real AWS SDK.

const SECRET = 'shared-cache-test-secret-5d1c';
let server: TokenServer;
let table: SharedTable;
let secret = SECRET;
let idp: ReturnType<typeof issuingIdp>;
const instances: Instance[] = [];

const body = (overrides: Record<string, unknown> = {}) => ({
  client_id: 'fleet-client',
  client_secret: SECRET,
  access_token_url: `${server.origin}/token`,
  scope: 'read',
  ...overrides,
});

function instance(): Instance {
  const created = freshInstance();
  instances.push(created);
  return created;
}

/** The item key and seal key the function derives for a request body. */
function keysOf(requestBody: Record<string, unknown>) {
  const request = parseTokenRequest(tokenEvent(requestBody)) as SecretRequest;
  return entryKeys(request.clientSecret, tokenShapingFields(request, new URL(request.accessTokenUrl).href));
}

beforeAll(async () => {
  server = await startTokenServer();
  table = await startSharedTable('shared-cache-test');
  Object.assign(process.env, {
    TOKEN_CACHE: 'shared',
    TOKEN_CACHE_TABLE: table.tableName,
    TOKEN_URL_ALLOWLIST: server.origin,
    // Table calls may take 1 s each (a tenth of this): this machine is shared, and a slow call here
    // would be a miss, not the hit under test. test/shared-token-cache-faults.test.ts covers slow tables.
    UPSTREAM_TIMEOUT_MS: '10000',
  });
});

beforeEach(() => {
  secret = SECRET;
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
    const first = instance();
    const second = instance();
    const distinct = body({ client_id: 'fleet-client-hit' });

    // Act
    const fetched = await first.handle(tokenEvent(distinct));
    const shared = await second.handle(tokenEvent(distinct));

    // Assess
    expect(server.received).toHaveLength(1);
    expect([fetched.headers?.['x-token-cache'], shared.headers?.['x-token-cache']]).toEqual(['miss', 'hit']);
    expect(bodyOf(shared).access_token).toBe(bodyOf(fetched).access_token);
    expect(second.records[0]).toMatchObject({ cache: 'shared', outcome: 'ok', status: 200 });
    expect(typeof second.records[0]?.cache_table_latency_ms).toBe('number');
  });

  it('answers a repeat on the same instance from memory, without the table', async () => {
    const first = instance();
    const second = instance();
    const distinct = body({ client_id: 'fleet-client-memory' });
    await first.handle(tokenEvent(distinct));
    await second.handle(tokenEvent(distinct));

    await second.handle(tokenEvent(distinct));

    expect(second.records.map((record) => record.cache)).toEqual(['shared', 'memory']);
    expect(second.records[1]?.cache_table_latency_ms).toBeUndefined();
  });

  it("lowers expires_in to what is left of the entry's lifetime", async () => {
    // Prepare: an entry sealed as the function would, issued long ago, 1000 s left
    const distinct = body({ client_id: 'fleet-client-lifetime' });
    const keys = keysOf(distinct);
    const expiresAt = Date.now() + 1_000_000;
    await table.put({
      pk: { S: keys.itemKey },
      sealed: { B: sealEntry(keys, { token: { access_token: 'kept', expires_in: 86_400 }, expiresAt, staleAt: expiresAt - 30_000 }) },
      expires: { N: String(expirySeconds(expiresAt)) },
      rev: { S: 'r1' },
    });

    // Act
    const answer = await instance().handle(tokenEvent(distinct));

    // Assess
    expect(answer.headers?.['x-token-cache']).toBe('hit');
    expect(bodyOf(answer).access_token).toBe('kept');
    expect(bodyOf(answer).expires_in).toBeGreaterThanOrEqual(990);
    expect(bodyOf(answer).expires_in).toBeLessThanOrEqual(1000);
    expect(server.received).toHaveLength(0);
  });

  it('never hands out an entry within its margin of expiry: the next instance asks the IdP and replaces it', async () => {
    const distinct = body({ client_id: 'fleet-client-stale' });
    const keys = keysOf(distinct);
    const expiresAt = Date.now() + 20_000;
    await table.put({
      pk: { S: keys.itemKey },
      sealed: { B: sealEntry(keys, { token: { access_token: 'stale', expires_in: 3600 }, expiresAt, staleAt: expiresAt - 360_000 }) },
      expires: { N: String(expirySeconds(expiresAt)) },
      rev: { S: 'r1' },
    });

    const refreshed = await instance().handle(tokenEvent(distinct));
    const next = await instance().handle(tokenEvent(distinct));

    expect(bodyOf(refreshed).access_token).toBe('issued-1');
    expect(refreshed.headers?.['x-token-cache']).toBe('miss');
    expect(bodyOf(next).access_token).toBe('issued-1');
    expect(next.headers?.['x-token-cache']).toBe('hit');
    expect(server.received).toHaveLength(1);
  });

  it.each([
    ['no expires_in', null],
    ['an expires_in within the 30 s margin', 25],
    ['a non-numeric expires_in', 'soon'],
  ])('never stores a token with %s', async (_case, expiresIn) => {
    idp = issuingIdp({ secret: () => secret, expiresIn });
    server.answer(idp);
    const distinct = body({ client_id: `fleet-client-unusable-${String(expiresIn)}` });

    await instance().handle(tokenEvent(distinct));
    const second = await instance().handle(tokenEvent(distinct));

    expect(second.headers?.['x-token-cache']).toBe('miss');
    expect(server.received).toHaveLength(2);
    expect(await table.scan()).not.toContainEqual(expect.objectContaining({ pk: { S: keysOf(distinct).itemKey } }));
  });

  it('never stores a failure: after a 401 the table holds nothing for the request', async () => {
    const wrong = body({ client_id: 'fleet-client-failure', client_secret: 'not-the-secret' });

    const rejected = await instance().handle(tokenEvent(wrong));

    expect(rejected.statusCode).toBe(401);
    expect(await table.scan()).not.toContainEqual(expect.objectContaining({ pk: { S: keysOf(wrong).itemKey } }));
  });
});

describe('TOKEN_CACHE=shared and secrets', () => {
  it("answers a wrong secret with the IdP's 401, and leaves the right secret's entry as it was", async () => {
    // Prepare: the right secret's token in the table
    const right = body({ client_id: 'fleet-client-wrong' });
    await instance().handle(tokenEvent(right));
    const before = await table.scan();

    // Act
    const wrong = await instance().handle(tokenEvent({ ...right, client_secret: 'guessed-secret' }));
    const after = await instance().handle(tokenEvent(right));

    // Assess
    expect(wrong.statusCode).toBe(401);
    expect(bodyOf(wrong)).toEqual({ code: 'unauthorized', description: 'Unauthorized credentials provided' });
    expect(after.headers?.['x-token-cache']).toBe('hit');
    expect(bodyOf(after).access_token).toBe('issued-1');
    expect(server.received).toHaveLength(2);
    expect(await table.scan()).toEqual(before);
  });

  it('gets a fresh token for a rotated secret, which the next instance then shares', async () => {
    const old = body({ client_id: 'fleet-client-rotated' });
    await instance().handle(tokenEvent(old));

    secret = 'rotated-secret-8e2a';
    const rotated = await instance().handle(tokenEvent({ ...old, client_secret: secret }));
    const next = await instance().handle(tokenEvent({ ...old, client_secret: secret }));

    expect(rotated.statusCode).toBe(200);
    expect(bodyOf(rotated).access_token).toBe('issued-2');
    expect(bodyOf(next).access_token).toBe('issued-2');
    expect(next.headers?.['x-token-cache']).toBe('hit');
    expect(server.received).toHaveLength(2);
  });
});

describe('TOKEN_CACHE=shared and a table someone tampered with', () => {
  const SEALED = 'sealed';
  const tamperings: [string, (item: RawItem, other: RawItem) => RawItem][] = [
    ['a flipped bit in the sealed token', (item) => ({ ...item, [SEALED]: { B: flipped(item[SEALED]?.B) } })],
    ['a truncated sealed token', (item) => ({ ...item, [SEALED]: { B: item[SEALED]?.B?.subarray(0, 40) ?? Buffer.alloc(1) } })],
    ['a one-byte sealed token', (item) => ({ ...item, [SEALED]: { B: Buffer.of(1) } })],
    [
      'another format version',
      (item) => ({ ...item, [SEALED]: { B: Buffer.concat([Buffer.of(2), Buffer.from(item[SEALED]?.B ?? []).subarray(1)]) } }),
    ],
    ['a later expiry in the clear', (item) => ({ ...item, expires: { N: String(Number(item.expires?.N) + 86_400) } })],
    [
      "another request's sealed token moved here",
      (item, other) => ({ ...item, [SEALED]: other[SEALED] as AttributeValue, expires: other.expires as AttributeValue }),
    ],
    ['a string where the sealed token belongs', (item) => ({ ...item, [SEALED]: { S: 'eyJhY2Nlc3NfdG9rZW4iOiJmb3JnZWQifQ' } })],
    ['no expiry', ({ expires: _expires, ...item }) => item],
    ['a flipped bit and no revision', ({ rev: _rev, ...item }) => ({ ...item, [SEALED]: { B: flipped(item[SEALED]?.B) } })],
  ];

  it.each(tamperings)('treats %s as a miss: the IdP answers, and its token replaces the item', async (_case, tamper) => {
    // Prepare: a good entry, and another request's, then the first one altered in place
    const distinct = body({ client_id: `fleet-client-tampered-${_case.length}` });
    const other = body({ client_id: `fleet-client-other-${_case.length}` });
    await instance().handle(tokenEvent(distinct));
    await instance().handle(tokenEvent(other));
    const items = await table.scan();
    const item = items.find((candidate) => candidate.pk?.S === keysOf(distinct).itemKey) as RawItem;
    const otherItem = items.find((candidate) => candidate.pk?.S === keysOf(other).itemKey) as RawItem;
    await table.put(tamper(item, otherItem));

    // Act
    const refetched = await instance().handle(tokenEvent(distinct));
    const next = await instance().handle(tokenEvent(distinct));

    // Assess
    expect(refetched.statusCode).toBe(200);
    expect(refetched.headers?.['x-token-cache']).toBe('miss');
    expect(bodyOf(refetched).access_token).toBe('issued-3');
    expect(next.headers?.['x-token-cache']).toBe('hit');
    expect(bodyOf(next).access_token).toBe('issued-3');
  });
});

describe('what the table holds', () => {
  it('holds nothing usable: no token, secret, client id, scope, audience or token URL, in any form', async () => {
    // Prepare: distinctive values, and every kind of outcome
    const dumpSecret = 'dump-secret-9b7e41c2';
    secret = dumpSecret;
    idp = issuingIdp({ secret: () => secret, prefix: 'dump-access-token-3f61' });
    server.answer(idp);
    const dump = body({
      client_id: 'dump-client-c0ffee',
      client_secret: dumpSecret,
      access_token_url: `${server.origin}/dump-token-path`,
      scope: 'dump:scope-7a1',
      audience: 'https://dump-audience.example',
    });
    await instance().handle(tokenEvent(dump));
    await instance().handle(tokenEvent(dump));
    await instance().handle(tokenEvent({ ...dump, client_secret: 'dump-wrong-secret-1d0a' }));
    await instance().handle(tokenEvent({ ...dump, scope: 'dump:scope-8b2' }));

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
      'dump-audience',
      'dump-token-path',
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
    expect(items.map((item) => Object.keys(item).sort().join())).toContain('expires,pk,rev,sealed');
  });
});

describe('TOKEN_CACHE=shared under a burst', () => {
  // What the item held before the burst: each takes the lease under its own condition (absent, the
  // same revision, no revision), which is what leaves one holder.
  const before: [string, (itemKey: string, keys: ReturnType<typeof keysOf>) => RawItem | undefined][] = [
    ['nothing', () => undefined],
    [
      'an entry within its margin of expiry',
      (itemKey, keys) => {
        const expiresAt = Date.now() + 60_000;
        const token = { access_token: 'stale', expires_in: 3600 };
        return {
          pk: { S: itemKey },
          sealed: { B: sealEntry(keys, { token, expiresAt, staleAt: Date.now() - 1000 }) },
          rev: { S: 'before-the-burst' },
          expires: { N: String(expirySeconds(expiresAt)) },
        };
      },
    ],
    ['an ended lease', (itemKey) => ({ pk: { S: itemKey }, lease: { N: String(Date.now() - 1000) }, rev: { S: 'ended' } })],
    ['no revision, only an expiry', (itemKey) => ({ pk: { S: itemKey }, expires: { N: String(expirySeconds(Date.now() + 60_000)) } })],
  ];

  it.each(before)('asks the IdP once when 8 instances miss the same token at the same moment, the item holding %s', async (_case, item) => {
    // Prepare: 8 warm instances (each has answered once, so the SDK has loaded all of itself: in
    // Lambda each instance does that on its own CPU, here all would share one), and an IdP that takes
    // its time, as real ones do
    const fleet = Array.from({ length: 8 }, () => instance());
    for (const [index, member] of fleet.entries()) await member.handle(tokenEvent(body({ client_id: `fleet-client-warm-${index}` })));
    server.received.length = 0;
    idp = issuingIdp({ secret: () => secret, delayMs: 200 });
    server.answer(idp);
    const burst = body({ client_id: `fleet-client-burst-${_case.length}` });
    const keys = keysOf(burst);
    const held = item(keys.itemKey, keys);
    if (held) await table.put(held);

    // Act
    const answers = await Promise.all(fleet.map((member) => member.handle(tokenEvent(burst))));

    // Assess
    expect(server.received).toHaveLength(1);
    expect(answers.map((answer) => answer.statusCode)).toEqual(Array(8).fill(200));
    expect(new Set(answers.map((answer) => bodyOf(answer).access_token))).toEqual(new Set(['issued-1']));
    expect(fleet.map((member) => member.records[1]?.cache).sort()).toEqual(['miss', ...Array(7).fill('shared')]);
  });

  it("holds the lease for the holder's whole deadline and one table call more, so it outlives the holder's write", async () => {
    // Prepare: an IdP slow enough to read the lease while the holder waits for it
    idp = issuingIdp({ secret: () => secret, delayMs: 300 });
    server.answer(idp);
    const slow = body({ client_id: 'fleet-client-lease-length' });
    const started = Date.now();

    // Act
    const answering = instance().handle(tokenEvent(slow));
    await new Promise((resolve) => setTimeout(resolve, 150));
    const held = (await table.scan()).find((row) => row.pk?.S === keysOf(slow).itemKey);
    await answering;

    // Assess: UPSTREAM_TIMEOUT_MS is 10000 here, so the deadline is 10 s away and a call may take 1 s
    const until = Number(held?.lease?.N);
    expect(until - started).toBeGreaterThanOrEqual(10_000 + 1000 - 50);
    expect(until - started).toBeLessThanOrEqual(10_000 + 1000 + 500);
    // DynamoDB's TTL is in epoch seconds: the lease's item is removed once the lease has ended.
    expect(Number(held?.expires?.N)).toBe(Math.ceil(until / 1000));
  });

  it("stores an entry with its DynamoDB TTL in epoch seconds, at the end of the token's lifetime", async () => {
    const stored = body({ client_id: 'fleet-client-ttl' });
    const started = Date.now();

    await instance().handle(tokenEvent(stored));

    // The IdP's token says expires_in 3600.
    const item = (await table.scan()).find((row) => row.pk?.S === keysOf(stored).itemKey);
    const expires = Number(item?.expires?.N);
    expect(expires).toBeGreaterThanOrEqual(Math.floor(started / 1000) + 3600);
    expect(expires).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 3600);
  });

  it('takes over from an instance that took the lease and vanished, once its lease ends', async () => {
    // Prepare: a lease nobody will fulfil, running out in a second
    const orphaned = body({ client_id: 'fleet-client-orphaned' });
    const until = Date.now() + 1000;
    await table.put({
      pk: { S: keysOf(orphaned).itemKey },
      lease: { N: String(until) },
      rev: { S: 'gone' },
      expires: { N: String(expirySeconds(until)) },
    });

    const answer = await instance().handle(tokenEvent(orphaned));

    expect(answer.statusCode).toBe(200);
    expect(bodyOf(answer).access_token).toBe('issued-1');
    expect(server.received).toHaveLength(1);
  });
});

function flipped(value: Uint8Array | undefined): Uint8Array {
  const copy = Buffer.from(value ?? Buffer.alloc(64));
  copy[copy.length - 20] = (copy[copy.length - 20] ?? 0) ^ 1;
  return copy;
}
