import { type EpochMs, epochMs, monoMs } from '../../../lambda/clock';
import type { ClaimFacts } from '../../../lambda/cache/core/claims';
import { EMPTY_MEMO, type Ended, type KeyItem, type KeyMemo, type StoredToken } from '../../../lambda/cache/core/item';
import { type Entry, ownEntry } from '../../../lambda/cache/core/lifetime';
import type { Outcome } from '../../../lambda/cache/core/outcome';
import { type KeyView, NO_REJECTION, type Remembered } from '../../../lambda/cache/core/rules';
import { cacheSettings } from '../../../lambda/cache/core/settings';
import {
  type Expected,
  type Now,
  startVisit,
  type Step,
  step,
  type VisitAction,
  type VisitAsk,
  type VisitEvent,
  visitOver,
  wakeAt,
  type WriteKind,
  type WriteResult,
} from '../../../lambda/cache/core/visit';

// One request's visit to the shared table, driven alone: no table, no IdP, no timers. Each test feeds
// the transition function what happened, at exact moments of both clocks, and reads what it says to do.

const T0 = 1_800_000_000_000;
const SETTINGS = cacheSettings(5000);
const HEDGE_MS = 200;
/** Both clocks `ms` into the request: mono from 0, epoch from T0. */
const at = (ms: number): Now => ({ epoch: epochMs(T0 + ms), mono: monoMs(ms) });
const epoch = (ms: number): EpochMs => epochMs(T0 + ms);
/** A token of `expiresIn` s received `ago` ms before the request, by `by` (`here`: this instance). */
const token = (name: string, ago = 0, { by = 'here', expiresIn = 3600 }: { by?: string; expiresIn?: number } = {}): Entry => ({
  ...ownEntry({ access_token: name, token_type: 'Bearer', expires_in: expiresIn }, epoch(-ago), by),
  copy: by !== 'here',
});
const stored = (entry: Entry): StoredToken => ({
  token: entry.token,
  receivedAt: entry.receivedAt,
  by: entry.receivedBy,
  after: entry.after,
});
const NOTHING: KeyView = { entry: undefined, failure: undefined, hold: undefined, busy: false, refreshing: false };
const ask = (parts: Partial<VisitAsk> = {}): VisitAsk => ({
  memory: NOTHING,
  rejection: NO_REJECTION,
  deadline: monoMs(5000),
  instance: 'here',
  holder: 'me',
  vouched: false,
  pepperSwitchedAt: epochMs(0),
  noCache: false,
  arrivedAt: epoch(0),
  ...parts,
});
const claimFacts = (parts: Partial<ClaimFacts> = {}): ClaimFacts => ({
  holder: 'other',
  beat: 0,
  leftMs: 4900,
  runMs: 0,
  claimedAt: epoch(0),
  lineage: [],
  echoes: [],
  ...parts,
});
const memo = (parts: Partial<KeyMemo> = {}): KeyMemo => ({ ...EMPTY_MEMO, ...parts });
const item = (parts: Partial<Omit<KeyItem, 'kind'>> = {}): KeyItem => ({
  kind: 'key',
  memo: EMPTY_MEMO,
  activity: { kind: 'idle' },
  ended: [],
  ...parts,
});
const keeping = (entry: Entry, parts: Partial<Omit<KeyItem, 'kind' | 'memo'>> = {}) =>
  item({ memo: memo({ kept: stored(entry) }), ...parts });
const claimed = (parts: Partial<ClaimFacts> = {}, rest: Partial<Omit<KeyItem, 'kind' | 'activity'>> = {}) =>
  item({ activity: { kind: 'claim', claim: claimFacts(parts) }, ...rest });
/** The item at one of these revisions; or, UNVERSIONED, with none. */
const revs = (...at: string[]): Expected => ({ revs: at, unversioned: false });
const UNVERSIONED: Expected = { revs: [], unversioned: true };
const readOf = (state: KeyItem | undefined, atMs = 0, expected: Expected = revs('r1')) => ({
  state,
  expected,
  startedAt: monoMs(atMs),
  endedAt: monoMs(atMs + 2),
});
const read = (state: KeyItem | undefined, atMs = 0, expected: Expected = revs('r1')): VisitEvent => ({
  kind: 'read',
  read: readOf(state, atMs, expected),
});
const READ_FAILED: VisitEvent = { kind: 'read', read: 'failed' };
const holds = (hold: Remembered | undefined | 'failed'): VisitEvent => ({ kind: 'holds', hold });
const failure = (code: Remembered['code'], untilMs: number): Remembered => ({ code, until: epoch(untilMs) });
const ended = (holder: string, outcome: Ended['outcome'], lineage: readonly string[] = []): Ended => ({ holder, lineage, outcome });
const answeredBy = (holder: string, receivedMs: number, token: StoredToken | 'kept' | 'unshared' = 'kept', untilMs = 5000): Ended =>
  ended(holder, { kind: 'answered', receivedAt: epoch(receivedMs), until: epoch(untilMs), answerBy: epoch(untilMs), token });
const tick = (ms: number, hedgeMs = HEDGE_MS): VisitEvent => ({ kind: 'tick', at: monoMs(ms), hedgeMs });
const gotToken = (entry: Entry): VisitEvent => ({ kind: 'exchanged', result: { token: entry } });
const gotFailure = (failed: Remembered): VisitEvent => ({ kind: 'exchanged', result: { failure: failed } });

/** The answer to a write: by default the visit's latest (`me.N`, its holder and count of writes). */
const LATEST = 'latest';
const wrote = (write: WriteKind, result: WriteResult, rev = LATEST): VisitEvent => ({ kind: 'written', write, rev, result });
const WON: WriteResult = { kind: 'won' };
const FAILED_WRITE: WriteResult = { kind: 'failed' };
const lost = (state: KeyItem | undefined, expected: Expected = revs('r2'), atMs = 0): WriteResult => ({
  kind: 'lost',
  read: readOf(state, atMs, expected),
});

/** Feed events in order, each at its moment; the last step. */
function run(first: Step, ...events: [VisitEvent, number][]): Step {
  let current = first;
  for (const [event, ms] of events) {
    const latest = `${current.visit.ask.holder}.${current.visit.sent - 1}`;
    const resolved = event.kind === 'written' && event.rev === LATEST ? { ...event, rev: latest } : event;
    current = step(current.visit, resolved, at(ms));
  }
  return current;
}
const start = (parts: Partial<VisitAsk> = {}, ms = 0, capMs = HEDGE_MS) =>
  startVisit(ask(parts), SETTINGS, { ms: HEDGE_MS, capMs }, at(ms));
const kinds = (actions: readonly VisitAction[]) =>
  actions.map((action) => (action.kind === 'write' ? `write:${action.write}` : action.kind));
const answerOf = (actions: readonly VisitAction[]): Outcome | undefined =>
  actions.flatMap((action) => (action.kind === 'answer' ? [action.outcome] : []))[0];
const writeOf = (actions: readonly VisitAction[], purpose?: WriteKind) =>
  actions.find(
    (action): action is Extract<VisitAction, { kind: 'write' }> =>
      action.kind === 'write' && (purpose === undefined || action.write === purpose),
  );
/** A visit that read an empty item, claimed it, won, and read no hold: its exchange runs from `ms`. */
const holding = (parts: Partial<VisitAsk> = {}, ms = 4) =>
  run(start(parts), [read(undefined, 0, UNVERSIONED), 2], [wrote('claim', WON), 3], [holds(undefined), ms]);
/** That holder, its first renewal refused at 256 by a claim that took its place: it looks at the item again at 506. */
const displaced = () => run(holding(), [tick(254), 254], [wrote('renew', lost(claimed({ holder: 'taker', lineage: ['me'] }))), 256]);

describe('a rejection a read shows', () => {
  it('voids older tokens at once, whatever the visit does with the read (a displaced holder only looks for its outcome)', () => {
    // In its refresh window, its own token: the visit claims the key to refresh it, and keeps it as what it has seen.
    const due = token('due', 3_215_000);
    const displaced = run(
      holding({ memory: { ...NOTHING, entry: due } }),
      [tick(254), 254],
      [wrote('renew', lost(claimed({ holder: 'taker', lineage: ['me'] }))), 256],
    );
    const looked = (rejectedMs: number) =>
      run(
        displaced,
        [tick(506), 506],
        [read(claimed({ holder: 'taker', lineage: ['me'] }, { memo: memo({ rejectedAt: epoch(rejectedMs) }) }), 506), 508],
      ).visit;

    expect(displaced.visit.seen).toEqual(due);
    expect(looked(300)).toMatchObject({ rejection: { at: epoch(300), own: false }, seen: undefined });
    // One before the token it has seen voids nothing, and changes nothing.
    expect(looked(-3_300_000)).toMatchObject({ rejection: { at: epoch(-3_300_000) }, seen: due });
    expect(run(displaced, [tick(506), 506], [read(claimed({ holder: 'taker', lineage: ['me'] }), 506), 508]).visit.rejection).toBe(
      displaced.visit.rejection,
    );
  });
});

