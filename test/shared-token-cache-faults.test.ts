import { setTimeout as sleep } from 'node:timers/promises';
import { tableErrorName } from '../lambda/shared-token-cache';
import { entryKeys } from '../lambda/sealed-token';
import { type SecretRequest, tokenShapingFields } from '../lambda/token-cache';
import { parseTokenRequest } from '../lambda/token-request';
import { loadConfig } from '../lambda/config';
import { createHandler } from '../lambda/handler';
import { powertoolsObservability } from '../lambda/observability';
import { bodyOf, tokenEvent } from './support/events';
import { freshInstance, type Instance, issuingIdp } from './support/fleet';
import { type SharedTable, startSharedTable } from './support/shared-table';
import { type ProxyMode, startTableProxy, type TableProxy } from './support/table-proxy';
import { startTokenServer, type TokenServer } from './support/token-server';

// The table in trouble: every instance here reaches dynalite through a proxy that can delay, hang,
// cut, or answer DynamoDB errors itself. Whatever the table does, the caller gets the IdP's answer.

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

function itemKeyOf(requestBody: Record<string, unknown>): string {
  const request = parseTokenRequest(tokenEvent(requestBody)) as SecretRequest;
  return entryKeys(request.clientSecret, tokenShapingFields(request, new URL(request.accessTokenUrl).href)).itemKey;
}

/** A lease on the request's item, as an instance that is fetching its token holds one. */
async function leaseHeldElsewhere(requestBody: Record<string, unknown>, forMs: number): Promise<void> {
  const until = Date.now() + forMs;
  await table.put({
    pk: { S: itemKeyOf(requestBody) },
    lease: { N: String(until) },
    rev: { S: 'elsewhere' },
    expires: { N: String(Math.ceil(until / 1000)) },
  });
}

const body = (clientId: string) => ({ client_id: clientId, client_secret: SECRET, access_token_url: `${server.origin}/token` });

beforeAll(async () => {
  server = await startTokenServer(issuingIdp({ secret: () => SECRET }));
  table = await startSharedTable('shared-cache-faults');
  proxy = await startTableProxy(table.endpoint);
  Object.assign(process.env, {
    AWS_ENDPOINT_URL_DYNAMODB: proxy.endpoint,
    TOKEN_CACHE: 'shared',
    TOKEN_CACHE_TABLE: table.tableName,
    TOKEN_URL_ALLOWLIST: server.origin,
    // Each table call may take 300 ms, a tenth of the deadline.
    UPSTREAM_TIMEOUT_MS: '3000',
  });
});

beforeEach(() => {
  proxy.set({ kind: 'pass' });
  server.received.length = 0;
});

afterEach(() => {
  for (const created of instances.splice(0)) created.close();
});

afterAll(async () => {
  await proxy.close();
  await table.close();
  await server.close();
});

