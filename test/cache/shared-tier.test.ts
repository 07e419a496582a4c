import { openState, sealState } from '../../lambda/cache/item-state';
import type { Entry } from '../../lambda/cache/lifetime';
import { UNKNOWN_REJECTION } from '../../lambda/cache/outcome';
import type { PepperSource } from '../../lambda/cache/pepper';
import { assertionHoldKey } from '../../lambda/cache/request-key';
import { holdItemKeys, requestItemKeys } from '../../lambda/cache/sealed-item';
import { type SharedAsk, SharedTier } from '../../lambda/cache/shared-tier';
import { dynamoDbTable, type Table } from '../../lambda/cache/table-calls';
import { epochMs, monoMs, realRuntime } from '../../lambda/cache/time';
import { UpstreamThrottled } from '../../lambda/errors';
import { itemStates, type SharedTable, startSharedTable } from '../support/shared-table';
import { startTableProxy } from '../../local/table-proxy';

// The shared tier driven directly, over dynalite through the real DynamoDB client, for what a request
// through the handler seldom reaches: no pepper, hold items that cannot be read, hold writes that race.

const PEPPER = Buffer.alloc(32, 9);
let table: SharedTable;

beforeAll(async () => {
  table = await startSharedTable('shared-tier-test');
});

afterAll(async () => {
  await table.close();
});

const runtime = realRuntime();
const withPepper: PepperSource = { get: async () => PEPPER };
const withoutPepper: PepperSource = {
  get: async (_budget, report) => {
    report.tableError = 'PepperTimeout';
    return undefined;
  },
};
function tier(pepper: PepperSource, tableOf: Table = dynamoDbTable(table.tableName, 600)): SharedTier {
  return new SharedTier({ table: tableOf, upstreamTimeoutMs: 3000, callLimitMs: 600, pepper, runtime });
}
const kept = (ago: number): Entry => ({ token: { access_token: 'kept', expires_in: 3600 }, receivedAt: epochMs(Date.now() - ago) });
const deadline = () => monoMs(performance.now() + 3000);
const ask = (parts: Partial<SharedAsk>): SharedAsk => ({
  vouched: false,
  secret: 'shared-tier-secret',
  requestText: `text-${Math.random()}`,
  holdKey: `hold-${Math.random()}`,
  known: undefined,
  rejectedAt: epochMs(0),
  refresh: false,
  remembered: undefined,
  deadline: deadline(),
  noCache: false,
  arrivedAt: epochMs(Date.now()),
  exchange: async () => ({ access_token: 'new', expires_in: 3600 }),
  report: {},
  ...parts,
});

describe('the shared tier without its pepper', () => {
  it('asks the IdP, says so when it refreshes ahead, and lets no kept token stand in for a failure', async () => {
    const report = {};
    const throttled = () => Promise.reject(new UpstreamThrottled(30));

    const outcome = await tier(withoutPepper).fetch(ask({ known: kept(3_215_000), refresh: true, exchange: throttled, report }));

    expect(outcome).toMatchObject({
      kind: 'failure',
      failure: { code: 'upstream_throttled' },
      rejectedAt: UNKNOWN_REJECTION,
      scope: 'client',
    });
    expect(report).toEqual({ refresh: 'ahead', tableError: 'PepperTimeout' });
  });

  it('holds the key alone after a throttle when no kept token proves it', async () => {
    const outcome = await tier(withoutPepper).fetch(ask({ exchange: () => Promise.reject(new UpstreamThrottled(30)) }));

    expect(outcome).toMatchObject({ kind: 'failure', scope: 'key' });
  });

  it('reads no hold', async () => {
    const report = {};

    expect(await tier(withoutPepper).holdOn(['any'], deadline(), report)).toBeUndefined();
    expect(report).toEqual({ tableError: 'PepperTimeout' });
  });
});