describe('a visit begins', () => {
  it('by reading the key, and the holds alongside when memory would go to the IdP', () => {
    const cold = start();
    const warm = start({ memory: { ...NOTHING, entry: token('mine', 1000) } });

    expect([kinds(cold.actions), kinds(warm.actions)]).toEqual([['read', 'read-holds'], ['read']]);
    expect([wakeAt(cold.visit), visitOver(cold.visit)]).toEqual([HEDGE_MS, false]);
  });

  it('by reading the holds alongside when memory would answer a hold, which the fleet may hold longer; not a remembered failure', () => {
    const held = start({ memory: { ...NOTHING, hold: failure('upstream_throttled', 2000) } });
    const failed = start({ memory: { ...NOTHING, failure: failure('upstream_error', 500) } });

    expect([kinds(held.actions), kinds(failed.actions)]).toEqual([['read', 'read-holds'], ['read']]);
  });

  it("reads the holds once the key's item shows a hold memory did not know, and answers the fleet's longer one", () => {
    const keyHold = item({ ended: [ended('other', { kind: 'failure', failure: failure('upstream_throttled', 5000) })] });
    const parked = run(start({ memory: { ...NOTHING, failure: failure('upstream_error', 500) } }), [read(keyHold), 3]);
    const { actions } = run(parked, [holds(failure('upstream_throttled', 30_000)), 6]);

    expect([kinds(parked.actions), answerOf(actions)]).toEqual([
      ['read-holds'],
      expect.objectContaining({ failure: failure('upstream_throttled', 30_000), cause: 'hold' }),
    ]);
  });

  it("waits for the holds it reads already when the key's item shows a hold, and reads none for a remembered failure", () => {
    const keyHold = item({ ended: [ended('other', { kind: 'failure', failure: failure('upstream_throttled', 5000) })] });
    const keyFailure = item({ ended: [ended('other', { kind: 'failure', failure: failure('upstream_error', 900) })] });
    const reading = run(start({ memory: { ...NOTHING, hold: failure('upstream_throttled', 2000) } }), [read(keyHold), 3]);
    const failed = run(start({ memory: { ...NOTHING, failure: failure('upstream_error', 500) } }), [read(keyFailure), 3]);

    expect([reading.actions, kinds(failed.actions)]).toEqual([[], ['answer']]);
  });

  it('by answering a timeout of its own at once when its deadline has passed', () => {
    const { visit, actions } = start({ deadline: monoMs(0) });

    expect(answerOf(actions)).toMatchObject({
      kind: 'failure',
      failure: { code: 'upstream_timeout' },
      cause: 'deadline',
      rejection: 'unknown',
    });
    expect([visitOver(visit), wakeAt(visit)]).toEqual([true, undefined]);
  });

  it('knowing the token this instance keeps, unless a rejection it knows voids it', () => {
    const mine = token('mine', 1000);

    expect(start({ memory: { ...NOTHING, entry: mine } }).visit.seen).toEqual(mine);
    expect(start({ memory: { ...NOTHING, entry: mine }, rejection: { at: epoch(0), own: true } }).visit.seen).toBeUndefined();
  });
});

describe('a read of the key', () => {
  it("stretches its hedge once a slow read answered: twice that read for the claim, within the IdP's room", () => {
    const slowRead: VisitEvent = {
      kind: 'read',
      read: { state: undefined, expected: UNVERSIONED, startedAt: monoMs(0), endedAt: monoMs(300) },
    };
    const hedgeWith = (capMs: number) => {
      const { visit, actions } = run(start({}, 0, capMs), [slowRead, 300]);
      return [kinds(actions), wakeAt(visit)];
    };

    expect([hedgeWith(1250), hedgeWith(700), hedgeWith(200)]).toEqual([
      [['write:claim'], 900],
      [['write:claim'], 700],
      [['write:claim'], 200],
    ]);
    // The read's own time, from its start: one sent at 100 that answered at 400 took 300 ms.
    const lateRead: VisitEvent = { kind: 'read', read: { ...readOf(undefined, 100, UNVERSIONED), endedAt: monoMs(400) } };
    expect(wakeAt(run(start({}, 0, 1250), [lateRead, 400]).visit)).toBe(1000);
  });

  it('follows what the table answered in while its read is out: a loaded table stretches the hedge within its cap, a hung one not', () => {
    const out = start({}, 0, 1250);
    // At the hedge, the table has since answered other calls of this instance slower: 2.5 times them, from the visit's start.
    const loaded = run(out, [tick(HEDGE_MS, 750), HEDGE_MS]);
    expect([loaded.actions, wakeAt(loaded.visit)]).toEqual([[], 750]);
    expect(kinds(run(loaded, [tick(750, 750), 750]).actions)).toEqual(['exchange']);
    expect(wakeAt(run(out, [tick(HEDGE_MS, 4000), HEDGE_MS]).visit)).toBe(1250);
    // No slower answers (a hung table answers none): the hedge stands, and the IdP is asked.
    expect(kinds(run(out, [tick(HEDGE_MS, HEDGE_MS), HEDGE_MS]).actions)).toEqual(['exchange']);
    // Its read back, the holds still out: they are not what the hedge waits for.
    const holdsOut = run(start({}, 0, 1250), [read(undefined, 0, UNVERSIONED), 2], [wrote('claim', WON), 3]);
    expect(kinds(run(holdsOut, [tick(SETTINGS.hedge.minMs + 3, 750), SETTINGS.hedge.minMs + 3]).actions)).toEqual(['exchange']);
  });

  it('follows what the table answered in while its claim is out, from the visit start, within its cap', () => {
    const claiming = run(start({}, 0, 1250), [read(undefined, 0, UNVERSIONED), 2]);
    const loaded = run(claiming, [tick(HEDGE_MS, 900), HEDGE_MS]);
    expect([loaded.actions, wakeAt(loaded.visit)]).toEqual([[], 900]);
    expect(kinds(run(loaded, [tick(900, 900), 900]).actions)).toEqual(['exchange']);
    expect(wakeAt(run(claiming, [tick(HEDGE_MS, 5000), HEDGE_MS]).visit)).toBe(1250);
    expect(kinds(run(claiming, [tick(HEDGE_MS, 100), HEDGE_MS]).actions)).toEqual(['exchange']);
  });

  it('once its claim is held, waits for holds a slow table still owes no more than the shortest hedge (seed 1149677536)', () => {
    // Its waiters share its exchange, so a slow hold item would cost each of them what it cost the holder.
    const slowRead: VisitEvent = {
      kind: 'read',
      read: { state: undefined, expected: UNVERSIONED, startedAt: monoMs(0), endedAt: monoMs(300) },
    };
    const claimedAt = (ms: number) => run(start({}, 0, 1250), [slowRead, 300], [wrote('claim', WON), ms]);

    expect(wakeAt(claimedAt(320).visit)).toBe(320 + SETTINGS.hedge.minMs);
    expect(kinds(run(claimedAt(320), [tick(520), 520]).actions)).toEqual(['exchange']);
    expect(wakeAt(claimedAt(800).visit)).toBe(900);
  });

  it('with nothing there: claims it over no string revision', () => {
    const { visit, actions } = run(start(), [read(undefined, 0, UNVERSIONED), 3]);

    expect(kinds(actions)).toEqual(['write:claim']);
    expect(writeOf(actions)).toEqual({
      kind: 'write',
      write: 'claim',
      rev: 'me.0',
      expected: UNVERSIONED,
      state: claimed({ holder: 'me', leftMs: 4997, claimedAt: epoch(3) }),
    });
    expect([visit.confirmed, wakeAt(visit)]).toEqual([true, HEDGE_MS]);
  });

  it("with a fresh token another instance kept: answers with it as the table's", () => {
    const theirs = token('theirs', 1000, { by: 'there' });
    const { visit, actions } = run(start(), [read(keeping(theirs)), 3]);

    expect(answerOf(actions)).toEqual({ kind: 'token', entry: theirs, from: 'table', runningAt: theirs.receivedAt });
    expect(visitOver(visit)).toBe(true);
  });

  it('reads the holds before it claims a key whose memory answered, when the item shows nothing usable', () => {
    const mine = token('mine', 1000);
    const { visit, actions } = run(start({ memory: { ...NOTHING, entry: mine } }), [
      read(item({ memo: memo({ rejectedAt: epoch(-10) }) })),
      3,
    ]);

    expect(kinds(actions)).toEqual(['write:claim', 'read-holds']);
    expect([visit.seen, visit.holds.kind]).toEqual([undefined, 'reading']);
  });

  it("with a live claim: waits for it, says the holder's deadline ends by its time left as the read ended, and polls every twentieth of what is left, at most 100 ms", () => {
    const { visit, actions } = run(start(), [read(claimed({ leftMs: 4900 }), 0), 10]);

    expect(actions).toEqual([{ kind: 'waits', until: 2 + 4900 }]);
    expect([visit.situation.kind, wakeAt(visit)]).toEqual(['waiting', 110]);
  });

  it('with a hold in the item: fails with it as the fleet dated it', () => {
    const hold = failure('upstream_throttled', 2000);
    const { actions } = run(start(), [holds(undefined), 1], [read(item({ ended: [ended('x', { kind: 'failure', failure: hold })] })), 3]);

    expect(answerOf(actions)).toMatchObject({ kind: 'failure', failure: hold, cause: 'hold', scope: 'key', metAt: epoch(3) });
  });
});

