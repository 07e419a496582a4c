import { ownEntry } from '../../../lambda/cache/core/lifetime';
import { randomBytes } from 'node:crypto';
import { Deadline, epochMs, systemClock } from '../../../lambda/clock';
import type { Remembered } from '../../../lambda/cache/core/rules';
import { cacheSettings } from '../../../lambda/cache/core/settings';
import { secretsManagerPepper } from '../../../lambda/cache/shell/pepper';
import { type Runtime, type SharedAsk, SharedTier } from '../../../lambda/cache/shell/shared-tier';
import { dynamoDbTable, type Table, type TableCalls } from '../../../lambda/cache/shell/table-calls';
import type { CacheReport } from '../../../lambda/cache/report';
import { upstreamFailure } from '../../../lambda/errors';
import { type ManualClock, manualClock, settle } from '../../support/manual-clock';
import { PEPPER_SECRET, type SharedTable, startSharedTable } from '../../support/shared-table';

// The shared tier driven directly over dynalite and the Secrets Manager stand-in, for what a request
// through the handler seldom reaches: a hold learnt just as the exchange goes out, a bug in the
// exchange, and the tier without its pepper.

const SETTINGS = cacheSettings(5000);
const runtime: Runtime = { ...systemClock(), instance: 'i-shared-tier', id: () => randomBytes(9).toString('base64url') };
const NOTHING = { entry: undefined, failure: undefined, hold: undefined, busy: false, refreshing: false };
const TOKEN = { access_token: 'from-the-idp', token_type: 'Bearer', expires_in: 3600 };
let table: SharedTable;
let asked: number;

beforeAll(async () => {
  table = await startSharedTable('shared-tier-test');
});
beforeEach(() => {
  asked = 0;
});
afterAll(async () => {
  await table.close();
});

/** A hold the IdP asked for on another request of this instance, 20 s from now. */
const heldFor20s = (): Remembered => ({ code: 'upstream_throttled', until: epochMs(runtime.epoch() + 20_000) });
const ask = (parts: Partial<SharedAsk> = {}): SharedAsk => ({
  secret: 'shared-tier-secret',
  requestText: `text-${randomBytes(6).toString('hex')}`,
  holdKeys: [`hold-${randomBytes(6).toString('hex')}`],
  clientHoldKey: `hold-${randomBytes(6).toString('hex')}`,
  memory: NOTHING,
  rejection: { at: epochMs(0), own: false },
  rejectedAt: () => epochMs(0),
  vouched: false,
  tokenUrl: 'https://idp.example/token',
  deadline: Deadline.after(runtime, 5000),
  exchange: async () => {
    asked++;
    return TOKEN;
  },
  report: {},
  noCache: false,
  arrivedAt: runtime.epoch(),
  looked: () => undefined,
  waits: () => undefined,
  met: () => undefined,
  heldNow: () => undefined,
  ...parts,
});
/** A tier over the table (or `parts.table`) on the system's clock (or `parts.runtime`), whose pepper has loaded (or failed to). */
async function loaded(
  pepperSecret = PEPPER_SECRET,
  parts: { table?: Table; settings?: typeof SETTINGS; runtime?: Runtime } = {},
): Promise<SharedTier> {
  const { runtime: on = runtime, settings = SETTINGS } = parts;
  const tableCalls = parts.table ?? dynamoDbTable(table.tableName, SETTINGS.callLimitMs, on);
  const shared = new SharedTier({
    table: tableCalls,
    settings,
    pepper: secretsManagerPepper(pepperSecret, on, SETTINGS.pepper),
    runtime: on,
  });
  // On the system's clock: a manual one would not move while the pepper loads.
  await shared.holdOn([], Deadline.after(systemClock(), 2000), {});
  return shared;
}

describe('the shared tier with its table', () => {
  it("refreshes a token of this instance's own due for it, as the claim's holder, and says so", async () => {
    const shared = await loaded();
    const due = ownEntry(TOKEN, epochMs(runtime.epoch() - 3_215_000), runtime.instance);
    const report: CacheReport = {};

    const outcome = await shared.fetch(ask({ memory: { ...NOTHING, entry: due }, report }));

    expect(outcome).toMatchObject({ kind: 'token', from: 'idp' });
    expect([asked, report.refresh]).toEqual([1, 'ahead']);
  });

  it('dates its token after a rejection another request here met while the IdP answered (seed 1936687369)', async () => {
    let rejectedAt = epochMs(0);
    const meanwhile = async () => {
      rejectedAt = epochMs(runtime.epoch() - 10);
      return TOKEN;
    };

    const outcome = await (await loaded()).fetch(ask({ exchange: meanwhile, rejectedAt: () => rejectedAt }));

    expect(outcome).toMatchObject({ kind: 'token', from: 'idp', entry: { after: rejectedAt } });
    expect(rejectedAt).toBeGreaterThan(0);
  });

  it('answers at its deadline while its exchange runs on, which still ends and is published', async () => {
    let answered: () => void = () => undefined;
    const slow = () => new Promise<typeof TOKEN>((resolve) => (answered = () => resolve(TOKEN)));

    const outcome = await (await loaded()).fetch(ask({ deadline: Deadline.after(runtime, 300), exchange: slow }));
    answered();

    expect(outcome).toMatchObject({ kind: 'failure', cause: 'deadline', failure: { code: 'upstream_timeout' } });
  });

  it('sends no exchange that a hold learnt meanwhile on this instance forbids: the hold is the outcome', async () => {
    // Prepare: the table says nothing of the key; this instance has just been asked to wait.
    const shared = await loaded();
    const hold = heldFor20s();

    // Act
    const outcome = await shared.fetch(ask({ heldNow: () => hold }));

    // Assess
    expect(outcome).toMatchObject({ kind: 'failure', failure: hold, cause: 'hold' });
    expect(asked).toBe(0);
  });

  it('passes on a bug the exchange throws, whatever it was doing with the table', async () => {
    const shared = await loaded();
    const bug = new TypeError('a bug in the exchange');

    await expect(shared.fetch(ask({ exchange: () => Promise.reject(bug) }))).rejects.toBe(bug);
  });
});