describe("the shared tier's holds", () => {
  it('takes the longest of the holds it reads, and ignores one it cannot read', async () => {
    const [short, long] = [`short-${Math.random()}`, `long-${Math.random()}`];
    await table.plant(holdItemKeys(PEPPER, short), {
      kind: 'hold',
      hold: { code: 'upstream_throttled', until: epochMs(Date.now() + 5000) },
    });
    await table.plant(holdItemKeys(PEPPER, long), {
      kind: 'hold',
      hold: { code: 'upstream_throttled', until: epochMs(Date.now() + 20_000) },
    });

    const read = await tier(withPepper).holdOn([short, long], deadline(), {});
    const missingTable = await tier(withPepper, dynamoDbTable('no-such-table', 600)).holdOn([long], deadline(), {});

    // Another instance's hold, honoured 5 s longer
    expect((read?.until ?? 0) - Date.now()).toBeGreaterThan(24_000);
    expect(missingTable).toBeUndefined();
  });

  /** The real table as an instance reaches it, with `beforePut(n)` run before its n-th write (from 1); `puts()` counts them. */
  function racedTable(beforePut: (n: number) => Promise<void>) {
    const real = dynamoDbTable(table.tableName, 600);
    let puts = 0;
    const raced: Table = {
      calls: (report) => {
        const calls = real.calls(report);
        return {
          get: (itemKey) => calls.get(itemKey),
          put: async (itemKey, state, expected, rev) => {
            await beforePut((puts += 1));
            return calls.put(itemKey, state, expected, rev);
          },
        };
      },
    };
    return { raced, puts: () => puts };
  }
  const holdFor = (ms: number) => ({ code: 'upstream_throttled', until: epochMs(Date.now() + ms) }) as const;
  const heldFor = async (keys: ReturnType<typeof holdItemKeys>): Promise<number> => {
    const item = (await table.scan()).find((row) => row.pk?.S === keys.itemKey);
    const state = openState(keys, Number(item?.expires?.N), item?.state?.B);
    return state?.kind === 'hold' ? state.hold.until - Date.now() : 0;
  };

  it('never shortens a longer hold another instance wrote while it was writing its own', async () => {
    // Prepare: another instance writes a 50 s hold between this one's read of the hold item and its write
    const holdKey = assertionHoldKey(`racing-${Math.random()}`, 'https://idp.example/t');
    const keys = holdItemKeys(PEPPER, holdKey);
    const { raced, puts } = racedTable(async (n) => {
      if (n === 1) await table.plant(keys, { kind: 'hold', hold: holdFor(50_000) });
    });

    // Act: a 10 s hold
    await tier(withPepper, raced).putHold(holdKey, holdFor(10_000), deadline(), {});

    // Assess: the race happened (its first write lost), and the other's hold stands
    expect(await heldFor(keys)).toBeGreaterThan(45_000);
    expect(puts()).toBe(2);
  });

  it('writes its longer hold again over a shorter one another instance wrote while it was writing', async () => {
    // Prepare: another instance writes a 5 s hold between this one's read of the hold item and its write
    const holdKey = `shorter-${Math.random()}`;
    const keys = holdItemKeys(PEPPER, holdKey);
    const { raced, puts } = racedTable(async (n) => {
      if (n === 1) await table.plant(keys, { kind: 'hold', hold: holdFor(5000) });
    });

    // Act: a 30 s hold
    await tier(withPepper, raced).putHold(holdKey, holdFor(30_000), deadline(), {});

    // Assess: its first write lost to the other's; the second, merged, won
    expect(await heldFor(keys)).toBeGreaterThan(25_000);
    expect(puts()).toBe(2);
  });

  it('writes a hold once when nobody else writes the hold item', async () => {
    const holdKey = `once-${Math.random()}`;
    const keys = holdItemKeys(PEPPER, holdKey);
    const { raced, puts } = racedTable(async () => undefined);

    await tier(withPepper, raced).putHold(holdKey, holdFor(30_000), deadline(), {});

    expect(await heldFor(keys)).toBeGreaterThan(25_000);
    expect(puts()).toBe(1);
  });

  it('gives up after three writes when another writer changes the hold item before each one', async () => {
    // Prepare: a writer that replaces the hold item before every write of this instance
    const holdKey = `contended-${Math.random()}`;
    const keys = holdItemKeys(PEPPER, holdKey);
    const { raced, puts } = racedTable(async (n) => {
      if (n > 10) throw new Error('the writes went on without bound');
      await table.plant(keys, { kind: 'hold', hold: holdFor(1000 * n) });
    });

    // Act
    await tier(withPepper, raced).putHold(holdKey, holdFor(30_000), deadline(), {});

    // Assess: bounded, and the other writer's item stands
    expect(puts()).toBe(3);
    expect(await heldFor(keys)).toBeLessThan(5000);
  });

  it('keeps the longer hold it finds, writing it again under its own revision', async () => {
    const holdKey = `kept-${Math.random()}`;
    const keys = holdItemKeys(PEPPER, holdKey);
    const longer = { code: 'upstream_throttled', until: epochMs(Date.now() + 40_000) } as const;
    const { sealed, expiresSeconds } = sealState(keys, { kind: 'hold', hold: longer });
    await table.put({ pk: { S: keys.itemKey }, state: { B: sealed }, rev: { S: 'theirs' }, expires: { N: String(expiresSeconds) } });

    await tier(withPepper).putHold(holdKey, { code: 'upstream_throttled', until: epochMs(Date.now() + 5000) }, deadline(), {});

    const item = (await table.scan()).find((row) => row.pk?.S === keys.itemKey);
    const state = openState(keys, Number(item?.expires?.N), item?.state?.B);
    expect(state).toEqual({ kind: 'hold', hold: longer });
    expect(item?.rev?.S).not.toBe('theirs');
  });

  it('waits for a hold read no longer than the hedge (3 s deadline: 120 ms), though the call limit is 600 ms', async () => {
    const proxy = await startTableProxy(table.endpoint);
    proxy.set({ kind: 'hang' });
    const saved = process.env.AWS_ENDPOINT_URL_DYNAMODB;
    process.env.AWS_ENDPOINT_URL_DYNAMODB = proxy.endpoint;
    try {
      const hanging = dynamoDbTable(table.tableName, 600);

      const started = performance.now();
      const read = await tier(withPepper, hanging).holdOn(['any'], deadline(), {});

      expect(read).toBeUndefined();
      expect(performance.now() - started).toBeLessThan(500);
    } finally {
      process.env.AWS_ENDPOINT_URL_DYNAMODB = saved;
      await proxy.close();
    }
  });
});