describe('a claim', () => {
  it('that lost to its own claim, which landed though its answer said otherwise: holds it and asks the IdP', () => {
    const { visit, actions } = run(
      start(),
      [read(undefined, 0, UNVERSIONED), 2],
      [holds(undefined), 3],
      [wrote('claim', lost(claimed({ holder: 'me' }))), 4],
    );

    expect(kinds(actions)).toEqual(['exchange']);
    expect(visit.situation.kind).toBe('holding');
  });

  it('that lost to its own claim before the holds were read: waits for them, within the hedge from now', () => {
    const { visit, actions } = run(start(), [read(undefined, 0, UNVERSIONED), 2], [wrote('claim', lost(claimed({ holder: 'me' }))), 50]);

    expect(actions).toEqual([]);
    expect(visit.situation).toMatchObject({ kind: 'claimed', hedgeAt: 50 });
    expect(kinds(run({ visit, actions }, [holds(undefined), 60]).actions)).toEqual(['exchange']);
  });

  it(`refused ${SETTINGS.maxRefusals} times: goes on without the table`, () => {
    const refused = (ms: number): [VisitEvent, number] => [wrote('claim', lost(undefined, UNVERSIONED)), ms];
    const { visit, actions } = run(start(), [read(undefined, 0, UNVERSIONED), 2], refused(4), refused(6), refused(8));

    expect(actions).toEqual([{ kind: 'exchange', refresh: false, hedged: true }]);
    expect([visit.refusals, visit.situation.kind]).toEqual([3, 'asking']);
  });

  it(`refused the ${SETTINGS.maxRefusals}rd time after the hedge started the exchange: lets the exchange answer, without the table`, () => {
    const refused = (ms: number): [VisitEvent, number] => [wrote('claim', lost(undefined, UNVERSIONED)), ms];
    const hedged = run(start(), [read(undefined, 0, UNVERSIONED), 2], refused(4), refused(6), [tick(HEDGE_MS), HEDGE_MS]);
    const { visit, actions } = run(hedged, refused(250));

    expect(kinds(hedged.actions)).toEqual(['exchange']);
    expect(actions).toEqual([]);
    expect(visit.situation.kind).toBe('asking');
  });

  it('refused once after the hedge started the exchange: decides again from the refusing item, and lets its exchange answer', () => {
    const hedged = run(start(), [read(undefined, 0, UNVERSIONED), 2], [tick(HEDGE_MS), HEDGE_MS]);
    const { visit, actions } = run(hedged, [wrote('claim', lost(undefined, UNVERSIONED)), 250]);

    expect(actions).toEqual([]);
    expect([visit.refusals, visit.situation.kind]).toEqual([1, 'asking']);
  });

  it('still out at the hedge while a hold was read: settles the hold for the waiters instead of asking the IdP', () => {
    const hold = failure('upstream_throttled', 20_000);
    const { visit, actions } = run(start(), [read(undefined, 0, UNVERSIONED), 2], [holds(hold), 3], [tick(HEDGE_MS), HEDGE_MS]);

    expect(kinds(actions)).toEqual(['write:publish']);
    expect(writeOf(actions)?.state.ended).toEqual([ended('me', { kind: 'failure', failure: hold })]);
    expect(visit.situation).toMatchObject({ kind: 'publishing', outcome: { kind: 'failure', failure: hold, cause: 'hold' } });
  });

  it('still out at the deadline: released with no outcome, and the caller answered a timeout', () => {
    const { visit, actions } = run(start({ deadline: monoMs(150) }), [read(undefined, 0, UNVERSIONED), 2], [tick(150), 150]);

    expect(kinds(actions)).toEqual(['write:publish', 'answer']);
    expect(writeOf(actions)?.state).toEqual(item({ memo: EMPTY_MEMO }));
    expect(answerOf(actions)).toMatchObject({ kind: 'failure', cause: 'deadline', failure: { code: 'upstream_timeout' } });
    expect(visit.answered).toBe(true);
  });
});

describe('a holder', () => {
  it('asked to send its exchange while a hold learnt meanwhile forbids it: publishes that hold in its place', () => {
    const hold = failure('upstream_throttled', 9000);
    const { visit, actions } = run(holding(), [{ kind: 'held', hold }, 5]);

    expect(kinds(actions)).toEqual(['write:publish']);
    expect(visit.situation).toMatchObject({ kind: 'publishing', outcome: { failure: hold, cause: 'hold' }, recorded: hold });
  });

  it('answers at its deadline with what it has, and keeps its exchange to publish', () => {
    const { visit, actions } = run(holding(), [tick(5000), 5000]);

    expect(answerOf(actions)).toMatchObject({ kind: 'failure', cause: 'deadline' });
    expect(visit.situation.kind).toBe('asking');
    expect(kinds(run({ visit, actions }, [gotToken(token('late', -5100)), 5100]).actions)).toEqual(['met', 'write:publish']);
  });

  it('keeps a token it knows when the IdP rejects the key by a wall clock set back before that token', () => {
    const due = token('due', 3_215_000);
    const inWindow = run(start({ memory: { ...NOTHING, entry: due } }), [read(keeping(due), 0, revs('r1')), 2]);
    const asking = run(inWindow, [wrote('claim', WON), 3], [holds(undefined), 4]);
    // The wall clock went back an hour: the 401 is dated before the token was received.
    const { visit } = step(asking.visit, gotFailure(failure('unauthorized', 5000)), { epoch: epochMs(T0 - 3_600_000), mono: monoMs(50) });

    expect(kinds(asking.actions)).toEqual(['exchange']);
    expect(visit.seen).toEqual(due);
  });

  it('whose outcome a waiter marked meanwhile: publishes again over the claim with the marks carried', () => {
    const got = run(holding(), [gotToken(token('new', -50)), 50]);
    const marked = claimed({ holder: 'me', echoes: ['w1'] });
    const { actions } = run(got, [wrote('publish', lost(marked)), 52]);

    expect(kinds(actions)).toEqual(['write:publish']);
    expect(writeOf(actions)).toMatchObject({ expected: revs('r2') });
  });

  it('answers a hold its own exchange met with the longer one a refused publication showed', () => {
    const short = failure('upstream_throttled', 1000);
    const longer = failure('upstream_throttled', 30_000);
    const got = run(holding(), [gotFailure(short), 50]);
    const { actions } = run(
      got,
      [wrote('publish', lost(item({ ended: [ended('x', { kind: 'failure', failure: longer })] }))), 52],
      [wrote('publish', WON), 54],
    );

    expect(answerOf(actions)).toMatchObject({ kind: 'failure', failure: longer, metAt: epoch(54) });
  });
});

describe('a holder another took the place of', () => {
  // Seed 14844706: a no-cache request outlasting a refresh took its claim, failed at once, and left the item idle while
  // the refresh still ran; another instance then refreshed too.

  it('reads the item every renewal, and looks again while the claim that took its place stands', () => {
    const { visit, actions } = displaced();
    expect(actions).toEqual([]);
    expect(visit.situation).toMatchObject({ kind: 'displaced', claim: { holder: 'me', beat: 1 } });
    expect(wakeAt(visit)).toBe(256 + SETTINGS.renewEveryMs);

    const looking = run({ visit, actions }, [tick(506), 506]);
    expect(kinds(looking.actions)).toEqual(['read']);
    expect(wakeAt(looking.visit)).toBe(5000);
    const still = run(looking, [read(claimed({ holder: 'taker', beat: 1 }), 506, revs('r3')), 508]);
    expect(still.actions).toEqual([]);
    expect(wakeAt(still.visit)).toBe(508 + SETTINGS.renewEveryMs);
    // A look that fails is tried again at the next renewal.
    expect(wakeAt(run(looking, [READ_FAILED, 508]).visit)).toBe(508 + SETTINGS.renewEveryMs);
    expect(wakeAt(run(still, [READ_FAILED, 509]).visit)).toBe(508 + SETTINGS.renewEveryMs);
  });

  it('claims again above the beat its claim came back with, or over an idle or absent item, and publishes in its place', () => {
    const looking = run(displaced(), [tick(506), 506]);
    const back = run(looking, [read(claimed({ holder: 'me', beat: 7 }), 506, revs('r4')), 508]);
    expect(writeOf(back.actions, 'renew')).toMatchObject({
      expected: revs('r4'),
      state: { activity: { kind: 'claim', claim: { holder: 'me', beat: 8, leftMs: 4492 } } },
    });
    const idle = run(looking, [read(item({ ended: [answeredBy('taker', 300)] }), 506, revs('r5')), 508]);
    expect(writeOf(idle.actions, 'renew')).toMatchObject({
      state: { activity: { kind: 'claim', claim: { holder: 'me', beat: 2 } }, ended: [answeredBy('taker', 300)] },
    });
    const absent = run(looking, [read(undefined, 506, UNVERSIONED), 508]);
    expect(writeOf(absent.actions, 'renew')).toMatchObject({ expected: UNVERSIONED, state: { memo: EMPTY_MEMO, ended: [] } });

    const published = run(displaced(), [gotToken(token('new', -300)), 300]);
    expect(writeOf(published.actions, 'publish')).toMatchObject({
      state: { activity: { kind: 'claim', claim: { holder: 'taker' } }, ended: [{ holder: 'me', outcome: { kind: 'answered' } }] },
    });
    // Its outcome names the holders its own claim took over from, for their waiters.
    const heir = run(
      start(),
      [read(undefined, 0, UNVERSIONED), 2],
      [holds(undefined), 3],
      [wrote('claim', lost(claimed({ holder: 'me', lineage: ['old'] }))), 4],
      [tick(254), 254],
      [wrote('renew', lost(claimed({ holder: 'taker', lineage: ['old', 'me'] }))), 256],
      [gotToken(token('new', -300)), 300],
    );
    expect(writeOf(heir.actions, 'publish')?.state.ended.at(-1)).toMatchObject({ holder: 'me', lineage: ['old'] });
  });

  it('goes on without the table when its own claim keeps changing under it', () => {
    const changing = (n: number) => lost(claimed({ holder: 'me', beat: n }));
    const { visit } = run(
      holding(),
      [tick(254), 254],
      [wrote('renew', changing(0)), 256],
      [wrote('renew', changing(1)), 258],
      [wrote('renew', changing(2)), 260],
    );
    expect(visit.situation.kind).toBe('asking');
  });
});

