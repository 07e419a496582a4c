import type { ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { DYNAMODB } from '../../lambda/aws/endpoints';
import { awsJsonClient } from '../../lambda/aws/json-client';
import { sealState } from '../../lambda/cache/item-state';
import { requestItemKeys } from '../../lambda/cache/sealed-item';
import type { Exchange, Outcome } from '../../lambda/cache/outcome';
import { callLimitFor, SharedTier } from '../../lambda/cache/shared-tier';
import { TokenCache } from '../../lambda/cache/token-cache';
import { DynamoDbTable, dynamoDbTable, FAILED } from '../../lambda/cache/table-calls';
import { epochMs, monoMs, realRuntime } from '../../lambda/cache/time';
import { loadConfig } from '../../lambda/config';
import type { ExchangeError } from '../../lambda/errors';
import { createHandler } from '../../lambda/handler';
import { powertoolsObservability } from '../../lambda/observability';
import { bodyOf, SECRET_REQUEST, tokenEvent } from '../support/events';
import { freshInstance, type Instance, issuingIdp, testClock } from '../support/fleet';
import { startHandlerProcess } from '../../local/handler-process';
import { itemStates, PEPPER_SECRET, type SharedTable, startSharedTable } from '../support/shared-table';
import { type ProxyMode, startTableProxy, type TableProxy } from '../../local/table-proxy';
import { json, type ReceivedRequest, type Script, startTokenServer, type TokenServer } from '../support/token-server';

// The table in trouble: every instance here reaches dynalite through a proxy that can delay, hang,
// cut, or answer DynamoDB errors itself. Whatever the table does, the caller gets the IdP's answer,
// within its deadline; and a holder that stops renewing its claim costs its key under a second.

const SECRET = 'faults-test-secret-20b4';
let server: TokenServer;
let table: SharedTable;
let proxy: TableProxy;
const instances: Instance[] = [];

function instance(env: Record<string, string> = {}): Instance {
  const created = freshInstance(env);
  instances.push(created);
  return created;
}

/**
 * An instance that has answered a request of its own: its pepper is loaded and its SDK connected, as
 * a warm Lambda instance's are, so that a first request's hedge never measures the machine's load.
 */
async function warmInstance(env: Record<string, string> = {}): Promise<Instance> {
  const created = instance(env);
  await created.handle(tokenEvent(body(`faults-warm-${Math.random()}`)));
  created.records.length = 0;
  server.received.length = 0;
  proxy.received.length = 0;
  return created;
}

const body = (clientId: string, overrides: Record<string, unknown> = {}) => ({
  client_id: clientId,
  client_secret: SECRET,
  access_token_url: `${server.origin}/token`,
  ...overrides,
});

/** An IdP that answers `script` `ms` later. */
const after =
  (ms: number, script: Script): Script =>
  (request: ReceivedRequest, response: ServerResponse) => {
    setTimeout(() => void script(request, response), ms);
  };

/** The operations (`GetItem`...) the proxy saw for a request's item, in order. */
function callsFor(requestBody: Record<string, unknown>): { operation: string; body: Record<string, unknown> }[] {
  const { itemKey } = table.keysOf(requestBody);
  return proxy.received
    .filter((call) => call.body.includes(itemKey))
    .map((call) => ({
      operation: call.operation.replace(/^DynamoDB_20120810\./, ''),
      body: JSON.parse(call.body) as Record<string, unknown>,
    }));
}

const states = itemStates(Date.now);
const ownProxies: TableProxy[] = [];

/** An instance whose table calls go through a proxy of its own, so that its writes alone can be made to stop landing. */
async function instanceBehindOwnProxy(env: Record<string, string> = {}): Promise<{ member: Instance; own: TableProxy }> {
  const own = await startTableProxy(table.endpoint);
  ownProxies.push(own);
  const saved = process.env.AWS_ENDPOINT_URL_DYNAMODB;
  process.env.AWS_ENDPOINT_URL_DYNAMODB = own.endpoint;
  try {
    const member = instance(env);
    // The SDK resolves its endpoint on its first calls: one request of its own, before the variable goes back.
    await member.handle(tokenEvent(body(`faults-warm-${ownProxies.length}-${Date.now()}`)));
    server.received.length = 0;
    return { member, own };
  } finally {
    process.env.AWS_ENDPOINT_URL_DYNAMODB = saved;
  }
}

/** The shared tier itself, over the proxy, for tests that drive it (or a TokenCache on it) without the handler. */
function directTier(): SharedTier {
  const pepper = { get: async () => Buffer.alloc(32, 7) };
  return new SharedTier({
    table: dynamoDbTable(table.tableName, 600),
    upstreamTimeoutMs: 3000,
    callLimitMs: 600,
    pepper,
    runtime: realRuntime(),
  });
}

/** One fetch of a new shared tier for `key`, with a deadline of 3 s. */
function directFetch(key: string, exchange: Exchange): Promise<Outcome> {
  const ask = {
    secret: SECRET_REQUEST.clientSecret,
    requestText: key,
    holdKey: key,
    known: undefined,
    rejectedAt: epochMs(0),
    refresh: false,
    remembered: undefined,
    vouched: false,
  };
  return directTier().fetch({
    ...ask,
    noCache: false,
    arrivedAt: epochMs(Date.now()),
    deadline: monoMs(performance.now() + 3000),
    report: {},
    exchange,
  });
}

async function until(condition: () => Promise<boolean>, ms = 5000): Promise<void> {
  for (const started = performance.now(); performance.now() - started < ms; await sleep(10)) if (await condition()) return;
  throw new Error('the condition never held');
}

beforeAll(async () => {
  server = await startTokenServer(issuingIdp({ secret: () => SECRET }));
  table = await startSharedTable('shared-cache-faults');
  proxy = await startTableProxy(table.endpoint);
  Object.assign(process.env, {
    AWS_ENDPOINT_URL_DYNAMODB: proxy.endpoint,
    TOKEN_URL_ALLOWLIST: server.origin,
    // Each table call may take 600 ms, a fifth of the deadline.
    UPSTREAM_TIMEOUT_MS: '3000',
  });
});

beforeEach(() => {
  proxy.set({ kind: 'pass' });
  server.answer(issuingIdp({ secret: () => SECRET }));
  server.received.length = 0;
});

afterEach(async () => {
  for (const created of instances.splice(0)) created.close();
  await Promise.all(ownProxies.splice(0).map((own) => own.close()));
});

afterAll(async () => {
  await proxy.close();
  await table.close();
  await server.close();
});

describe('TOKEN_CACHE=shared when the table fails', () => {
  it.each<[string, ProxyMode, RegExp]>([
    // A call still out after the hedge: the request asks the IdP without it, and the log says why.
    ['answers after 10 s', { kind: 'delay', ms: 10_000 }, /^TableSlow$/],
    ['never answers', { kind: 'hang' }, /^TableSlow$/],
    // Under jest, Node's socket errors come from another realm than the SDK's, which then wraps them
    // in a plain Error without their code; run alone, the log says ECONNRESET.
    ['cuts every connection', { kind: 'reset' }, /^(ECONNRESET|EPIPE|Error)$/],
    // The SDK backs off before its one retry: the hedge may come first.
    ['throttles', { kind: 'error', status: 400, type: 'ThrottlingException' }, /^(ThrottlingException|TableSlow)$/],
    ['denies access', { kind: 'error', status: 400, type: 'AccessDeniedException' }, /^AccessDeniedException$/],
    ['fails inside', { kind: 'error', status: 500, type: 'InternalServerError' }, /^(InternalServerError|TableSlow)$/],
  ])('answers from the IdP when the table %s, and logs the error by name', async (_case, mode, error) => {
    // Prepare
    const member = await warmInstance();
    proxy.set(mode);

    // Act
    const answer = await member.handle(tokenEvent(body(`faults-client-${_case.length}`)));

    // Assess
    expect([answer.statusCode, answer.headers?.['x-token-cache']]).toEqual([200, 'miss']);
    expect(bodyOf(answer).access_token).toMatch(/^issued-/);
    expect(server.received).toHaveLength(1);
    expect(member.records[0]).toMatchObject({
      cache: 'miss',
      outcome: 'ok',
      cache_error: expect.stringMatching(error),
      cache_refresh: undefined,
    });
  });

  it('answers from the IdP when the table does not exist', async () => {
    const member = instance({ TOKEN_CACHE_TABLE: 'no-such-table' });

    const answer = await member.handle(tokenEvent(body('faults-client-missing-table')));

    expect(answer.statusCode).toBe(200);
    expect(member.records[0]?.cache_error).toBe('ResourceNotFoundException');
  });

  it('makes no more table calls in a request once one failed: no write after the IdP answered', async () => {
    const member = instance();
    proxy.set({ kind: 'error', status: 400, type: 'AccessDeniedException' });
    const requestBody = body('faults-client-one-call');

    await member.handle(tokenEvent(requestBody));

    expect(callsFor(requestBody).map((call) => call.operation)).toEqual(['GetItem']);
    expect(server.received).toHaveLength(1);
  });

  it('answers from the IdP when the claim cannot be written after a good read, and settles over the claim it may have left', async () => {
    const member = instance();
    proxy.set({ kind: 'error', status: 400, type: 'AccessDeniedException', only: 'PutItem' });
    const requestBody = body('faults-client-claim-denied');

    const answer = await member.handle(tokenEvent(requestBody));

    expect(answer.statusCode).toBe(200);
    expect(member.records[0]?.cache_error).toBe('AccessDeniedException');
    // An error is no proof the claim did not land: the settle is written over its revision, then twice more.
    expect(callsFor(requestBody).map((call) => call.operation)).toEqual(['GetItem', 'PutItem', 'PutItem', 'PutItem', 'PutItem']);
  });

  it('goes to the IdP when the table fails while it waits for another instance', async () => {
    // Prepare: another instance holds the key with an IdP that takes its time
    server.answer(after(1500, issuingIdp({ secret: () => SECRET })));
    const requestBody = body('faults-client-wait-fails');
    const holding = instance().handle(tokenEvent(requestBody));
    await until(async () => server.received.length === 1);
    const waiter = instance();
    const failLater = setTimeout(() => proxy.set({ kind: 'error', status: 400, type: 'AccessDeniedException' }), 150);

    // Act
    const answer = await waiter.handle(tokenEvent(requestBody));
    clearTimeout(failLater);
    await holding;

    // Assess
    expect(answer.statusCode).toBe(200);
    expect(waiter.records[0]).toMatchObject({ cache: 'miss', cache_error: 'AccessDeniedException' });
    expect(server.received).toHaveLength(2);
  });

  it('answers from the IdP when the hold cannot be read, and settles its claim as usual: one failed call fails alone', async () => {
    const member = await warmInstance();
    const requestBody = body('faults-client-hold-unreadable');
    proxy.set({ kind: 'error', status: 400, type: 'AccessDeniedException', matching: table.holdKeysOf(requestBody).itemKey });

    const answer = await member.handle(tokenEvent(requestBody));

    expect(answer.statusCode).toBe(200);
    expect(member.records[0]).toMatchObject({ cache: 'miss', cache_error: 'AccessDeniedException' });
    expect(callsFor(requestBody).map((call) => call.operation)).toEqual(['GetItem', 'PutItem', 'PutItem']);
  });

  it('answers with the hold it read when its claim cannot be written', async () => {
    const requestBody = body('faults-client-hold-read-claim-failed');
    await table.plant(table.holdKeysOf(requestBody), states.hold(20_000));
    const member = await warmInstance();
    proxy.set({ kind: 'error', status: 400, type: 'AccessDeniedException', only: 'PutItem' });

    const answer = await member.handle(tokenEvent(requestBody));

    // A hold another instance wrote is held 5 s longer, as one from a clock 5 s behind would be
    expect([answer.statusCode, answer.headers?.['retry-after']]).toEqual([503, '25']);
    expect(server.received).toHaveLength(0);
  });

  it('passes the IdP its answer unchanged when the table is slow and the IdP refuses', async () => {
    const member = await warmInstance();
    proxy.set({ kind: 'hang' });

    const answer = await member.handle(tokenEvent(body('faults-client-refused', { client_secret: 'wrong' })));

    expect(answer.statusCode).toBe(401);
    expect(member.records[0]).toMatchObject({ cache: 'miss', outcome: 'unauthorized', cache_error: 'TableSlow' });
  });

  it('lets no kept token stand in for an IdP failure while the table cannot say the key was not rejected', async () => {
    // Prepare: an instance's own 1 h token, stale on its clock; then the table cuts every connection and the IdP fails
    const clock = testClock();
    const member = freshInstance({}, clock.now);
    instances.push(member);
    await member.handle(tokenEvent(body('faults-client-unconfirmed')));
    clock.advance(3_300_000);
    proxy.set({ kind: 'reset' });
    server.answer(json(500, { error: 'server_error' }));

    // Act
    const answer = await member.handle(tokenEvent(body('faults-client-unconfirmed')));

    // Assess: a 401 elsewhere may have ended the token; the control, that the token was kept and is stale, is below
    expect(answer.statusCode).toBe(502);
    proxy.set({ kind: 'pass' });
    expect((await member.handle(tokenEvent(body('faults-client-unconfirmed')))).headers?.['x-token-cache']).toBe('stale');
  });

  it('shares tokens again once the table recovers', async () => {
    const [first, second] = [instance(), instance()];
    proxy.set({ kind: 'reset' });
    await first.handle(tokenEvent(body('faults-client-recovered')));
    proxy.set({ kind: 'pass' });

    await first.handle(tokenEvent(body('faults-client-recovered-2')));
    const shared = await second.handle(tokenEvent(body('faults-client-recovered-2')));

    expect(shared.headers?.['x-token-cache']).toBe('hit');
    expect(second.records[0]?.cache).toBe('shared');
  });
});

describe('TOKEN_CACHE=shared and a no-cache request that shares a fetch', () => {
  it('asks the IdP itself when the fetch it joined was answered by a remembered failure', async () => {
    // Prepare: a remembered 502 in the key's item, and reads of it held 80 ms (within the 120 ms hedge)
    const requestBody = body('faults-client-no-cache-joins');
    const member = await warmInstance();
    await table.plant(
      table.keysOf(requestBody),
      states.failure('elsewhere', { code: 'upstream_error', until: epochMs(Date.now() + 1000) }),
    );
    proxy.set({ kind: 'delay', ms: 80, matching: table.keysOf(requestBody).itemKey });

    // Act: a request starts the fetch; a no-cache one joins it 20 ms later
    const remembered = member.handle(tokenEvent(requestBody));
    await sleep(20);
    const fresh = member.handle({
      ...tokenEvent(requestBody),
      headers: { ...tokenEvent(requestBody).headers, 'cache-control': 'no-cache' },
    });
    const answers = await Promise.all([remembered, fresh]);

    // Assess
    expect(answers.map((answer) => answer.statusCode)).toEqual([502, 200]);
    expect(server.received).toHaveLength(1);
  });
});

describe('TOKEN_CACHE=shared when a holder stops', () => {
  it('lets waiters take over within a second once the holder’s writes stop landing, though the table serves them', async () => {
    // Prepare: a holder whose IdP takes 2 s; once its claim is in the table, its writes hang, while
    // every other instance's calls pass
    server.answer(after(2000, issuingIdp({ secret: () => SECRET })));
    const requestBody = body('faults-client-holder-writes-lost');
    const { member: holder, own } = await instanceBehindOwnProxy();
    const holding = holder.handle(tokenEvent(requestBody));
    await until(async () => server.received.length === 1);
    own.set({ kind: 'hang', only: 'PutItem' });
    server.answer(issuingIdp({ secret: () => SECRET }));

    // Act
    const started = performance.now();
    const waiters = await Promise.all([instance().handle(tokenEvent(requestBody)), instance().handle(tokenEvent(requestBody))]);
    const waited = performance.now() - started;
    const held = await holding;

    // Assess: one waiter took over after the claim went silent, the other shared its exchange
    expect(waiters.map((answer) => answer.statusCode)).toEqual([200, 200]);
    expect(new Set(waiters.map((answer) => bodyOf(answer).access_token)).size).toBe(1);
    expect(waited).toBeLessThan(1300);
    expect(held.statusCode).toBe(200);
    expect(server.received).toHaveLength(2);
  });

  it('never lets a holder that was taken over overwrite what the new holder wrote', async () => {
    // Prepare: a holder whose writes reach the table 0.9 s late (within their 1 s call limit), and
    // an IdP that takes it 2 s
    server.answer(after(2000, issuingIdp({ secret: () => SECRET, prefix: 'slow-holder' })));
    const requestBody = body('faults-client-holder-taken-over');
    const slowTable = { UPSTREAM_TIMEOUT_MS: '10000' };
    const { member: holder, own } = await instanceBehindOwnProxy(slowTable);
    const holding = holder.handle(tokenEvent(requestBody));
    await until(async () => server.received.length === 1);
    own.set({ kind: 'delay', ms: 900 });
    server.answer(issuingIdp({ secret: () => SECRET, prefix: 'new-holder' }));

    // Act: a waiter takes over once the claim goes quiet; the holder's late renewal is then refused
    const waiter = await instance(slowTable).handle(tokenEvent(requestBody));
    const held = await holding;
    await sleep(1000);
    const next = await instance(slowTable).handle(tokenEvent(requestBody));

    // Assess
    expect(bodyOf(waiter).access_token).toMatch(/^new-holder-/);
    expect(bodyOf(held).access_token).toMatch(/^slow-holder-/);
    expect([next.headers?.['x-token-cache'], bodyOf(next).access_token]).toEqual(['hit', bodyOf(waiter).access_token]);
  });

  it('lets waiters take over within a second from a holder killed in the middle of its exchange', async () => {
    // Prepare: the holder in a process of its own, as a Lambda instance is, with an IdP taking 1.5 s
    server.answer(after(1500, issuingIdp({ secret: () => SECRET })));
    const requestBody = body('faults-client-holder-killed');
    const holder = await startHandlerProcess({ ...process.env, AWS_ENDPOINT_URL_DYNAMODB: table.endpoint });
    const members = [await warmInstance(), await warmInstance(), await warmInstance()];
    const holding = holder.invoke(tokenEvent(requestBody)).catch(() => undefined);
    await until(async () => server.received.length === 1, 10_000);
    const waiting = members.map((member) => member.handle(tokenEvent(requestBody)));
    await sleep(60);
    server.answer(issuingIdp({ secret: () => SECRET }));

    // Act
    await holder.kill();
    const killedAt = performance.now();
    const answers = await Promise.all(waiting);
    await holding;

    // Assess: one waiter took over (its IdP request) within a second of the kill, with a little
    // room for timers on a loaded machine; the others shared its exchange
    expect(answers.map((answer) => answer.statusCode)).toEqual([200, 200, 200]);
    expect(new Set(answers.map((answer) => bodyOf(answer).access_token)).size).toBe(1);
    expect(server.received).toHaveLength(2);
    expect((server.received[1]?.at as number) - killedAt).toBeLessThan(1200);
  });

  it("waits for a live holder until its exchange ends, not a call limit sooner, and shares the IdP's timeout", async () => {
    // Prepare: an IdP slower than the 3 s deadline
    server.answer(after(5000, issuingIdp({ secret: () => SECRET })));
    const requestBody = body('faults-client-holder-too-slow');
    const holding = instance().handle(tokenEvent(requestBody));
    await until(async () => server.received.length === 1);
    const waiter = instance();

    // Act
    const started = performance.now();
    const answer = await waiter.handle(tokenEvent(requestBody));
    const waited = performance.now() - started;

    // Assess
    expect([answer.statusCode, bodyOf(answer).code, (await holding).statusCode]).toEqual([504, 'upstream_timeout', 504]);
    expect(server.received).toHaveLength(1);
    // Until the holder's own deadline passed, about 3 s after it started, and not past its own.
    expect(waited).toBeGreaterThan(2700);
    expect(waited).toBeLessThan(3200);
    // Reads 20 to 100 ms apart: a busy loop would make hundreds.
    const reads = callsFor(requestBody).filter((call) => call.operation === 'GetItem');
    expect(reads.length).toBeGreaterThanOrEqual(20);
    expect(reads.length).toBeLessThanOrEqual(120);
  });

  it('asks the IdP once per key in the burst after one that timed out', async () => {
    // Prepare: a burst over 5 keys on 2 instances with a 1 s deadline meets an IdP that never
    // answers in time, and leaves its failures in the table
    const keys = Array.from({ length: 5 }, (_, index) => body(`faults-client-after-timeout-${index}`));
    const timedOut = [instance({ UPSTREAM_TIMEOUT_MS: '1000' }), instance({ UPSTREAM_TIMEOUT_MS: '1000' })];
    server.answer(after(3000, json(200, {})));
    const first = await Promise.all(timedOut.flatMap((member) => keys.map((key) => member.handle(tokenEvent(key)))));
    // Past the second for which those timeouts are remembered.
    await sleep(1200);
    server.received.length = 0;
    server.answer(after(100, issuingIdp({ secret: () => SECRET })));

    // Act: the next burst, on 4 warm instances (each has answered a request of its own), with the
    // longest call limit (1 s): a busy test machine must not pass for a table too slow to use
    const fleet = Array.from({ length: 4 }, () => instance({ UPSTREAM_TIMEOUT_MS: '10000' }));
    for (const [index, member] of fleet.entries()) await member.handle(tokenEvent(body(`faults-client-warm-${index}`)));
    server.received.length = 0;
    const answers = await Promise.all(fleet.flatMap((member) => keys.map((key) => member.handle(tokenEvent(key)))));

    // Assess
    expect(first.every((answer) => answer.statusCode === 504)).toBe(true);
    expect(answers.every((answer) => answer.statusCode === 200)).toBe(true);
    expect(server.received).toHaveLength(5);
  });
});

describe('TOKEN_CACHE=shared and a claim that has run out', () => {
  it('takes over a claim dated in the past at once, without waiting for its renewals', async () => {
    const requestBody = body('faults-client-claim-past');
    await table.plant(table.keysOf(requestBody), states.claim('gone', { agoMs: 60_000 }));
    proxy.received.length = 0;

    const answer = await instance().handle(tokenEvent(requestBody));

    expect(answer.statusCode).toBe(200);
    expect(callsFor(requestBody).map((call) => call.operation)).toEqual(['GetItem', 'PutItem', 'PutItem']);
  });
});

describe('TOKEN_CACHE=shared and a bug in the exchange', () => {
  it('stops renewing its claim, so that waiters take over as from a holder that died', async () => {
    // Prepare: the shared tier itself, over the proxy, its exchange throwing what no IdP failure is
    proxy.received.length = 0;

    // Act: the bug comes 100 ms into the exchange; then as long as three renewals would take
    const failing = directFetch('faults-bug', () => sleep(100).then(() => Promise.reject(new TypeError('a bug'))));
    await expect(failing).rejects.toThrow(TypeError);
    await sleep(800);

    // Assess: the claim was written once and never renewed
    const { itemKey } = requestItemKeys(Buffer.alloc(32, 7), SECRET_REQUEST.clientSecret, 'faults-bug');
    const writes = proxy.received.filter((call) => call.operation.endsWith('.PutItem') && call.body.includes(itemKey));
    expect(writes).toHaveLength(1);
  });
});

describe('TOKEN_CACHE=shared: a claim renewed as its exchange ends', () => {
  it('is settled once the renewal in flight has landed, and renewed no more', async () => {
    // Prepare: every write over the holder's own revision (renewals, the settle) takes 300 ms, so the
    // first renewal (250 ms after the claim landed) is still in flight when the 400 ms exchange ends
    proxy.received.length = 0;
    proxy.set({ kind: 'delay', ms: 300, matching: '#rev IN (:rev0)' });

    // Act: then as long as another renewal would take to be sent
    const exchange = () => sleep(400).then(() => ({ access_token: 'renewed-once', expires_in: 3600 }));
    const outcome = await directFetch('faults-renewal-in-flight', exchange);
    await sleep(600);
    proxy.set({ kind: 'pass' });

    // Assess: the claim, its one renewal, the outcome; nothing after it
    expect(outcome).toMatchObject({ kind: 'token', from: 'idp' });
    expect(proxy.received.filter((call) => call.operation.endsWith('.PutItem'))).toHaveLength(3);
  });
});

describe('TOKEN_CACHE=shared: requests that shared a wait the deadline ended', () => {
  it('ends each at its own deadline: one whose deadline has passed joins no exchange started after it', async () => {
    // Prepare: on one instance, a holder's claim on the key, its IdP answering in 1.5 s; on another, three requests
    // share one wait: the first with 400 ms, then one with 3 s, then one whose deadline came before the first's
    const [holder, waiter] = [new TokenCache(directTier(), realRuntime(), 3000), new TokenCache(directTier(), realRuntime(), 3000)];
    const ask = (deadline: number, token: string) => ({
      request: { ...SECRET_REQUEST, clientId: 'faults-client-deadline-retry' },
      tokenUrl: 'https://idp.example/t',
      noCache: false,
      arrivedAt: epochMs(Date.now()),
      deadline: monoMs(deadline),
      exchange: async () => ({ access_token: token, expires_in: 3600 }),
      report: {},
    });
    const slowly = () => sleep(1500).then(() => ({ access_token: 'holder', expires_in: 3600 }));
    const held = holder.resolve({ ...ask(performance.now() + 3000, 'holder'), exchange: slowly });
    await sleep(200);

    // Act
    const firstDeadline = performance.now() + 400;
    const first = waiter.resolve(ask(firstDeadline, 'first'));
    const patient = waiter.resolve(ask(performance.now() + 3000, 'patient'));
    const late = waiter.resolve(ask(firstDeadline - 50, 'late'));
    const settled = await Promise.allSettled([first, patient, late, held]);

    // Assess: the wait ended as 504s at the first deadline; the patient request waited again, for the holder's token
    const answers = settled.map((result) =>
      result.status === 'fulfilled' ? result.value.token.access_token : (result.reason as ExchangeError).statusCode,
    );
    expect(answers).toEqual([504, 'holder', 504, 'holder']);
  });
});

describe('TOKEN_CACHE=shared: a refresh ahead whose writes fail', () => {
  it('keeps the asker on its new token, and lets the others refresh from the middle of the window', async () => {
    // Prepare: the asker and another instance (each warm: pepper loaded) hold a 1 h token, on one clock
    // moved into its refresh window
    const clock = testClock();
    const [asker, other] = [freshInstance({}, clock.now), freshInstance({}, clock.now)];
    instances.push(asker, other);
    for (const member of [asker, other]) await member.handle(tokenEvent(body(`faults-warm-${Math.random()}`)));
    for (const member of [asker, other]) member.records.length = 0;
    server.answer(issuingIdp({ secret: () => SECRET }));
    server.received.length = 0;
    const requestBody = body('faults-client-refresh-unwritten');
    await asker.handle(tokenEvent(requestBody));
    await other.handle(tokenEvent(requestBody));
    // The asker's refresh window opens at 3210 s; the other's copy, judged 5 s older, opens to it at 3220 s
    clock.advance(3_212_000);
    proxy.set({ kind: 'error', status: 500, type: 'InternalServerError', only: 'PutItem' });

    // Act: the asker refreshes but cannot write; the other waits for the middle of the window
    const refreshed = await asker.handle(tokenEvent(requestBody));
    const early = await other.handle(tokenEvent(requestBody));
    clock.advance(10_000);
    const due = await other.handle(tokenEvent(requestBody));
    proxy.set({ kind: 'pass' });
    const kept = await asker.handle(tokenEvent(requestBody));

    // Assess
    expect([refreshed, early, due, kept].map((answer) => [answer.headers?.['x-token-cache'], bodyOf(answer).access_token])).toEqual([
      ['miss', 'issued-2'],
      ['hit', 'issued-1'],
      ['miss', 'issued-3'],
      ['hit', 'issued-2'],
    ]);
    expect(asker.records[1]).toMatchObject({
      cache_refresh: 'ahead',
      cache_error: expect.stringMatching(/^(InternalServerError|TimeoutError)$/),
    });
    expect(other.records[1]?.cache_table_latency_ms).toBeUndefined();
    expect(other.records[2]).toMatchObject({ cache_refresh: 'ahead' });
    expect(server.received).toHaveLength(3);
  });
});

describe('TOKEN_CACHE=shared: what each table call is allowed', () => {
  it.each([
    [1, 1],
    [1000, 200],
    [3000, 600],
    [5000, 1000],
    [10_000, 1000],
  ])('allows each call a fifth of UPSTREAM_TIMEOUT_MS (%p ms), at most 1 s: %p ms', (timeout, limit) => {
    expect(callLimitFor(timeout)).toBe(limit);
  });

  it('reads the table as a new instance starts, for a key no request has, so its first request finds the SDK loaded', async () => {
    const seenBefore = proxy.received.length;

    instance();

    const isWarmUp = (call: { operation: string; body: string }) =>
      call.operation.endsWith('.GetItem') && (JSON.parse(call.body) as { Key?: { pk?: { S?: string } } }).Key?.pk?.S === 'warm-up';
    await until(async () => proxy.received.slice(seenBefore).some(isWarmUp));
  });

  it('reads strongly consistent, so what another instance has just written is seen at once', async () => {
    // dynalite is always consistent: what DynamoDB would do is pinned on the wire.
    const requestBody = body('faults-client-consistent');

    await instance().handle(tokenEvent(requestBody));

    const reads = callsFor(requestBody).filter((call) => call.operation === 'GetItem');
    expect(reads).toHaveLength(1);
    expect(reads[0]?.body.ConsistentRead).toBe(true);
  });

  it('claims with a conditional write that returns the item it lost to, and settles with another', async () => {
    const requestBody = body('faults-client-writes');

    await instance().handle(tokenEvent(requestBody));

    const writes = callsFor(requestBody).filter((call) => call.operation === 'PutItem');
    expect(writes.map((call) => [call.body.ConditionExpression, call.body.ReturnValuesOnConditionCheckFailure])).toEqual([
      // Over an item with no string revision (absent, or not ours), then over its own claim's revision
      ['NOT attribute_type(#rev, :string)', 'ALL_OLD'],
      ['#rev IN (:rev0)', 'ALL_OLD'],
    ]);
  });

  it('retries a failed call once, no more', async () => {
    // A 10 s deadline gives each call 1 s: room for more than one retry, were the SDK allowed them.
    const member = instance({ UPSTREAM_TIMEOUT_MS: '10000' });
    proxy.set({ kind: 'error', status: 500, type: 'InternalServerError', only: 'GetItem' });
    const requestBody = body('faults-client-one-retry');

    const answer = await member.handle(tokenEvent(requestBody));

    expect(answer.statusCode).toBe(200);
    expect(member.records[0]?.cache_error).toBe('InternalServerError');
    expect(callsFor(requestBody).map((call) => call.operation)).toEqual(['GetItem', 'GetItem']);
  });

  it('asks the IdP after the hedge when its claim write does not answer, not at the call limit', async () => {
    const member = await warmInstance();
    proxy.set({ kind: 'hang', only: 'PutItem' });
    const requestBody = body('faults-client-claim-hangs');

    const started = performance.now();
    const answer = await member.handle(tokenEvent(requestBody));

    // A 3 s deadline: a hedge of 120 ms, a call limit of 600 ms
    expect(answer.statusCode).toBe(200);
    expect(member.records[0]).toMatchObject({ cache: 'miss', cache_error: 'TableSlow' });
    expect(callsFor(requestBody).map((call) => call.operation)).toEqual(['GetItem', 'PutItem']);
    expect(performance.now() - started).toBeGreaterThanOrEqual(120);
    expect(performance.now() - started).toBeLessThan(600);
  });

  it('settles over a claim whose answer was lost, so the next request finds the token rather than a silent claim', async () => {
    // Prepare: every write lands, and no answer to one comes back
    const other = await warmInstance();
    const member = await warmInstance();
    proxy.set({ kind: 'lose-answer', only: 'PutItem' });
    const requestBody = body('faults-client-claim-answer-lost');
    const first = await member.handle(tokenEvent(requestBody));
    // The settle goes out with the answer, over the claim or the nothing it claimed; its answer is lost too, so it is written again
    await until(async () => callsFor(requestBody).filter((call) => call.operation === 'PutItem').length >= 3);
    proxy.set({ kind: 'pass' });

    // Act
    const next = await other.handle(tokenEvent(requestBody));

    // Assess: the settle landed over the claim's revision; no wait on a claim nobody renews, no second exchange
    expect(first.statusCode).toBe(200);
    expect(next.statusCode).toBe(200);
    expect(bodyOf(next).access_token).toBe(bodyOf(first).access_token);
    expect(server.received).toHaveLength(1);
    expect(other.records[0]).toMatchObject({ cache: 'shared' });
    const settles = callsFor(requestBody)
      .filter((call) => call.operation === 'PutItem')
      .slice(1, 3);
    expect(settles.map((call) => call.body.ConditionExpression)).toEqual([
      'NOT attribute_type(#rev, :string) OR #rev IN (:rev0)',
      'NOT attribute_type(#rev, :string) OR #rev IN (:rev0, :rev1)',
    ]);
  });

  it('logs the time spent in table calls, to a tenth of a millisecond, within the time the request took', async () => {
    const member = await warmInstance();
    // Each call held 30 ms (well within the 120 ms hedge): a read, then at least the claim's write, one after the other.
    proxy.set({ kind: 'delay', ms: 30 });
    const started = performance.now();

    await member.handle(tokenEvent(body('faults-client-latency')));

    const took = performance.now() - started;
    const latency = member.records[0]?.cache_table_latency_ms as number;
    expect(latency).toBeGreaterThanOrEqual(60);
    expect(latency).toBeLessThanOrEqual(took);
    expect(Number(latency.toFixed(1))).toBe(latency);
  });
});

describe('the table calls against DynamoDB and dynalite', () => {
  it.each([
    ['DynamoDB (through the proxy, which returns the refusing item as DynamoDB does)', () => proxy.endpoint, true],
    ['dynalite, which returns no item: the caller reads again', () => table.endpoint, false],
  ])('reports a refused conditional write from %s', async (_case, endpoint, withItem) => {
    // Prepare: an item at some revision
    const keys = table.keysOf(body(`faults-client-refused-write-${withItem}`));
    await table.plant(keys, states.claim('h'), 'current');
    const dynamo = awsJsonClient(DYNAMODB, { ...process.env, AWS_ENDPOINT_URL_DYNAMODB: endpoint() }, Date.now);
    const calls = new DynamoDbTable(dynamo, table.tableName, 1000).calls({});

    // Act
    const hold = sealState(keys, { kind: 'hold', hold: { code: 'upstream_throttled', until: epochMs(1) } });
    const written = await calls.put(keys.itemKey, hold, { revs: ['stale'], unversioned: false }, 'next');

    // Assess
    expect(written).toEqual({ lost: withItem ? expect.objectContaining({ rev: 'current' }) : undefined });
  });

  it('gives a call up at its call limit, and names it', async () => {
    const dynamo = awsJsonClient(DYNAMODB, { ...process.env, AWS_ENDPOINT_URL_DYNAMODB: proxy.endpoint }, Date.now);
    const report = {};
    const calls = new DynamoDbTable(dynamo, table.tableName, 100).calls(report);
    proxy.set({ kind: 'hang' });

    const started = performance.now();
    const read = await calls.get('any-item');
    const took = performance.now() - started;

    expect(read).toBe(FAILED);
    expect(took).toBeLessThan(1000);
    expect(report).toEqual({ tableError: 'TimeoutError', tableLatencyMs: expect.any(Number) });
  });

  it('fails each call alone: a call after a failed one is made, and answers', async () => {
    const dynamo = awsJsonClient(DYNAMODB, { ...process.env, AWS_ENDPOINT_URL_DYNAMODB: proxy.endpoint }, Date.now);
    const report = {};
    const calls = new DynamoDbTable(dynamo, table.tableName, 1000).calls(report);
    proxy.set({ kind: 'error', status: 400, type: 'AccessDeniedException' });

    const first = await calls.get('any-item');
    proxy.set({ kind: 'pass' });
    const second = await calls.get('any-item');

    expect([first, second]).toEqual([FAILED, undefined]);
    expect(report).toMatchObject({ tableError: 'AccessDeniedException' });
  });
});

describe('TOKEN_CACHE=shared: a waiter whose table stops answering', () => {
  it('gets its token from the IdP within its deadline, and remembers nothing of the wait', async () => {
    // Prepare: a claim another holder keeps renewing, a 1 s deadline, and a table that hangs 850 ms in
    const requestBody = body('faults-client-cut-read');
    const keys = table.keysOf(requestBody);
    let beat = 0;
    const renewClaim = () => table.plant(keys, states.claim('elsewhere', { beat: beat++, leftMs: 1400 }));
    await renewClaim();
    const renewing = setInterval(() => void renewClaim(), 150);
    const member = instance({ UPSTREAM_TIMEOUT_MS: '1000' });
    const hanging = setTimeout(() => proxy.set({ kind: 'hang' }), 850);

    try {
      // Act
      const started = performance.now();
      const answer = await member.handle(tokenEvent(requestBody));

      // Assess
      expect(answer.statusCode).toBe(200);
      expect(performance.now() - started).toBeLessThan(1000);
      expect(server.received).toHaveLength(1);
    } finally {
      clearInterval(renewing);
      clearTimeout(hanging);
    }
  });
});

describe('TOKEN_CACHE=shared and its pepper', () => {
  /** Run `act` with the function's Secrets Manager endpoint pointed elsewhere while its instances start. */
  async function withSecretsAt<T>(endpoint: string, act: () => Promise<T>): Promise<T> {
    const saved = process.env.AWS_ENDPOINT_URL_SECRETS_MANAGER;
    process.env.AWS_ENDPOINT_URL_SECRETS_MANAGER = endpoint;
    try {
      return await act();
    } finally {
      process.env.AWS_ENDPOINT_URL_SECRETS_MANAGER = saved;
    }
  }

  it('reads the pepper as an instance starts, and never on a request', async () => {
    const secrets = await startTableProxy(table.secrets.endpoint);
    try {
      await withSecretsAt(secrets.endpoint, async () => {
        // Loading the handler module builds the deployed handler too: each has its cache, and reads once.
        const member = instance();
        await until(async () => secrets.received.length === 2);
        await member.handle(tokenEvent(body('faults-client-pepper-once')));
        await member.handle(tokenEvent(body('faults-client-pepper-once-2')));
        expect(member.records.map((record) => record.cache_error)).toEqual([undefined, undefined]);
      });
      expect(secrets.received.map((call) => call.operation)).toEqual(Array(2).fill('secretsmanager.GetSecretValue'));
    } finally {
      await secrets.close();
    }
  });

  it('goes without the table while the pepper secret does not exist: the IdP answers, and nothing is written', async () => {
    const member = instance({ TOKEN_CACHE_PEPPER_SECRET: 'no-such-secret' });
    const requestBody = body('faults-client-no-pepper');

    const answers = [await member.handle(tokenEvent(requestBody)), await member.handle(tokenEvent(body('faults-client-no-pepper-2')))];

    expect(answers.map((answer) => answer.statusCode)).toEqual([200, 200]);
    // The second, within a second of the failed load, does not try again: it says why it went without.
    expect(member.records.map((record) => [record.cache, record.cache_error])).toEqual([
      ['miss', 'ResourceNotFoundException'],
      ['miss', 'ResourceNotFoundException'],
    ]);
    expect(callsFor(requestBody)).toEqual([]);
  });

  it.each([
    [31, 'PepperTooShort'],
    [32, undefined],
  ])('takes a pepper of %p characters with the table error %p', async (length, error) => {
    table.secrets.set(`pepper-of-${length}`, 'x'.repeat(length));

    const member = instance({ TOKEN_CACHE_PEPPER_SECRET: `pepper-of-${length}` });
    await member.handle(tokenEvent(body(`faults-client-pepper-of-${length}`)));

    expect(member.records[0]?.cache_error).toBe(error);
  });

  it('gives a failing Secrets Manager two attempts a load', async () => {
    const secrets = await startTableProxy(table.secrets.endpoint);
    secrets.set({ kind: 'error', status: 500, type: 'InternalServiceError' });
    try {
      await withSecretsAt(secrets.endpoint, async () => {
        // Loading the handler module builds the deployed handler too: two instances, a load each
        instance();
        await sleep(1500);
      });
      expect(secrets.received).toHaveLength(4);
    } finally {
      await secrets.close();
    }
  });

  it('waits for a slow pepper no longer than a call limit, and loads it again once the slow load has been given up', async () => {
    // Prepare: Secrets Manager behind a proxy that does not answer yet, and a clock to move
    const secrets = await startTableProxy(table.secrets.endpoint);
    secrets.set({ kind: 'hang' });
    const clock = testClock();
    try {
      await withSecretsAt(secrets.endpoint, async () => {
        const member = freshInstance({}, clock.now);
        instances.push(member);

        // Act
        const started = performance.now();
        const first = await member.handle(tokenEvent(body('faults-client-slow-pepper')));
        const waited = performance.now() - started;
        // The function's two handlers loading, and nothing more: a request waits for the load under way
        const loadsMeanwhile = secrets.received.length;
        secrets.set({ kind: 'pass' });
        // The load gives up 2 s after it started; a request a second after that loads it again.
        await sleep(2100 - waited);
        clock.advance(1000);
        await member.handle(tokenEvent(body('faults-client-slow-pepper-2')));

        // Assess
        expect(first.statusCode).toBe(200);
        expect(loadsMeanwhile).toBe(2);
        expect(member.records[0]?.cache_error).toBe('PepperTimeout');
        expect(waited).toBeLessThan(1500);
        expect(member.records[1]?.cache_error).toBeUndefined();
      });
    } finally {
      await secrets.close();
    }
  });

  it('tries a pepper that failed to load again at most once a second', async () => {
    // Prepare: Secrets Manager behind a proxy that refuses, and a clock to move
    const secrets = await startTableProxy(table.secrets.endpoint);
    secrets.set({ kind: 'error', status: 400, type: 'AccessDeniedException' });
    const clock = testClock();
    try {
      await withSecretsAt(secrets.endpoint, async () => {
        const member = freshInstance({}, clock.now);
        instances.push(member);

        // Act: the load at start fails; a request 999 ms later, then one a second later
        await member.handle(tokenEvent(body('faults-client-denied-pepper-1')));
        const loads = [secrets.received.length];
        clock.advance(999);
        await member.handle(tokenEvent(body('faults-client-denied-pepper-2')));
        loads.push(secrets.received.length);
        clock.advance(1);
        await member.handle(tokenEvent(body('faults-client-denied-pepper-3')));
        loads.push(secrets.received.length);

        // Assess: no call within the second (the SDK may retry a refused call once, so calls, not loads)
        expect(loads[0]).toBeGreaterThan(0);
        expect(loads[1]).toBe(loads[0]);
        expect(loads[2]).toBeGreaterThan(loads[1] as number);
        expect(member.records.map((record) => [record.status, record.cache_error])).toEqual([
          [200, 'AccessDeniedException'],
          [200, 'AccessDeniedException'],
          [200, 'AccessDeniedException'],
        ]);
      });
    } finally {
      await secrets.close();
    }
  });

  it('is the one the stand-in holds, so the tests derive the same keys', () => {
    expect(process.env.TOKEN_CACHE_PEPPER_SECRET).toBe(PEPPER_SECRET);
  });
});

describe('the log line and metrics of the shared tier', () => {
  /** Everything the handler writes to stdout while `act` runs, as JSON lines. */
  async function emitted(act: () => Promise<unknown>): Promise<Record<string, unknown>[]> {
    const lines: string[] = [];
    const stdout = jest.spyOn(process.stdout, 'write').mockImplementation((chunk: unknown) => {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      return true;
    });
    try {
      await act();
    } finally {
      stdout.mockRestore();
    }
    return lines.map((line) => JSON.parse(line) as Record<string, unknown>);
  }

  it('logs the tier and the table latency, and counts answers by tier and table errors apart', async () => {
    // Prepare: two instances with the deployed observability
    const config = loadConfig(process.env);
    const [first, second] = [
      createHandler(config, powertoolsObservability('INFO')),
      createHandler(config, powertoolsObservability('INFO')),
    ];
    const shared = body('faults-client-metrics');

    // Act: a miss with a table error, a miss, a shared hit, a memory hit
    const lines = await emitted(async () => {
      proxy.set({ kind: 'error', status: 400, type: 'AccessDeniedException' });
      await first(tokenEvent(body('faults-client-metrics-denied')));
      proxy.set({ kind: 'pass' });
      await first(tokenEvent(shared));
      await second(tokenEvent(shared));
      await second(tokenEvent(shared));
    });

    // Assess
    const logs = lines.filter((line) => line.message === 'token request');
    expect(logs.map((line) => [line.cache, line.cache_error, typeof line.cache_table_latency_ms])).toEqual([
      ['miss', 'AccessDeniedException', 'number'],
      ['miss', undefined, 'number'],
      ['shared', undefined, 'number'],
      ['memory', undefined, 'undefined'],
    ]);
    const tierMetrics = lines.filter((line) => 'tier' in line && '_aws' in line);
    expect(tierMetrics.map((line) => [line.tier, line.CacheHits, line.CacheMisses])).toEqual([
      ['miss', undefined, 1],
      ['miss', undefined, 1],
      ['shared', 1, undefined],
      ['memory', 1, undefined],
    ]);
    expect(tierMetrics[0]).toMatchObject({ service: 'token-exchange', CacheTableLatency: expect.any(Number) });
    const errors = lines.filter((line) => 'CacheErrors' in line);
    expect(errors).toEqual([expect.objectContaining({ service: 'token-exchange', CacheErrors: 1 })]);
    expect(errors[0]).not.toHaveProperty('tier');
  });
});