describe('the shared tier without its pepper', () => {
  it('answers a hold this instance learnt since the request decided, without the IdP', async () => {
    const shared = await loaded('no-such-secret');
    const hold = heldFor20s();
    const report = {};

    const outcome = await shared.fetch(ask({ heldNow: () => hold, report }));

    expect(outcome).toMatchObject({ kind: 'failure', failure: hold, cause: 'hold', rejection: 'unknown', kept: undefined });
    expect(asked).toBe(0);
    expect(report).toMatchObject({ tableError: 'ResourceNotFoundException' });
  });

  it('counts a timeout of an exchange that had less than the whole deadline as its own deadline, which nobody remembers', async () => {
    const shared = await loaded('no-such-secret');
    const timedOut = () => Promise.reject(upstreamFailure('upstream_timeout'));

    const short = await shared.fetch(ask({ deadline: Deadline.after(runtime, 1000), exchange: timedOut }));
    const whole = await shared.fetch(ask({ deadline: Deadline.after(runtime, 5000), exchange: timedOut }));

    expect([short, whole]).toMatchObject([
      { kind: 'failure', failure: { code: 'upstream_timeout' }, cause: 'deadline' },
      { kind: 'failure', failure: { code: 'upstream_timeout' }, cause: 'exchange' },
    ]);
  });

  it('does what memory says: answers its fresh token, or its failure in force, without the IdP', async () => {
    const shared = await loaded('no-such-secret');
    const fresh = ownEntry(TOKEN, runtime.epoch(), runtime.instance);
    const failure: Remembered = { code: 'upstream_error', until: epochMs(runtime.epoch() + 1000) };

    const answered = await shared.fetch(ask({ memory: { ...NOTHING, entry: fresh } }));
    const failed = await shared.fetch(ask({ memory: { ...NOTHING, failure } }));

    expect([answered, failed]).toMatchObject([
      { kind: 'token', entry: fresh, from: 'memory' },
      { kind: 'failure', failure, cause: 'failure', rejection: 'unknown' },
    ]);
    expect(asked).toBe(0);
  });

  it('refreshes a token due for it from the IdP, and says so', async () => {
    const shared = await loaded('no-such-secret');
    const due = ownEntry(TOKEN, epochMs(runtime.epoch() - 3_215_000), runtime.instance);
    const report: CacheReport = {};

    const outcome = await shared.fetch(ask({ memory: { ...NOTHING, entry: due }, report, rejectedAt: () => epochMs(7) }));

    // Dated after the rejection this instance knew as it came.
    expect(outcome).toMatchObject({ kind: 'token', from: 'idp', entry: { token: TOKEN, receivedBy: runtime.instance, after: 7 } });
    expect([asked, report.refresh]).toEqual([1, 'ahead']);
  });

  it('writes no hold, and says why', async () => {
    const shared = await loaded('no-such-secret');
    const before = (await table.scan()).length;
    const report = {};

    await shared.putHold('hold-nowhere', heldFor20s(), Deadline.after(runtime, 5000), report);

    expect((await table.scan()).length).toBe(before);
    expect(report).toMatchObject({ tableError: 'ResourceNotFoundException' });
  });
});