describe('a request that outlasts a live holder', () => {
  // The holder's deadline ends by 1502 (its 1500 ms left as the read ended): this request's 5000 outlast it.
  const over = claimed({ leftMs: 1500, beat: 3 }, { ended: [answeredBy('third', -50, 'unshared')] });
  const taker = () => run(start(), [read(over, 0), 2], [wrote('claim', WON), 3], [holds(undefined), 4]);

  it("takes its claim, and gives it back renewed with its outcome while that holder's exchange may still run", () => {
    const { actions } = run(taker(), [gotFailure(failure('upstream_error', 1100)), 100]);
    expect(writeOf(actions, 'publish')).toMatchObject({
      state: {
        activity: { kind: 'claim', claim: { holder: 'other', beat: 4 } },
        ended: [{ holder: 'third' }, { holder: 'me', lineage: ['other'] }],
      },
    });
  });

  it('names the holder it took over from in a hold it settles for the waiters, its claim held or still out', () => {
    const hold = failure('upstream_throttled', 9000);
    const held = run(start(), [read(over, 0), 2], [wrote('claim', WON), 3], [holds(hold), 4]);
    const out = run(start(), [read(over, 0), 2], [holds(hold), 3], [tick(HEDGE_MS), HEDGE_MS]);

    for (const { actions } of [held, out]) {
      expect(writeOf(actions, 'publish')?.state.ended.at(-1)).toEqual(ended('me', { kind: 'failure', failure: hold }, ['other']));
    }
  });

  it('gives nothing back once that holder published, or its deadline passed', () => {
    const published = run(
      taker(),
      [gotFailure(failure('upstream_error', 1100)), 100],
      [
        wrote(
          'publish',
          lost(claimed({ holder: 'me', lineage: ['other'] }, { ended: [answeredBy('third', 40, 'unshared'), answeredBy('other', 50)] })),
        ),
        102,
      ],
    );
    expect(writeOf(published.actions, 'publish')).toMatchObject({ state: { activity: { kind: 'idle' } } });
    const late = run(taker(), [gotToken(token('new', -1502)), 1502]);
    expect(writeOf(late.actions, 'publish')).toMatchObject({ state: { activity: { kind: 'idle' } } });
    const inTime = run(taker(), [gotToken(token('new', -1501)), 1501]);
    expect(writeOf(inTime.actions, 'publish')).toMatchObject({ state: { activity: { kind: 'claim' } } });
  });

  it('gives nothing back when it took over a silent holder, or claimed over no claim', () => {
    const silent = run(
      start(),
      [read(claimed({ leftMs: 4900 }), 0), 2],
      [tick(102), 102],
      [read(claimed({ leftMs: 4900 }), 800), 802],
      [wrote('claim', WON), 803],
      [holds(undefined), 804],
      [gotFailure(failure('upstream_error', 2000)), 900],
    );
    expect(writeOf(silent.actions, 'publish')).toMatchObject({ state: { activity: { kind: 'idle' } } });
    expect(writeOf(run(holding(), [gotFailure(failure('upstream_error', 1100)), 100]).actions, 'publish')).toMatchObject({
      state: { activity: { kind: 'idle' } },
    });
  });
});

describe('a waiter', () => {
  /** Waiting on `other`'s claim, seen at 0 and renewed at 300: due to mark it. */
  const marking = () => run(start(), [read(claimed(), 0), 2], [tick(102), 102], [read(claimed({ beat: 1 }), 300), 302]);

  it('marks a claim it has watched for 250 ms, and knows its fate unknown when the mark has no answer', () => {
    const due = marking();
    const { visit } = run(due, [wrote('mark', FAILED_WRITE), 305]);

    expect(kinds(due.actions)).toEqual(['write:mark', 'waits']);
    expect(visit.watch.current?.mark).toBe('unknown');
    expect(wakeAt(visit)).toBeGreaterThan(305);
  });

  it("takes a holder's token that the item no longer keeps as no answer, and answers the token the item keeps", () => {
    const older = token('older', 60_000, { by: 'there' });
    const state = keeping(older, { ended: [answeredBy('other', 100)] });
    const { actions } = run(start({ noCache: false }), [read(claimed(), 0), 2], [tick(102), 102], [read(state, 200), 202]);

    expect(answerOf(actions)).toEqual({ kind: 'token', entry: older, from: 'table', runningAt: older.receivedAt });
  });
});

describe('a visit without the table', () => {
  it('answers the fresh token memory keeps when its look in the table fails', () => {
    const mine = token('mine', 40_000);
    const { actions } = run(start({ memory: { ...NOTHING, entry: mine } }), [READ_FAILED, 5]);

    expect(answerOf(actions)).toEqual({ kind: 'token', entry: mine, from: 'memory', runningAt: mine.receivedAt });
  });

  it('reads the holds for a key whose tokens are too large to share before it asks the IdP alone', () => {
    const mine = token('mine', 1000);
    const oversize = item({ memo: memo({ oversizeUntil: epoch(3_600_000), rejectedAt: epoch(-10) }) });
    const parked = run(start({ memory: { ...NOTHING, entry: mine } }), [read(oversize), 3]);
    const { actions } = run(parked, [holds(undefined), 6]);

    expect(kinds(parked.actions)).toEqual(['read-holds']);
    expect(actions).toEqual([{ kind: 'exchange', refresh: false, hedged: true }]);
  });
});

describe('what a claim carries of the outcomes before it', () => {
  it('carries the last four once more are still of use, dropping the oldest hold when nothing else is left to drop', () => {
    const hold = (holder: string) => ended(holder, { kind: 'failure', failure: failure('upstream_throttled', -1000) });
    const { actions } = run(start(), [read(item({ ended: ['a', 'b', 'c', 'd', 'e'].map(hold) })), 2]);

    expect(writeOf(actions, 'claim')?.state.ended.map((one) => one.holder)).toEqual(['b', 'c', 'd', 'e']);
  });

  it("keeps waiters' tokens inline while they fit, newest first, and marks the older ones unshared", () => {
    const big = (name: string): StoredToken => ({
      token: { access_token: name.padEnd(SETTINGS.itemTokenBytes / 2, 'x'), expires_in: 20 },
      receivedAt: epoch(-100),
      by: 'there',
      after: epochMs(0),
    });
    const claimWith = (ended: Ended[]) => writeOf(run(start(), [read(item({ ended })), 2]).actions, 'claim')?.state;
    const [squeezed, both] = [
      claimWith([answeredBy('a', -100, big('a')), answeredBy('b', -100, big('b'))]),
      claimWith([answeredBy('b', -100, big('b'))]),
    ];

    expect(squeezed?.ended.map((one) => one.outcome.kind === 'answered' && typeof one.outcome.token)).toEqual(['string', 'object']);
    // One that fills the room to the byte still rides along.
    const shape = big('x');
    const exact = { ...shape, token: { ...shape.token, access_token: '' } };
    const room = SETTINGS.itemTokenBytes - Buffer.byteLength(JSON.stringify(exact.token));
    const filled = { ...exact, token: { ...exact.token, access_token: 'x'.repeat(room) } };
    expect(claimWith([answeredBy('a', -100, filled)])?.ended[0]?.outcome).toMatchObject({ token: filled });
    // The older one's waiters would wait on the next claims in vain: for a while nobody waits on the key's claims.
    expect([squeezed?.memo.oversizeUntil, both?.memo.oversizeUntil]).toEqual([epoch(2 + SETTINGS.oversizeKnownMs), epochMs(0)]);
  });
});

describe('events that no longer concern the visit', () => {
  it.each<[string, () => Step, VisitEvent]>([
    ['an exchange it never sent', () => start(), gotToken(token('x'))],
    ['a hold on an exchange it never sent', () => start(), { kind: 'held', hold: failure('upstream_throttled', 1000) }],
    ['a hold write while nothing waits for it', () => start(), { kind: 'hold-written' }],
    ['a tick before its hedge', () => start(), tick(50)],
    ['a tick while its claim is out, before the hedge', () => run(start(), [read(undefined, 0, UNVERSIONED), 2]), tick(100)],
    [
      'a tick before the hedge of a claim that landed while the holds are read',
      () => run(start(), [read(undefined, 0, UNVERSIONED), 2], [wrote('claim', WON), 3]),
      tick(100),
    ],
    ['a tick before its claim could renew', () => holding(), tick(100)],
    ['a tick before its next poll', () => run(start(), [read(claimed(), 0), 2]), tick(50)],
    ["a tick before a displaced holder's next look", displaced, tick(300)],
    ["a tick while a displaced holder's look is out", () => run(displaced(), [tick(506), 506]), tick(600)],
    ['a read a displaced holder did not ask for', displaced, read(item(), 300)],
    ['a tick after it answered and is done', () => run(start(), [read(keeping(token('t', 0, { by: 'there' }))), 2]), tick(5000)],
  ])('ignores %s', (_case, before, event) => {
    const prior = before();
    const { visit, actions } = step(prior.visit, event, at(event.kind === 'tick' ? event.at : 10));

    expect(actions).toEqual([]);
    expect(visit.situation).toEqual(prior.visit.situation);
  });

  it('ignores a tick of a publication answered before it was due, and of a claim whose hedge came after its exchange', () => {
    const publishing = run(holding(), [gotToken(token('new', -50)), 50]);
    const early = run(publishing, [tick(100), 100]);
    const claiming = run(start(), [read(undefined, 0, UNVERSIONED), 2], [tick(HEDGE_MS), HEDGE_MS]);

    expect(early.actions).toEqual([]);
    expect(run(claiming, [tick(HEDGE_MS + 10), HEDGE_MS + 10]).actions).toEqual([]);
  });
});