describe('TOKEN_CACHE=shared when the table fails', () => {
  it.each<[string, ProxyMode, RegExp]>([
    ['answers after 10 s', { kind: 'delay', ms: 10_000 }, /^TimeoutError$/],
    ['never answers', { kind: 'hang' }, /^TimeoutError$/],
    // Under jest, Node's socket errors come from another realm than the SDK's, which then wraps them
    // in a plain Error without their code; run alone, the log says ECONNRESET.
    ['cuts every connection', { kind: 'reset' }, /^(ECONNRESET|EPIPE|Error)$/],
    ['throttles', { kind: 'error', status: 400, type: 'ThrottlingException' }, /^(ThrottlingException|TimeoutError)$/],
    ['denies access', { kind: 'error', status: 400, type: 'AccessDeniedException' }, /^AccessDeniedException$/],
    ['fails inside', { kind: 'error', status: 500, type: 'InternalServerError' }, /^(InternalServerError|TimeoutError)$/],
  ])('answers from the IdP when the table %s, and logs the error by name', async (_case, mode, error) => {
    // Prepare
    const member = instance();
    proxy.set(mode);

    // Act
    const answer = await member.handle(tokenEvent(body(`faults-client-${_case.length}`)));

    // Assess
    expect(answer.statusCode).toBe(200);
    expect(answer.headers?.['x-token-cache']).toBe('miss');
    expect(bodyOf(answer).access_token).toMatch(/^issued-/);
    expect(server.received).toHaveLength(1);
    expect(member.records[0]).toMatchObject({ cache: 'miss', outcome: 'ok', cache_error: expect.stringMatching(error) });
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

    const calls = proxy.received.filter((call) => call.body.includes(itemKeyOf(requestBody)));
    expect(calls.map((call) => call.operation)).toEqual(['DynamoDB_20120810.GetItem']);
    expect(server.received).toHaveLength(1);
  });

  it('answers from the IdP when the lease cannot be written after a good read, and writes nothing more', async () => {
    const member = instance();
    proxy.set({ kind: 'error', status: 400, type: 'AccessDeniedException', only: 'PutItem' });
    const requestBody = body('faults-client-lease-denied');

    const answer = await member.handle(tokenEvent(requestBody));

    expect(answer.statusCode).toBe(200);
    expect(member.records[0]?.cache_error).toBe('AccessDeniedException');
    const calls = proxy.received.filter((call) => call.body.includes(itemKeyOf(requestBody)));
    expect(calls.map((call) => call.operation)).toEqual(['DynamoDB_20120810.GetItem', 'DynamoDB_20120810.PutItem']);
  });

  it('goes to the IdP when the table fails while it waits for another instance', async () => {
    // Prepare: another instance's lease, for longer than this test takes
    const requestBody = body('faults-client-wait-fails');
    await leaseHeldElsewhere(requestBody, 5000);
    const member = instance();
    const failLater = setTimeout(() => proxy.set({ kind: 'error', status: 400, type: 'AccessDeniedException' }), 150);

    // Act
    const answer = await member.handle(tokenEvent(requestBody));
    clearTimeout(failLater);

    // Assess
    expect(answer.statusCode).toBe(200);
    expect(member.records[0]).toMatchObject({ cache: 'miss', cache_error: 'AccessDeniedException' });
    expect(server.received).toHaveLength(1);
  });

  it('waits for another instance no longer than the deadline: a 504, as from an IdP that slow', async () => {
    const requestBody = body('faults-client-wait-deadline');
    await leaseHeldElsewhere(requestBody, 60_000);
    // Long enough that each read's own limit (a tenth of it) holds on a loaded machine.
    const member = instance({ UPSTREAM_TIMEOUT_MS: '1500' });

    const answer = await member.handle(tokenEvent(requestBody));

    expect(answer.statusCode).toBe(504);
    expect(bodyOf(answer).code).toBe('upstream_timeout');
    expect(server.received).toHaveLength(0);
    // Reads 25 ms apart, doubling up to 200 ms, over 1.5 s: about ten. A busy loop would make hundreds.
    const reads = callsFor(requestBody).filter((call) => call.operation === 'GetItem');
    expect(reads.length).toBeGreaterThanOrEqual(4);
    expect(reads.length).toBeLessThanOrEqual(16);
  });

  it('passes the IdP its answer unchanged when the table is slow and the IdP refuses', async () => {
    const member = instance();
    proxy.set({ kind: 'hang' });

    const answer = await member.handle(tokenEvent({ ...body('faults-client-refused'), client_secret: 'wrong' }));

    expect(answer.statusCode).toBe(401);
    expect(member.records[0]).toMatchObject({ cache: 'miss', outcome: 'unauthorized', cache_error: 'TimeoutError' });
  });

  it('shares tokens again once the table recovers', async () => {
    const first = instance();
    const second = instance();
    proxy.set({ kind: 'reset' });
    await first.handle(tokenEvent(body('faults-client-recovered')));
    proxy.set({ kind: 'pass' });

    await first.handle(tokenEvent(body('faults-client-recovered-2')));
    const shared = await second.handle(tokenEvent(body('faults-client-recovered-2')));

    expect(shared.headers?.['x-token-cache']).toBe('hit');
    expect(second.records[0]?.cache).toBe('shared');
  });
});

/** The operations (`GetItem`...) the proxy saw for a request's item, in order. */
function callsFor(requestBody: Record<string, unknown>): { operation: string; body: Record<string, unknown> }[] {
  const itemKey = itemKeyOf(requestBody);
  return proxy.received
    .filter((call) => call.body.includes(itemKey))
    .map((call) => ({
      operation: call.operation.replace(/^DynamoDB_20120810\./, ''),
      body: JSON.parse(call.body) as Record<string, unknown>,
    }));
}