describe("the shared tier's timers", () => {
  it('keeps one of each kind at a time: a waiter that polls for long piles none up', async () => {
    // Prepare: a claim nobody renews, and a 25 s deadline: a 1 s hedge armed again at each poll, every 100 ms
    let pending = 0;
    let most = 0;
    const counting = {
      ...runtime,
      sleep: (ms: number, signal?: AbortSignal) => {
        most = Math.max(most, ++pending);
        return runtime.sleep(ms, signal).finally(() => pending--);
      },
    };
    const slow = new SharedTier({
      table: dynamoDbTable(table.tableName, 1000),
      upstreamTimeoutMs: 25_000,
      callLimitMs: 1000,
      pepper: withPepper,
      runtime: counting,
    });
    const asked = ask({ deadline: monoMs(performance.now() + 25_000) });
    const keys = requestItemKeys(PEPPER, asked.secret, asked.requestText);
    await table.plant(keys, itemStates(Date.now).claim('gone', { leftMs: 24_900 }));

    // Act: it waits out the silent claim (750 ms), then claims and asks the IdP
    const outcome = await slow.fetch(asked);

    // Assess: a deadline, a hedge, a poll, a renewal and a settle at most
    expect(outcome).toMatchObject({ kind: 'token' });
    expect(most).toBeLessThanOrEqual(5);
  });

  it('stops the hedge of a hold read that answered within it', async () => {
    // Prepare: a hold to read, and a runtime that counts the timers running
    let pending = 0;
    const counting = {
      ...runtime,
      sleep: (ms: number, signal?: AbortSignal) => (++pending, runtime.sleep(ms, signal).finally(() => pending--)),
    };
    const holdKey = `hedged-${Math.random()}`;
    await table.plant(holdItemKeys(PEPPER, holdKey), {
      kind: 'hold',
      hold: { code: 'upstream_throttled', until: epochMs(Date.now() + 30_000) },
    });
    const hedged = new SharedTier({
      table: dynamoDbTable(table.tableName, 600),
      upstreamTimeoutMs: 3000,
      callLimitMs: 600,
      pepper: withPepper,
      runtime: counting,
    });

    // Act
    const read = await hedged.holdOn([holdKey], deadline(), {});
    await new Promise((resolve) => setImmediate(resolve));

    // Assess: the read, not the hedge, answered (the control); then no timer runs on
    expect(read?.code).toBe('upstream_throttled');
    expect(pending).toBe(0);
  });
});