describe("a visit's remembered failure", () => {
  const failed = (holder: string, failed: Remembered) => ended(holder, { kind: 'failure', failure: failed });

  it('is the newest failure still in force: a rejection outlives a later failure whose time is over', () => {
    const state = item({ ended: [failed('a', failure('unauthorized', 4000)), failed('b', failure('upstream_error', 500))] });
    const { actions } = run(start(), [holds(undefined), 1], [read(state), 1000]);

    expect(answerOf(actions)).toMatchObject({ kind: 'failure', failure: failure('unauthorized', 4000), cause: 'failure' });
  });

  it('is the last failure when a token came after the newest one in force', () => {
    const state = item({
      ended: [failed('a', failure('unauthorized', 4000)), answeredBy('b', 300), failed('c', failure('upstream_error', 500))],
    });
    const { actions } = run(start(), [holds(undefined), 1], [read(state, 1000, revs('r1')), 1000]);

    expect(answerOf(actions)).toBeUndefined();
    expect(kinds(actions)).toEqual(['write:claim']);
  });
});

describe("a token's place in the item", () => {
  it('is dated after the rejection the visit knew when it asked, whatever its exchange said', () => {
    const known = { at: epoch(-100), own: false };
    const { actions } = run(holding({ rejection: known }), [gotToken(token('new', -50)), 50]);
    const met = actions.find((action) => action.kind === 'met');

    expect(met).toMatchObject({ outcome: { kind: 'token', entry: { after: epoch(-100) } } });
  });

  it('shares the room for tokens with the kept one: a token that cannot be kept rides along only in what is left', () => {
    const big = (name: string, expiresIn: number, ago = 0) => token(name.padEnd(SETTINGS.itemTokenBytes / 2, 'x'), ago, { expiresIn });
    const publishedWith = (state: KeyItem) => {
      const held = run(start(), [read(state), 2], [wrote('claim', WON), 3], [holds(undefined), 4]);
      const { actions } = run(held, [gotToken(big('short', 20, -50)), 50]);
      return writeOf(actions, 'publish')?.state;
    };
    // The kept token, this instance's own, is in its refresh window: the visit claims the key to refresh it.
    const due = big('kept', 3600, 3_215_000);
    const [squeezed, alone] = [publishedWith(keeping(due)), publishedWith(item())];

    expect(squeezed?.ended.at(-1)?.outcome).toMatchObject({ kind: 'answered', token: 'unshared' });
    expect(alone?.ended.at(-1)?.outcome).toMatchObject({ kind: 'answered', token: { by: 'here' } });
    // Its waiters would otherwise wait on the key's next claims in vain: for a while nobody does.
    expect([squeezed?.memo.oversizeUntil, alone?.memo.oversizeUntil]).toEqual([epoch(50 + SETTINGS.oversizeKnownMs), epochMs(0)]);
  });

  it('gives its own token that cannot be kept the room before those riding along, whose waiters then ask for their own', () => {
    const half = (name: string) => token(name.padEnd(SETTINGS.itemTokenBytes / 2, 'x'), 50, { expiresIn: 20, by: 'there' });
    const riding = item({ ended: [answeredBy('a', -50, stored(half('riding')))] });
    const held = run(start(), [read(riding), 2], [wrote('claim', WON), 3], [holds(undefined), 4]);
    const state = writeOf(
      run(held, [gotToken(token('own'.padEnd(SETTINGS.itemTokenBytes / 2, 'x'), -50, { expiresIn: 20 })), 50]).actions,
      'publish',
    )?.state;

    expect(state?.ended.map((one) => one.outcome.kind === 'answered' && typeof one.outcome.token)).toEqual(['string', 'object']);
    expect(state?.memo.oversizeUntil).toEqual(epoch(50 + SETTINGS.oversizeKnownMs));
  });

  it("gives a kept token's room to waiters once it has expired: it stays as proof of the secret, without its body", () => {
    const big = (name: string, expiresIn: number, ago = 0) => token(name.padEnd(SETTINGS.itemTokenBytes / 2, 'x'), ago, { expiresIn });
    const expired = big('kept', 3600, 3_600_010);
    const held = run(start(), [read(keeping(expired)), 2], [wrote('claim', WON), 3], [holds(undefined), 4]);
    const state = writeOf(run(held, [gotToken(big('short', 20, -50)), 50]).actions, 'publish')?.state;

    expect(state?.ended.at(-1)?.outcome).toMatchObject({ kind: 'answered', token: { by: 'here' } });
    expect(state?.memo.kept).toEqual({ ...stored(expired), token: { access_token: '', expires_in: 3600 } });
  });

  it('too large for any item: the memo knows it, and its expiry when its receiver keeps it, so a later rejection outlives it', () => {
    const published = (expiresIn: number) => {
      const held = run(start(), [read(item()), 2], [wrote('claim', WON), 3], [holds(undefined), 4]);
      const huge = token('huge'.padEnd(SETTINGS.itemTokenBytes + 1, 'x'), -50, { expiresIn });
      return { huge, memo: writeOf(run(held, [gotToken(huge), 50]).actions, 'publish')?.state.memo };
    };
    const kept = published(90_000);

    expect(kept.memo).toMatchObject({
      kept: null,
      keptUntil: epochMs(kept.huge.receivedAt + 90_000_000),
      oversizeUntil: epoch(50 + SETTINGS.oversizeKnownMs),
    });
    expect(published(20).memo).toMatchObject({ kept: null, keptUntil: epochMs(0) });
  });

  it('marks as too large only a token over what an item carries: one of exactly that size, kept or not, is no mark', () => {
    const publishedWith = (expiresIn: number) => {
      const held = run(start(), [read(item()), 2], [wrote('claim', WON), 3], [holds(undefined), 4]);
      const shape = token('', -50, { expiresIn });
      const room = SETTINGS.itemTokenBytes - Buffer.byteLength(JSON.stringify(shape.token));
      const exact = { ...shape, token: { ...shape.token, access_token: 'x'.repeat(room) } };
      return writeOf(run(held, [gotToken(exact), 50]).actions, 'publish')?.state.memo;
    };

    expect([publishedWith(3600)?.oversizeUntil, publishedWith(20)?.oversizeUntil]).toEqual([epochMs(0), epochMs(0)]);
  });

  it('too large to keep in an item though one carries it: unshared, its expiry known while its receiver keeps it (seed 316503088)', () => {
    // A 401 written later lived its 24 h and went; the receiver then answered its token stale, though the 401 came after it.
    const published = (expiresIn: number) => {
      const held = run(start(), [read(item()), 2], [wrote('claim', WON), 3], [holds(undefined), 4]);
      const large = token('large'.padEnd(SETTINGS.maxSharedTokenBytes + 1, 'x'), -50, { expiresIn });
      return { large, state: writeOf(run(held, [gotToken(large), 50]).actions, 'publish')?.state };
    };
    const { large, state } = published(259_200);

    expect(state?.kind === 'key' && state.ended.at(-1)?.outcome).toMatchObject({ kind: 'answered', token: 'unshared' });
    expect(state?.kind === 'key' && state.memo).toMatchObject({
      kept: null,
      keptUntil: epochMs(large.receivedAt + 259_200_000),
      oversizeUntil: epochMs(0),
    });
    expect(published(20).state).toMatchObject({ memo: { keptUntil: epochMs(0) } });
    // One an item keeps is the memo's, its expiry with it.
    const held = run(start(), [read(item()), 2], [wrote('claim', WON), 3], [holds(undefined), 4]);
    const small = token('small', -50, { expiresIn: 259_200 });
    expect(writeOf(run(held, [gotToken(small), 50]).actions, 'publish')?.state).toMatchObject({
      memo: { kept: stored(small), keptUntil: epochMs(small.receivedAt + 259_200_000) },
    });
  });

  it('says its caller has it from the hedge after it came, though writes that failed and lost make the outcome land later (seed 2077319930)', () => {
    // A waiter that came after the caller had it must not take a token that cannot be kept: the rewrite keeps the first moment.
    const short = token('short', -50, { expiresIn: 20 });
    const met = run(holding(), [gotToken(short), 50]);
    const answered = run(met, [tick(50 + HEDGE_MS), 50 + HEDGE_MS]);
    const rewritten = run(answered, [wrote('publish', FAILED_WRITE), 1050], [wrote('publish', lost(item(), revs('r2'), 1052)), 1055]);
    const answerByOf = (step: Step) => {
      const state = writeOf(step.actions, 'publish')?.state;
      const outcome = state?.kind === 'key' ? state.ended.at(-1)?.outcome : undefined;
      return outcome?.kind === 'answered' ? outcome.answerBy : undefined;
    };

    expect(answerOf(answered.actions)).toMatchObject({ kind: 'token' });
    expect([answerByOf(met), answerByOf(rewritten)]).toEqual([epoch(50 + HEDGE_MS), epoch(50 + HEDGE_MS)]);
  });

  it('is not taken by a visit that never read the item: it writes over it as absent', () => {
    const hedged = run(start(), [tick(HEDGE_MS), HEDGE_MS]);
    const { actions } = run(hedged, [gotToken(token('new', -HEDGE_MS - 10)), HEDGE_MS + 10]);

    expect(kinds(hedged.actions)).toEqual(['exchange']);
    expect(writeOf(actions, 'publish')?.expected).toEqual(UNVERSIONED);
  });
});