describe("the shared tier's hedge", () => {
  /** A tier over the table on a manual clock, named `instance`, whose reads go through `read` (given the table's own). */
  async function manualTier(
    instance: string,
    read: (get: () => ReturnType<TableCalls['get']>, clock: ManualClock) => ReturnType<TableCalls['get']>,
    settings = SETTINGS,
  ) {
    const clock = manualClock(Date.now());
    const manual: Runtime = { ...clock, instance, id: () => randomBytes(9).toString('base64url') };
    const dynamo = dynamoDbTable(table.tableName, SETTINGS.callLimitMs, manual);
    const paced: Table = {
      calls: (report) => {
        const calls = dynamo.calls(report);
        return {
          get: (itemKey) => read(() => calls.get(itemKey), clock),
          put: (itemKey, state, expected, rev) => calls.put(itemKey, state, expected, rev),
        };
      },
    };
    return { clock, manual, shared: await loaded(PEPPER_SECRET, { table: paced, settings, runtime: manual }) };
  }

  /**
   * A tier keeping the IdP timings of one token URL, on a manual clock, over the table: while `slow`, each read takes
   * 400 ms of the clock; once `stuck`, no read answers. The IdP takes 3.5 s once the table's reads are in.
   */
  async function timedTier() {
    let stuck = false;
    let reading = 0;
    const { clock, manual, shared } = await manualTier(
      'i-hedge',
      async (get, readClock) => {
        if (stuck) return new Promise<never>(() => undefined);
        readClock.advance(400);
        reading++;
        return get().finally(() => reading--);
      },
      { ...SETTINGS, memoryEntries: 1 },
    );
    const slowIdp = async () => {
      while (reading > 0) await settle();
      clock.advance(3500);
      return TOKEN;
    };
    const sent = { hedged: 0 };
    return {
      clock,
      sent,
      /** A request to `tokenUrl` whose IdP takes 3.5 s. */
      timed: (tokenUrl: string) => shared.fetch(ask({ tokenUrl, deadline: Deadline.after(manual, 5000), exchange: slowIdp })),
      /** A request to `tokenUrl` whose table never answers: its exchange goes out when its hedge passes. */
      hedged: (tokenUrl: string) => {
        stuck = true;
        const exchange = async () => {
          sent.hedged++;
          return TOKEN;
        };
        void shared.fetch(ask({ tokenUrl, deadline: Deadline.after(manual, 5000), arrivedAt: manual.epoch(), exchange }));
      },
    };
  }

  it('stretches a hedge that comes while its read is out once another read of this instance answered slower meanwhile', async () => {
    // Prepare: a tier whose reads took 100 ms (a hedge of 250 ms, the IdP instant: room for 2.5 s). Reads then wait for
    // the test: request Y's until released, request X's never.
    let phase: 'warm' | 'gated' | 'stuck' = 'warm';
    const gated: (() => void)[] = [];
    let answered = 0;
    const { clock, manual, shared } = await manualTier('i-paced', async (get, readClock) => {
      if (phase === 'stuck') return new Promise<never>(() => undefined);
      if (phase === 'warm') {
        readClock.advance(100);
        return get();
      }
      await new Promise<void>((resolve) => gated.push(resolve));
      return get().finally(() => answered++);
    });
    const on = (parts: Partial<SharedAsk> = {}) => ask({ deadline: Deadline.after(manual, 5000), arrivedAt: manual.epoch(), ...parts });
    await shared.fetch(on());
    phase = 'gated';
    void shared.fetch(on());
    await settle();
    clock.advance(200);
    phase = 'stuck';
    let xAsked = 0;
    const exchange = async () => {
      xAsked++;
      return TOKEN;
    };
    void shared.fetch(on({ exchange }));
    await settle();

    // Act: Y's reads answer after 320 ms, before X's hedge (450); X's hedge then follows them: 2.5 x 320 from X's start.
    clock.advance(120);
    const released = gated.splice(0);
    for (const release of released) release();
    while (answered < released.length) await settle();
    clock.advance(130);
    await settle();
    const atFirstHedge = xAsked;
    clock.advance(549);
    await settle();
    const justBefore = xAsked;
    clock.advance(1);
    await settle();

    // Assess
    expect([atFirstHedge, justBefore, xAsked]).toEqual([0, 0, 1]);
  });

  it('waits on a slow table as long as a slow IdP leaves room, and forgets the IdP of the token URL asked least recently past its bound', async () => {
    // Prepare: reads of 400 ms (800 when two overlap) and an IdP of 3.5 s at A leave 625 ms of the deadline for the hedge.
    // Past the bound the IdP at A is unknown again (taken to use half the deadline, which leaves 1875 ms): the hedge is
    // 2.5 reads (1 to 2 s), within those 1875 ms.
    const remembering = await timedTier();
    await remembering.timed('https://a.example/token');
    const forgetting = await timedTier();
    await forgetting.timed('https://a.example/token');
    await forgetting.timed('https://b.example/token');

    // Act
    remembering.hedged('https://a.example/token');
    forgetting.hedged('https://a.example/token');
    await settle();
    remembering.clock.advance(625);
    forgetting.clock.advance(625);
    await settle();
    const at625 = [remembering.sent.hedged, forgetting.sent.hedged];
    forgetting.clock.advance(1249);
    await settle();
    const at1874 = forgetting.sent.hedged;
    forgetting.clock.advance(1);
    await settle();

    // Assess
    expect([at625, at1874, forgetting.sent.hedged]).toEqual([[1, 0], 0, 1]);
  });
});