describe('TOKEN_CACHE=shared: what each table call is allowed', () => {
  it('reads the table as a new instance starts, for a key no request has, so its first request finds the SDK loaded', async () => {
    const seenBefore = proxy.received.length;

    instance();

    const isWarmUp = (call: { operation: string; body: string }) =>
      call.operation.endsWith('.GetItem') && (JSON.parse(call.body) as { Key?: { pk?: { S?: string } } }).Key?.pk?.S === 'warm-up';
    for (let waited = 0; waited < 5000 && !proxy.received.slice(seenBefore).some(isWarmUp); waited += 20) await sleep(20);
    // (An earlier test's instance may still be retrying its own warm-up: only this one's is counted on.)
    expect(proxy.received.slice(seenBefore).some(isWarmUp)).toBe(true);
  });

  it('reads strongly consistent, so an entry another instance has just written is seen at once', async () => {
    // dynalite is always consistent: what DynamoDB would do is pinned on the wire.
    const requestBody = body('faults-client-consistent');

    await instance().handle(tokenEvent(requestBody));

    const reads = callsFor(requestBody).filter((call) => call.operation === 'GetItem');
    expect(reads).toHaveLength(1);
    expect(reads[0]?.body.ConsistentRead).toBe(true);
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

  it('gives up on a lease write that never ends at its call limit, and answers from the IdP', async () => {
    const member = instance();
    proxy.set({ kind: 'hang', only: 'PutItem' });
    const requestBody = body('faults-client-lease-hangs');

    const answer = await member.handle(tokenEvent(requestBody));

    expect(answer.statusCode).toBe(200);
    expect(member.records[0]).toMatchObject({ cache: 'miss', cache_error: 'TimeoutError' });
    expect(callsFor(requestBody).map((call) => call.operation)).toEqual(['GetItem', 'PutItem']);
  });

  it('gives up on an entry write that never ends at its call limit, once a lease held elsewhere has ended', async () => {
    const requestBody = body('faults-client-entry-hangs');
    await leaseHeldElsewhere(requestBody, 200);
    const member = instance();
    proxy.set({ kind: 'hang', only: 'PutItem' });

    const answer = await member.handle(tokenEvent(requestBody));

    expect(answer.statusCode).toBe(200);
    expect(member.records[0]).toMatchObject({ cache: 'miss', cache_error: 'TimeoutError' });
    // The waiter takes no lease of its own: its only write is the entry.
    expect(
      callsFor(requestBody)
        .map((call) => call.operation)
        .filter((operation) => operation !== 'GetItem'),
    ).toEqual(['PutItem']);
  });

  it("gives up on giving a lease back when that never ends, and passes on the IdP's refusal", async () => {
    const member = instance();
    proxy.set({ kind: 'hang', only: 'DeleteItem' });
    const requestBody = { ...body('faults-client-release-hangs'), client_secret: 'wrong' };

    const answer = await member.handle(tokenEvent(requestBody));

    expect(answer.statusCode).toBe(401);
    expect(member.records[0]).toMatchObject({ outcome: 'unauthorized', cache_error: 'TimeoutError' });
    expect(callsFor(requestBody).map((call) => call.operation)).toEqual(['GetItem', 'PutItem', 'DeleteItem']);
  });

  it('logs the time spent in table calls, to a tenth of a millisecond, within the time the request took', async () => {
    const member = instance();
    const started = performance.now();

    await member.handle(tokenEvent(body('faults-client-latency')));

    const took = performance.now() - started;
    const latency = member.records[0]?.cache_table_latency_ms as number;
    expect(latency).toBeGreaterThan(0);
    expect(latency).toBeLessThanOrEqual(took);
    expect(Number(latency.toFixed(1))).toBe(latency);
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

  it('logs the tier and the table latency, and counts CacheHits by tier, CacheMisses and CacheErrors', async () => {
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
    const cacheMetrics = lines.filter((line) => 'tier' in line && '_aws' in line);
    expect(cacheMetrics.map((line) => [line.tier, line.CacheHits, line.CacheMisses, line.CacheErrors])).toEqual([
      ['miss', undefined, 1, 1],
      ['miss', undefined, 1, undefined],
      ['shared', 1, undefined, undefined],
      ['memory', 1, undefined, undefined],
    ]);
    expect(cacheMetrics[0]).toMatchObject({ service: 'token-exchange', CacheTableLatency: expect.any(Number) });
  });
});

describe('the name a table failure is logged under', () => {
  it.each([
    [
      'a socket errno code',
      Object.assign(new Error('socket hang up at 10.0.0.1'), { name: 'TimeoutError', code: 'ECONNRESET' }),
      'ECONNRESET',
    ],
    ['an abort by the call timeout', Object.assign(new Error('aborted'), { name: 'AbortError' }), 'TimeoutError'],
    ['the SDK timeout class', Object.assign(new Error('timed out'), { name: 'TimeoutError' }), 'TimeoutError'],
    [
      'an AWS error class',
      Object.assign(new Error('User: arn:aws:iam::1:role/x is not authorized'), { name: 'AccessDeniedException' }),
      'AccessDeniedException',
    ],
    [
      'a code that is no errno',
      Object.assign(new Error('x'), { name: 'ResourceNotFoundException', code: 'not an errno' }),
      'ResourceNotFoundException',
    ],
    ['a plain Error', new Error('Requested resource not found: Table: secret-table'), 'Error'],
    ['a class name that could carry text', Object.assign(new Error('x'), { name: 'Table secret-table not found' }), 'Error'],
    ['a thrown value that is no object', undefined, 'Error'],
    [
      'a code that only ends like an errno',
      Object.assign(new Error('x'), { name: 'AccessDeniedException', code: 'xECONNRESET' }),
      'AccessDeniedException',
    ],
    ['a code that only starts like an errno', Object.assign(new Error('x'), { code: 'ECONNRESET at 10.0.0.1' }), 'Error'],
    ['a class name that is no string', Object.assign(new Error('x'), { name: 42 }), 'Error'],
  ])('is the errno code or the class, never the message: %s', (_case, error, name) => {
    expect(tableErrorName(error)).toBe(name);
  });
});