describe('after a pepper switch', () => {
  it('claims without sharing a token this instance received before the switch', () => {
    // In its refresh window: the visit claims the key to refresh it, with the token it knows in the claim's memo.
    const due = token('due', 3_215_000);
    const claimMemo = (pepperSwitchedAt: EpochMs) =>
      writeOf(run(start({ memory: { ...NOTHING, entry: due }, pepperSwitchedAt }), [read(undefined, 0, UNVERSIONED), 2]).actions, 'claim')
        ?.state.memo.kept;

    expect([claimMemo(epoch(-3_215_001)), claimMemo(epoch(-3_215_000))]).toEqual([stored(due), null]);
  });
});

describe('after a pepper switch, a token memory kept from before', () => {
  it('stands in for a failure once the new item shows that very receipt, though memory holds its own copy of it', () => {
    const copy = token('copy', 3_400_000, { by: 'there' });
    const failedWith = (state: KeyItem) =>
      answerOf(
        run(start({ memory: { ...NOTHING, entry: copy }, pepperSwitchedAt: epoch(-1000) }), [holds(undefined), 1], [read(state), 2])
          .actions,
      );
    const failing = [ended('other', { kind: 'failure', failure: failure('upstream_error', 1000) })];

    // The item's token by the same receiver a moment earlier, or by another at the same moment: another receipt.
    const earlier = { ...copy, receivedAt: epochMs(copy.receivedAt - 1) };
    const elsewhere = { ...copy, receivedBy: 'elsewhere' };

    expect(failedWith(keeping(copy, { ended: failing }))).toMatchObject({ kind: 'failure', kept: copy });
    expect(failedWith(item({ ended: failing }))).toMatchObject({ kind: 'failure', kept: undefined });
    expect(failedWith(keeping(earlier, { ended: failing }))).toMatchObject({ kind: 'failure', kept: undefined });
    expect(failedWith(keeping(elsewhere, { ended: failing }))).toMatchObject({ kind: 'failure', kept: undefined });
  });

  it('keeps standing in once an item showed it, when a later read shows it no more', () => {
    const copy = token('copy', 3_400_000, { by: 'there' });
    const failing = [ended('other', { kind: 'failure', failure: failure('upstream_error', 1000) })];
    const waiting = run(
      start({ memory: { ...NOTHING, entry: copy }, pepperSwitchedAt: epoch(-1000) }),
      [holds(undefined), 1],
      [read(claimed({}, { memo: memo({ kept: stored(copy) }) })), 2],
    );
    const { actions } = run(waiting, [tick(102), 102], [read(claimed({}, { ended: failing }), 150), 152]);

    expect(answerOf(actions)).toMatchObject({ kind: 'failure', kept: copy });
  });
});

describe("a waiter finds its holder's outcome", () => {
  /** Waiting on `other`'s claim, read at 0: its next poll is due at 102. */
  const waitingOn = (parts: Partial<VisitAsk> = {}) => run(start(parts), [read(claimed(), 0), 2], [tick(102), 102]);
  const unkeepable = (receivedMs: number, by = 'there'): Entry => ({ ...token('short', -receivedMs, { by, expiresIn: 20 }) });
  // A token that cannot be kept, received and answered before the request came: only a holder seen running after it came gives it.
  const answeredBefore = (holder: string): Ended =>
    ended(holder, { kind: 'answered', receivedAt: epoch(-100), until: epoch(5000), answerBy: epoch(-50), token: stored(unkeepable(-100)) });

  it('a token that cannot be kept, received while it waited: its answer, through the table', () => {
    const short = unkeepable(100);
    const { actions } = run(waitingOn(), [read(item({ ended: [answeredBy('other', 100, stored(short))] }), 150), 152]);

    expect(answerOf(actions)).toEqual({ kind: 'token', entry: short, from: 'table', runningAt: short.receivedAt });
  });

  it('no token when its holder could not share it, nor one received before this request came: it asks on', () => {
    const unshared = run(waitingOn(), [read(item({ ended: [answeredBy('other', 100, 'unshared')] }), 150), 152]);
    const before = run(waitingOn({ arrivedAt: epoch(50) }), [
      read(item({ ended: [answeredBy('other', 10, stored(unkeepable(10)))] }), 150),
      152,
    ]);

    expect([kinds(unshared.actions), kinds(before.actions)]).toEqual([['write:claim'], ['write:claim']]);
  });

  it('no kept token past its freshness (an old outcome written back): it asks on', () => {
    const stale = token('old', 3_500_000, { by: 'there' });
    const { actions } = run(waitingOn(), [read(item({ ended: [answeredBy('other', -3_500_000, stored(stale))] }), 150), 152]);

    expect(kinds(actions)).toEqual(['write:claim']);
  });

  it('a failure still in force: its answer, though dated before this request came; one whose time is over: no answer', () => {
    const failed = (untilMs: number) => item({ ended: [ended('other', { kind: 'failure', failure: failure('upstream_error', untilMs) })] });
    const inForce = run(waitingOn(), [read(failed(900), 150), 152]);
    const over = run(waitingOn(), [read(failed(100), 150), 152]);

    expect(answerOf(inForce.actions)).toMatchObject({ kind: 'failure', failure: failure('upstream_error', 900), cause: 'exchange' });
    expect(answerOf(over.actions)).toBeUndefined();
  });

  it("for a no-cache request, its holder's hold, though the holder was running before it came", () => {
    const held = item({ ended: [ended('other', { kind: 'failure', failure: failure('upstream_throttled', 900) })] });

    expect(answerOf(run(waitingOn({ noCache: true }), [read(held, 150), 152]).actions)).toMatchObject({
      failure: failure('upstream_throttled', 900),
    });
  });

  it('for a no-cache request, no failure dated before it came of an exchange it never saw running after it came, and no token older than 5 s', () => {
    // An upstream_error is remembered 1 s: one until 999 happened 1 ms before the request came (at 0).
    const failed = (untilMs: number) => item({ ended: [ended('other', { kind: 'failure', failure: failure('upstream_error', untilMs) })] });
    const old = token('old', 6000, { by: 'there' });
    const oldToken = item({ memo: memo({ kept: stored(old) }), ended: [answeredBy('other', -6000)] });

    expect(answerOf(run(waitingOn({ noCache: true }), [read(failed(999), 150), 152]).actions)).toBeUndefined();
    expect(answerOf(run(waitingOn({ noCache: true }), [read(oldToken, 150), 152]).actions)).toBeUndefined();
    // Dated as it came, by its writer's clock: the exchange it saw at its first look ended after (seed 415170541).
    expect(answerOf(run(waitingOn({ noCache: true }), [read(failed(1000), 150), 152]).actions)).toMatchObject({
      failure: failure('upstream_error', 1000),
      cause: 'exchange',
    });
  });

  it('for a no-cache request, no failure dated before it came, however it saw the exchange run: copies written back replay claims and renewals', () => {
    const renewed = run(waitingOn({ noCache: true }), [read(claimed({ beat: 1 }), 102), 104]);
    // An upstream_error is remembered 1 s: one until 900 was dated 100 ms before the request came.
    const failedBy = (holder: string, untilMs: number, lineage: string[] = []) =>
      item({ ended: [ended(holder, { kind: 'failure', failure: failure('upstream_error', untilMs) }, lineage)] });
    const after = (state: KeyItem) => answerOf(run(renewed, [tick(210), 210], [read(state, 210), 212]).actions);

    expect(after(failedBy('other', 900))).toBeUndefined();
    expect(after(failedBy('taker', 900, ['other']))).toBeUndefined();
    expect(kinds(run(renewed, [tick(210), 210], [read(failedBy('other', 900), 210), 212]).actions)).toEqual(['write:claim']);
    // Dated as it came by its writer's clock, its holder's failure or a taker's answers.
    expect(after(failedBy('other', 1000))).toMatchObject({ failure: failure('upstream_error', 1000), cause: 'exchange' });
    expect(after(failedBy('taker', 1000, ['other']))).toMatchObject({ failure: failure('upstream_error', 1000), cause: 'exchange' });
  });

  it('takes no token that cannot be kept, received before it came, of a holder it saw end before its claim came back: old copies written back re-enact it (seed 1079769665)', () => {
    const rejected = answeredBefore('old');
    const sawEnd = run(start({ noCache: true }), [read(claimed({ holder: 'first' }, { ended: [rejected] }), 0), 2], [tick(102), 102]);
    const replayed = (beat: number) => read(claimed({ holder: 'old', beat }), 102);
    const again = item({ ended: [rejected] });
    const first = run(sawEnd, [replayed(0), 104], [tick(210), 210]);
    const renewed = run(first, [read(claimed({ holder: 'old', beat: 1 }), 210), 212], [tick(320), 320]);

    expect(answerOf(run(first, [read(again, 210), 212]).actions)).toBeUndefined();
    expect(answerOf(run(renewed, [read(again, 320), 322]).actions)).toBeUndefined();
    // Not seen ended first, the same claims are an exchange that ran after it came: its token answers.
    const unseen = run(start({ noCache: true }), [read(claimed({ holder: 'first' }), 0), 2], [tick(102), 102], [replayed(0), 104]);
    expect(answerOf(run(unseen, [tick(210), 210], [read(again, 210), 212]).actions)).toMatchObject({
      kind: 'token',
      runningAt: epoch(0),
    });
  });

  it('remembers the holders it read ended, each once, the last eight: an old claim of one is no exchange after it came', () => {
    // Each brought a token that cannot be kept before the request came: only a holder running after it came gives it.
    const failedAt = (holder: string) => answeredBefore(holder);
    // Looks 110 ms apart (it polls every 100 ms at most), each at a claim of 'first' beside the outcomes of `holders`.
    const reads = (...lists: string[][]) =>
      lists.reduce(
        (step, holders, index) =>
          run(
            step,
            [tick(110 * index), 110 * index],
            [read(claimed({ holder: 'first' }, { ended: holders.map(failedAt) }), 110 * index), 110 * index + 2],
          ),
        start({ noCache: true }),
      );
    // Then the claim of `holder` written back, then its outcome: answered only if the visit forgot the holder.
    const replayed = (step: Step, holder: string) =>
      answerOf(
        run(
          step,
          [tick(330), 330],
          [read(claimed({ holder }), 330), 332],
          [tick(440), 440],
          [read(item({ ended: [failedAt(holder)] }), 440), 442],
        ).actions,
      );
    const twelve = reads(['h1', 'h2', 'h3', 'h4'], ['h5', 'h6', 'h7', 'h8'], ['h9', 'h10', 'h11', 'h12']);

    expect(replayed(reads(['x', 'a', 'b', 'c'], ['a', 'b', 'c', 'd'], ['a', 'b', 'c', 'd']), 'x')).toBeUndefined();
    expect(replayed(twelve, 'h5')).toBeUndefined();
    expect(replayed(twelve, 'h4')).toMatchObject({ kind: 'token' });
  });

  it('counts a claim as run after it came when first read after its first look, not a holder it saw before, back at the same beat', () => {
    const { visit } = run(
      start({ noCache: true }),
      [read(claimed({ holder: 'a' }), 0), 2],
      [tick(110), 110],
      [read(claimed({ holder: 'b' }), 110), 112],
      [tick(220), 220],
      [read(claimed({ holder: 'a' }), 220), 222],
    );

    // Since the look before: it was written in between.
    expect(visit.ranAfter).toEqual([['b', epoch(0)]]);
  });

  it('sees no renewal in a claim read again at the same beat: only a higher one ran after it came', () => {
    const old = item({ ended: [answeredBefore('other')] });
    const twice = run(waitingOn({ noCache: true }), [read(claimed(), 102), 104], [tick(210), 210]);
    const renewed = run(waitingOn({ noCache: true }), [read(claimed({ beat: 1 }), 102), 104], [tick(210), 210]);

    expect(answerOf(run(twice, [read(old, 210), 212]).actions)).toBeUndefined();
    expect(answerOf(run(renewed, [read(old, 210), 212]).actions)).toMatchObject({ kind: 'token', runningAt: epoch(0) });
  });

  it('sees no renewal in a claim that does not echo its landed mark: a copy written back replays renewals, not the mark', () => {
    const old = item({ ended: [answeredBefore('other')] });
    // Renewed at 102 and 260 as far as beats tell; watched 250 ms by then, it marks the claim.
    const watched = run(
      waitingOn({ noCache: true }),
      [read(claimed({ beat: 1 }), 102), 104],
      [tick(210), 210],
      [read(claimed({ beat: 2 }), 260), 262],
    );
    const landed = run(watched, [wrote('mark', WON), 263]);
    const next = (from: Step, claim: Partial<ClaimFacts>) => run(from, [tick(363), 363], [read(claimed(claim), 363), 365]);
    const echoed = next(landed, { beat: 3, echoes: ['me'] });
    const replayed = next(landed, { beat: 3 });
    // Its mark's write unanswered, then read back in the claim at the same beat: landed too.
    const readBack = next(run(watched, [wrote('mark', FAILED_WRITE), 263]), { beat: 2, echoes: ['me'] });

    expect(kinds(watched.actions)).toEqual(['write:mark', 'waits']);
    expect([watched.visit.ranAfter, landed.visit.ranAfter, readBack.visit.ranAfter]).toEqual([[['other', epoch(102)]], [], []]);
    expect([echoed.visit.ranAfter, replayed.visit.ranAfter]).toEqual([[['other', epoch(260)]], []]);
    expect(answerOf(run(landed, [tick(363), 363], [read(old, 363), 365]).actions)).toBeUndefined();
    expect(answerOf(run(readBack, [tick(465), 465], [read(old, 465), 467]).actions)).toBeUndefined();
    // A renewal that echoes the mark is the holder's own, made after the request came: its token answers.
    expect(answerOf(run(echoed, [tick(465), 465], [read(old, 465), 467]).actions)).toMatchObject({ kind: 'token', runningAt: epoch(260) });
    // It stays proof when the echoing claim is read again; and a mark landing on one holder leaves another's renewals be.
    const again = run(echoed, [tick(465), 465], [read(claimed({ beat: 3, echoes: ['me'] }), 465), 467]);
    expect(again.visit.ranAfter).toEqual([['other', epoch(260)]]);
    const taker = run(
      start({ noCache: true }),
      [read(claimed({ holder: 'a' }), 0), 2],
      [tick(102), 102],
      [read(claimed({ holder: 'a', beat: 1 }), 102), 104],
      [tick(206), 206],
      [read(claimed({ lineage: ['a'] }), 206), 208],
      [tick(360), 360],
      [read(claimed({ lineage: ['a'] }), 460), 462],
    );
    expect([kinds(taker.actions), run(taker, [wrote('mark', WON), 463]).visit.ranAfter.map(([holder]) => holder)]).toEqual([
      ['write:mark', 'waits'],
      ['a'],
    ]);
  });

  it('for a no-cache request, no failure of a taker whose claim it saw before the holder that taker displaced ran again (seed 18115)', () => {
    // It came while 'taker' ran (taken over from 'old'); the taker failed just before it came and gave 'old' its claim back.
    const givenBack = item({
      activity: { kind: 'claim', claim: claimFacts({ holder: 'old', beat: 5 }) },
      ended: [ended('taker', { kind: 'failure', failure: failure('upstream_error', 990) }, ['old'])],
    });
    const sawTaker = run(start({ noCache: true }), [read(claimed({ holder: 'taker', lineage: ['old'] }), 0), 2], [tick(102), 102]);

    expect(answerOf(run(sawTaker, [read(givenBack, 102), 104]).actions)).toBeUndefined();
    // Nor when it saw another claim between.
    const sawAnother = run(sawTaker, [read(claimed({ holder: 'another' }), 102), 104], [tick(204), 204]);
    expect(answerOf(run(sawAnother, [read(givenBack, 204), 206]).actions)).toBeUndefined();
  });

  it('for a no-cache request, no failure of a taker dated before it came, though the holder it took over from renews after: it may have ended before the request came and given that holder its claim back', () => {
    // 'taker' took over from 'other', failed just before the request came, and gave 'other' its claim back: then 'other' renews.
    const givenBack = (beat: number) =>
      item({
        activity: { kind: 'claim', claim: claimFacts({ beat }) },
        ended: [ended('taker', { kind: 'failure', failure: failure('upstream_error', 990) }, ['other'])],
      });
    const looks = (first: KeyItem) =>
      run(
        start({ noCache: true }),
        [read(first, 0), 2],
        [tick(102), 102],
        [read(givenBack(6), 102), 104],
        [tick(206), 206],
        [read(givenBack(7), 206), 208],
      );
    const renewed = looks(givenBack(5));

    expect([answerOf(renewed.actions), renewed.visit.ranAfter]).toEqual([undefined, [['other', epoch(102)]]]);
    // Published since its first look, it may be the outcome of a takeover made after the request came, or a copy written back.
    expect(answerOf(looks(claimed({ beat: 5 })).actions)).toBeUndefined();
  });

  it('a timeout published since its last look binds it once no more than a fifth of its deadline is left', () => {
    const timedOut = item({ ended: [ended('other', { kind: 'failure', failure: failure('upstream_timeout', 1000) })] });
    const outlasting = run(waitingOn({ deadline: monoMs(1153) }), [read(timedOut, 150), 152]);
    const bound = run(waitingOn({ deadline: monoMs(1152) }), [read(timedOut, 150), 152]);

    expect([answerOf(outlasting.actions), outlasting.visit.outlasts]).toEqual([undefined, ['other']]);
    expect([answerOf(bound.actions), bound.visit.outlasts]).toEqual([expect.objectContaining({ kind: 'failure' }), []]);
  });

  it("a timeout at its holder's deadline, remembered by nobody, that it waited on: shared unless outlasted (seed 7609)", () => {
    // Cut short by the holder's deadline, it is over (until now, 152): those who waited on it share it all the same.
    const timedOut = (untilMs: number) =>
      item({ ended: [ended('other', { kind: 'failure', failure: failure('upstream_timeout', untilMs) })] });
    const bound = run(waitingOn({ deadline: monoMs(1152) }), [read(timedOut(152), 150), 152]);
    const outlasting = run(waitingOn({ deadline: monoMs(1153) }), [read(timedOut(152), 150), 152]);
    // One that never waited on it has news of an exchange that ended before it came: it asks itself.
    const stranger = run(start({ deadline: monoMs(1152) }), [read(timedOut(140), 150), 151], [holds(undefined), 152]);

    expect(answerOf(bound.actions)).toMatchObject({ kind: 'failure', cause: 'deadline', failure: { code: 'upstream_timeout' } });
    expect(kinds(bound.actions)).not.toContain('write:claim');
    expect([answerOf(outlasting.actions), kinds(outlasting.actions)]).toEqual([undefined, ['write:claim']]);
    expect([answerOf(stranger.actions), stranger.visit.situation.kind]).toEqual([undefined, 'claiming']);
  });

  it('a timeout it saw at an earlier look, dated before it came: never outlasted, however much is left', () => {
    // A no-cache request takes no failure from before it came: it waits on the holder, and the timeout stays in the item.
    const timedOut = [ended('other', { kind: 'failure', failure: failure('upstream_timeout', 999) })];
    const first = run(start({ noCache: true }), [read(claimed({}, { ended: timedOut }), 0), 2], [tick(102), 102]);
    const { visit } = run(first, [read(claimed({ beat: 1 }, { ended: timedOut }), 102), 104]);

    expect(visit.outlasts).toEqual([]);
    expect(visit.situation.kind).toBe('waiting');
  });

  it('a timeout published since its last look, beside an outcome it saw there: outlasted', () => {
    const past = ended('past', { kind: 'failure', failure: failure('upstream_error', -500) });
    const first = run(start(), [read(claimed({}, { ended: [past] }), 0), 2], [tick(102), 102]);
    const timedOut = ended('other', { kind: 'failure', failure: failure('upstream_timeout', 1000) });
    const { visit, actions } = run(first, [read(item({ ended: [past, timedOut] }), 150), 152]);

    expect(visit.outlasts).toEqual(['other']);
    expect(answerOf(actions)).toBeUndefined();
  });

  it('a timeout seen at its first look: outlasted only if dated after it came, with more than a fifth of its deadline left', () => {
    const timedOut = (untilMs: number) =>
      item({ ended: [ended('other', { kind: 'failure', failure: failure('upstream_timeout', untilMs) })] });
    // The holds are read beside the item: it decides once both are in.
    const look = (untilMs: number, deadlineMs = 5000) =>
      run(start({ deadline: monoMs(deadlineMs) }), [read(timedOut(untilMs), 0), 1], [holds(undefined), 2]);
    const [outlasting, cameAfter, short] = [look(1001), look(1000), look(1001, 1001)];

    expect(outlasting.visit.outlasts).toEqual(['other']);
    expect(answerOf(outlasting.actions)).toBeUndefined();
    for (const bound of [cameAfter, short]) {
      expect(bound.visit.outlasts).toEqual([]);
      expect(answerOf(bound.actions)).toMatchObject({ kind: 'failure', failure: { code: 'upstream_timeout' } });
    }
  });

  it('a timeout it outlasts (published since its last look, with more than a fifth of its deadline left): no answer, it asks itself', () => {
    const timedOut = item({ ended: [ended('other', { kind: 'failure', failure: failure('upstream_timeout', 1000) })] });
    const { visit, actions } = run(waitingOn(), [read(timedOut, 150), 152]);

    expect(answerOf(actions)).toBeUndefined();
    expect(kinds(actions)).toEqual(['write:claim']);
    expect(visit.outlasts).toEqual(['other']);
    // A claim made after a wait hedges from now.
    expect(wakeAt(visit)).toBe(152 + HEDGE_MS);
  });
});

describe('a waiter whose look fails', () => {
  it('asks the IdP meanwhile and polls on; its own failure waits for the holder, whose token then answers', () => {
    const waiting = run(start(), [read(claimed(), 0), 2], [tick(102), 102]);
    const asked = run(waiting, [READ_FAILED, 104]);
    const failed = run(asked, [gotFailure(failure('upstream_error', 1200)), 200]);
    const theirs = token('theirs', -250, { by: 'there' });
    const { actions } = run(
      failed,
      [tick(failed.visit.situation.kind === 'waiting' ? (failed.visit.situation.pollAt ?? 0) : 0), 300],
      [read(item({ memo: memo({ kept: stored(theirs) }), ended: [answeredBy('other', 250)] }), 300), 302],
    );

    expect(kinds(asked.actions)).toEqual(['exchange']);
    expect(kinds(failed.actions)).toEqual(['met']);
    expect(answerOf(actions)).toEqual({ kind: 'token', entry: theirs, from: 'table', runningAt: theirs.receivedAt });
  });

  it('answers its own failure once the holder is gone with no outcome, having asked once already', () => {
    const waiting = run(start(), [read(claimed(), 0), 2], [tick(102), 102]);
    const asked = run(waiting, [READ_FAILED, 104]);
    const own = failure('upstream_error', 1200);
    const failed = run(asked, [gotFailure(own), 200]);
    const { actions } = run(
      failed,
      [tick(failed.visit.situation.kind === 'waiting' ? (failed.visit.situation.pollAt ?? 0) : 0), 300],
      [read(item(), 300), 302],
    );

    expect(answerOf(actions)).toMatchObject({ kind: 'failure', failure: own, cause: 'exchange' });
  });

  it("answers the IdP's own 429 with its seconds when the holder's hold ends no later, and the holder's when it ends later", () => {
    const waiting = run(start(), [read(claimed(), 0), 2], [tick(102), 102]);
    const asked = run(waiting, [READ_FAILED, 104]);
    const own = failure('upstream_throttled', 5200);
    const failed = run(asked, [gotFailure(own), 200]);
    const pollAt = failed.visit.situation.kind === 'waiting' ? (failed.visit.situation.pollAt ?? 0) : 0;
    const holderHold = (untilMs: number) =>
      answerOf(
        run(
          failed,
          [tick(pollAt), 300],
          [read(item({ ended: [ended('other', { kind: 'failure', failure: failure('upstream_throttled', untilMs) })] }), 300), 302],
        ).actions,
      );

    expect(holderHold(5250)).toMatchObject({ failure: own, metAt: epoch(200) });
    expect(holderHold(9000)).toMatchObject({ failure: failure('upstream_throttled', 9000) });
  });

  it("tells the holder's hold, shared while its own exchange ran, as the seconds left when its own shorter 429 comes later", () => {
    const waiting = run(start(), [read(claimed(), 0), 2], [tick(102), 102]);
    const asked = run(waiting, [READ_FAILED, 104]);
    const pollAt = asked.visit.situation.kind === 'waiting' ? (asked.visit.situation.pollAt ?? 0) : 0;
    const held = failure('upstream_throttled', 10_300);
    const sharing = run(
      asked,
      [tick(pollAt), 300],
      [read(item({ ended: [ended('other', { kind: 'failure', failure: held })] }), 300), 302],
    );
    const { actions } = run(sharing, [gotFailure(failure('upstream_throttled', 4655)), 2655], [wrote('publish', WON), 2660]);

    expect(answerOf(sharing.actions)).toBeUndefined();
    expect(answerOf(actions)).toMatchObject({ failure: held, metAt: epoch(2660) });
  });

  it('answers a timeout of its own at its deadline, with no claim to release', () => {
    const { visit, actions } = run(start({ deadline: monoMs(1000) }), [read(claimed({ leftMs: 900 }), 0), 2], [tick(1000), 1000]);

    expect(kinds(actions)).toEqual(['answer']);
    expect(answerOf(actions)).toMatchObject({ kind: 'failure', cause: 'deadline' });
    expect(visitOver(visit)).toBe(true);
  });
});

describe('the outcomes a write carries', () => {
  it('keeps at most the bound, dropping the hold that ends first when every outcome is a hold, not the oldest written', () => {
    // The oldest written ends last (a frozen earner published late): it is the one that may not go.
    const holdsEnded = (
      [
        ['h1', -1000],
        ['h2', -2000],
        ['h3', -3000],
        ['h4', -1500],
        ['h5', -2500],
      ] as const
    ).map(([holder, ms]) => ended(holder, { kind: 'failure', failure: failure('upstream_throttled', ms) }));
    const { actions } = run(start(), [read(item({ ended: holdsEnded }), 0), 2]);

    expect(writeOf(actions, 'claim')?.state.ended.map((one) => one.holder)).toEqual(['h1', 'h2', 'h4', 'h5']);
  });

  it('drops the oldest outcome that is not a hold first', () => {
    const error = (holder: string) => ended(holder, { kind: 'failure', failure: failure('upstream_error', -500) });
    const mixed = [ended('h1', { kind: 'failure', failure: failure('upstream_throttled', -1000) }), ...['e2', 'e3', 'e4', 'e5'].map(error)];
    const { actions } = run(start(), [read(item({ ended: mixed }), 0), 2]);
    // The oldest first though a hold after it ends sooner.
    const errorFirst = [
      error('e1'),
      ended('h2', { kind: 'failure', failure: failure('upstream_throttled', -1000) }),
      ...['e3', 'e4', 'e5'].map(error),
    ];
    const first = run(start(), [read(item({ ended: errorFirst }), 0), 2]);

    expect(writeOf(actions, 'claim')?.state.ended.map((one) => one.holder)).toEqual(['h1', 'e3', 'e4', 'e5']);
    expect(writeOf(first.actions, 'claim')?.state.ended.map((one) => one.holder)).toEqual(['h2', 'e3', 'e4', 'e5']);
  });
});
