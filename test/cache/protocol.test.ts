import type { ClaimFacts, Ended, KeyItem } from '../../lambda/cache/item-state';
import type { Entry } from '../../lambda/cache/lifetime';
import { UNKNOWN_REJECTION } from '../../lambda/cache/outcome';
import {
  type Expected,
  type KeyRead,
  MAX_REFUSALS,
  type Now,
  startVisit,
  type Step,
  step,
  type Visit,
  type VisitAction,
  type VisitAsk,
  type VisitEvent,
  visitOver,
  type WriteResult,
} from '../../lambda/cache/protocol';
import { hedgeFor, type Remembered } from '../../lambda/cache/rules';
import { CLOCK_TOLERANCE_MS, epochMs, monoMs } from '../../lambda/cache/time';

// The shared tier's protocol alone: no table, no IdP, no timers. Each test feeds the transition
// function what happened and reads what it says to do, at exact moments of both clocks.

const T0 = 1_800_000_000_000;
const SETTINGS = { upstreamTimeoutMs: 5000, settleMs: 1000, hedgeMs: 200 };
/** Both clocks `ms` into the request: mono from 0, epoch from T0. */
const at = (ms: number): Now => ({ epoch: epochMs(T0 + ms), mono: monoMs(ms) });
const HOUR = (name: string) => ({ access_token: name, token_type: 'Bearer', expires_in: 3600 });
/** A 1 h token received `ago` ms before the request. */
const token = (name: string, ago = 0, fleet = false): Entry => ({
  token: HOUR(name),
  receivedAt: epochMs(T0 - ago),
  ...(fleet ? { fleet: true as const } : {}),
});
const ask = (parts: Partial<VisitAsk> = {}): VisitAsk => ({
  vouched: false,
  known: undefined,
  rejectedAt: epochMs(0),
  refresh: false,
  remembered: undefined,
  deadline: monoMs(5000),
  holder: 'me',
  noCache: false,
  arrivedAt: epochMs(T0),
  ...parts,
});
const claimFacts = (parts: Partial<ClaimFacts> = {}): ClaimFacts => ({
  holder: 'other',
  beat: 0,
  leftMs: 4900,
  runMs: 0,
  claimedAt: epochMs(T0),
  lineage: [],
  ...parts,
});
const item = (parts: Partial<Omit<KeyItem, 'kind'>> = {}): KeyItem => ({
  kind: 'key',
  memo: { kept: null, rejectedAt: epochMs(0) },
  activity: { kind: 'idle' },
  ended: [],
  ...parts,
});
const claimed = (parts: Partial<ClaimFacts> = {}, rest: Partial<Omit<KeyItem, 'kind' | 'activity'>> = {}) =>
  item({ activity: { kind: 'claim', claim: claimFacts(parts) }, ...rest });
/** The item at one of these revisions; or, UNVERSIONED, with none. */
const revs = (...at: string[]): Expected => ({ revs: at, unversioned: false });
const UNVERSIONED: Expected = { revs: [], unversioned: true };
const read = (state: KeyItem | undefined, atMs = 0, expected: Expected = revs('r1')): VisitEvent => ({
  kind: 'read',
  read: { state, expected, startedAt: monoMs(atMs), endedAt: monoMs(atMs + 2) },
});
const failure = (code: Remembered['code'], untilMs: number): Remembered => ({ code, until: epochMs(T0 + untilMs) });
const ended = (holder: string, outcome: Ended['outcome'], lineage: readonly string[] = []): Ended => ({ holder, lineage, outcome });

/** The answer to a write: by default the visit's latest (`me.N`, its holder and count of writes). */
const LATEST = 'latest';
const wrote = (write: 'claim' | 'renew' | 'settle' | 'share', result: WriteResult, rev = LATEST): VisitEvent => ({
  kind: 'written',
  write,
  rev,
  result,
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
const start = (parts: Partial<VisitAsk> = {}, ms = 0) => startVisit(ask(parts), SETTINGS, at(ms));
const kinds = (actions: readonly VisitAction[]) =>
  actions.map((action) =>
    action.kind === 'write' ? `write:${action.write}` : action.kind === 'timer' ? `timer:${action.timer}` : action.kind,
  );
const answerOf = (actions: readonly VisitAction[]) => actions.find((action) => action.kind === 'answer')?.outcome;
const writeOf = (actions: readonly VisitAction[], purpose?: string) =>
  actions.find(
    (action): action is Extract<VisitAction, { kind: 'write' }> =>
      action.kind === 'write' && (purpose === undefined || action.write === purpose),
  );
const timerAt = (actions: readonly VisitAction[], timer: string) =>
  (actions.find((action) => action.kind === 'timer' && action.timer === timer) as { at: number } | undefined)?.at;

describe('hedgeFor', () => {
  it.each([
    [1, 20],
    [1000, 40],
    [5000, 200],
    [10_000, 400],
    [29_000, 1000],
  ])('waits on the table at most %p ms deadline / 25, within 20 ms and 1 s: %p', (timeout, hedge) => {
    expect(hedgeFor(timeout)).toBe(hedge);
  });
});

describe('a visit begins', () => {
  it('by reading the key, with the hedge armed and the deadline set', () => {
    const { actions } = start();

    expect(actions).toEqual([{ kind: 'read' }, { kind: 'timer', timer: 'hedge', at: 200 }, { kind: 'timer', timer: 'deadline', at: 5000 }]);
  });

  it('by answering 504 at once when its deadline has passed', () => {
    const { visit, actions } = start({ deadline: monoMs(0) });

    expect(answerOf(actions)).toMatchObject({ kind: 'failure', failure: { code: 'upstream_timeout' }, cause: 'deadline' });
    expect(visit.answered).toBe(true);
  });

  it('knowing the token this instance keeps, unless a rejection it knows voids it', () => {
    expect(start({ known: token('mine') }).visit.seen).toEqual(token('mine'));
    expect(start({ known: token('mine', 1000), rejectedAt: epochMs(T0) }).visit.seen).toBeUndefined();
  });
});

describe('a read of the key', () => {
  it('with nothing there: claims it over no string revision, and reads the hold alongside', () => {
    const { visit, actions } = run(start(), [read(undefined, 0, UNVERSIONED), 3]);

    expect(kinds(actions)).toEqual(['write:claim', 'read-hold']);
    expect(writeOf(actions)).toEqual({
      kind: 'write',
      write: 'claim',
      rev: 'me.0',
      expected: UNVERSIONED,
      state: item({
        activity: { kind: 'claim', claim: { holder: 'me', beat: 0, leftMs: 4997, runMs: 0, claimedAt: epochMs(T0 + 3), lineage: [] } },
      }),
    });
    expect(visit.key.kind).toBe('claiming');
    expect(visit.confirmed).toBe(true);
  });

  it("with a fresh token another instance kept: answers with it, judged with the clocks' tolerance", () => {
    const { visit, actions } = run(start(), [read(item({ memo: { kept: token('theirs', 1000), rejectedAt: epochMs(0) } })), 3]);

    expect(answerOf(actions)).toEqual({ kind: 'token', entry: token('theirs', 1000, true), from: 'table' });
    expect(visitOver(visit)).toBe(true);
  });

  it("with this instance's own token, fresh: answers it as memory's", () => {
    const mine = token('mine', 1000);
    const { actions } = run(start({ known: mine }), [read(item({ memo: { kept: { ...mine }, rejectedAt: epochMs(0) } })), 3]);

    expect(answerOf(actions)).toEqual({ kind: 'token', entry: mine, from: 'memory' });
  });

  it('takes no token dated further ahead than the clocks tolerate, nor one older than a rejection it shows', () => {
    const ahead = run(start(), [read(item({ memo: { kept: token('ahead', -CLOCK_TOLERANCE_MS - 1), rejectedAt: epochMs(0) } })), 0]);
    const voided = run(start(), [read(item({ memo: { kept: token('old', 10_000), rejectedAt: epochMs(T0 - 1000) } })), 0]);

    expect(kinds(ahead.actions)).toEqual(['write:claim', 'read-hold']);
    expect(kinds(voided.actions)).toEqual(['write:claim', 'read-hold']);
    expect(voided.visit.rejectedAt).toBe(T0 - 1000);
  });

  it('with a live claim: waits for it, polling, without the hedge', () => {
    const { visit, actions } = run(start(), [read(claimed()), 10]);

    expect(actions).toEqual([{ kind: 'timer', timer: 'poll', at: 10 + 100 }]);
    expect(visit.key).toEqual({ kind: 'waiting', pollAt: 110 });
    expect(visit.hedgeAt).toBeUndefined();
  });

  it('with a stale token and a remembered failure: fails with it, the stale token standing in', () => {
    const stale = token('stale', 3_300_000, true);
    const { actions } = run(start(), [
      read(
        item({
          memo: { kept: token('stale', 3_300_000), rejectedAt: epochMs(0) },
          ended: [ended('x', { kind: 'failure', failure: failure('upstream_error', 500) })],
        }),
      ),
      0,
    ]);

    expect(answerOf(actions)).toEqual({
      kind: 'failure',
      failure: failure('upstream_error', 500),
      kept: stale,
      rejectedAt: epochMs(0),
      scope: 'client',
      cause: 'failure',
    });
  });

  it("with a hold on the key: fails with it, held 5 s longer as another instance's", () => {
    const { actions } = run(start(), [
      read(item({ ended: [ended('x', { kind: 'failure', failure: failure('upstream_throttled', 2000) })] })),
      0,
    ]);

    expect(answerOf(actions)).toMatchObject({ failure: failure('upstream_throttled', 7000), cause: 'hold', scope: 'key' });
  });

  it("with nothing in the table but this instance's remembered failure: fails with it, now confirmed", () => {
    const remembered = failure('upstream_error', 800);
    const stale = token('mine', 3_300_000);
    const { actions } = run(start({ known: stale, remembered }), [read(undefined), 0]);

    expect(answerOf(actions)).toEqual({
      kind: 'failure',
      failure: remembered,
      kept: stale,
      rejectedAt: epochMs(0),
      scope: 'client',
      cause: 'failure',
    });
  });

  it('ignores a remembered failure that is over, and a failure dated further ahead than any instance remembers one', () => {
    const over = run(start({ remembered: failure('upstream_error', 0) }), [read(undefined), 0]);
    const forged = run(start(), [
      read(item({ ended: [ended('x', { kind: 'failure', failure: failure('upstream_error', 6001 + 1000) })] })),
      0,
    ]);

    expect(kinds(over.actions)).toEqual(['write:claim', 'read-hold']);
    expect(kinds(forged.actions)).toEqual(['write:claim', 'read-hold']);
  });

  it('carries the outcomes still of use into its claim, the last four', () => {
    const answered = (holder: string, untilMs: number): Ended =>
      ended(holder, { kind: 'answered', entry: token(holder), until: epochMs(T0 + untilMs) });
    const outcomes = [
      answered('a', -CLOCK_TOLERANCE_MS),
      answered('b', 1),
      answered('c', 1),
      answered('d', 1),
      answered('e', 1),
      answered('f', 1),
    ];

    const { actions } = run(start(), [read(item({ ended: outcomes })), 0]);

    expect(writeOf(actions)?.state.ended.map((outcome) => outcome.holder)).toEqual(['c', 'd', 'e', 'f']);
  });
});

describe('refresh ahead', () => {
  const inWindow = token('due', 3_215_000);

  it("refreshes this instance's own token from the start of its window", () => {
    const { visit, actions } = run(start({ known: inWindow, refresh: true }), [
      read(item({ memo: { kept: inWindow, rejectedAt: epochMs(0) } })),
      0,
    ]);

    expect(kinds(actions)).toEqual(['write:claim', 'read-hold']);
    expect(visit.refresh).toBe(true);
  });

  it("answers with a token only the table has while it is the asker's to refresh, early in the window", () => {
    const { actions } = run(start(), [read(item({ memo: { kept: token('due', 3_212_000), rejectedAt: epochMs(0) } })), 0]);

    expect(answerOf(actions)).toMatchObject({ kind: 'token', from: 'table' });
  });

  it('answers with the kept token while someone else refreshes it', () => {
    const { actions } = run(start({ known: inWindow }), [read(claimed({}, { memo: { kept: inWindow, rejectedAt: epochMs(0) } })), 0]);

    expect(answerOf(actions)).toEqual({ kind: 'token', entry: inWindow, from: 'memory' });
  });

  it('says the exchange refreshes ahead', () => {
    const { actions } = run(
      start({ known: inWindow, refresh: true }),
      [read(undefined), 0],
      [wrote('claim', { kind: 'won' }), 1],
      [{ kind: 'hold', hold: undefined }, 2],
    );

    expect(actions.find((action) => action.kind === 'exchange')).toEqual({ kind: 'exchange', leftMs: 4998, refresh: true, hedged: false });
  });
});

describe('a no-cache request', () => {
  it('takes a token received at most 5 s before it arrived, and claims the key for an older one', () => {
    const recent = run(start({ noCache: true }), [
      read(item({ memo: { kept: token('recent', 5000 - CLOCK_TOLERANCE_MS), rejectedAt: epochMs(0) } })),
      0,
    ]);
    const older = run(start({ noCache: true }), [read(item({ memo: { kept: token('older', 5001), rejectedAt: epochMs(0) } })), 0]);

    expect(answerOf(recent.actions)).toMatchObject({ kind: 'token' });
    expect(kinds(older.actions)).toEqual(['write:claim', 'read-hold']);
  });

  it('ignores a remembered failure, and waits for a live claim', () => {
    const remembered = run(start({ noCache: true }), [
      read(item({ ended: [ended('x', { kind: 'failure', failure: failure('upstream_error', 500) })] })),
      0,
    ]);
    const live = run(start({ noCache: true }), [read(claimed()), 0]);

    expect(kinds(remembered.actions)).toEqual(['write:claim', 'read-hold']);
    expect(live.visit.key.kind).toBe('waiting');
  });
});

describe('a waiter', () => {
  const waiting = () => run(start(), [read(claimed(), 0), 2]);

  it('polls again when its poll timer goes off, with the hedge armed for the read', () => {
    const { visit, actions } = run(waiting(), [{ kind: 'timer', timer: 'poll', at: monoMs(102) }, 101]);

    expect(actions).toEqual([{ kind: 'read' }, { kind: 'timer', timer: 'hedge', at: 301 }]);
    expect(visit.key.kind).toBe('reading');
  });

  it('ignores a timer it no longer waits for', () => {
    const first = waiting();

    expect(step(first.visit, { kind: 'timer', timer: 'poll', at: monoMs(50) }, at(50))).toEqual({ visit: first.visit, actions: [] });
    expect(step(first.visit, { kind: 'timer', timer: 'renew', at: monoMs(50) }, at(50)).actions).toEqual([]);
    expect(step(first.visit, { kind: 'timer', timer: 'settle', at: monoMs(50) }, at(50)).actions).toEqual([]);
    expect(step(first.visit, read(claimed(), 50), at(52)).actions).toEqual([]);
  });

  it('takes over a claim silent for 750 ms of its own clock, naming its holder in the lineage', () => {
    const { actions } = run(waiting(), [{ kind: 'timer', timer: 'poll', at: monoMs(102) }, 752], [read(claimed(), 752), 754]);

    expect(writeOf(actions, 'claim')?.state.activity).toMatchObject({ claim: { holder: 'me', lineage: ['other'] } });
    expect(writeOf(actions, 'claim')?.expected).toEqual(revs('r1'));
  });

  it('waits on while the beats come', () => {
    const { visit } = run(waiting(), [{ kind: 'timer', timer: 'poll', at: monoMs(102) }, 752], [read(claimed({ beat: 1 }), 752), 754]);

    expect(visit.key.kind).toBe('waiting');
  });

  it('takes over at once from a holder with far less time than its own, and claims anew over an implausible claim', () => {
    const dominated = run(start(), [read(claimed({ leftMs: 1000, runMs: 2000 })), 0]);
    const implausible = run(start(), [read(claimed({ claimedAt: epochMs(T0 + CLOCK_TOLERANCE_MS + 1) })), 0]);

    expect(writeOf(dominated.actions)?.state.activity).toMatchObject({ claim: { lineage: ['other'] } });
    expect(writeOf(implausible.actions)?.state.activity).toMatchObject({ claim: { lineage: [] } });
  });

  it("takes the token its holder's exchange brought, though no later request may", () => {
    const answered = ended('other', { kind: 'answered', entry: token('unkept'), until: epochMs(T0 + 5000) });

    const { actions } = run(
      waiting(),
      [{ kind: 'timer', timer: 'poll', at: monoMs(102) }, 102],
      [read(item({ ended: [answered] }), 102), 104],
    );

    expect(answerOf(actions)).toEqual({ kind: 'token', entry: token('unkept', 0, true), from: 'table' });
  });

  it("takes the failure its holder's exchange ended in, its own kept token standing in", () => {
    const stale = token('mine', 3_300_000);
    const first = run(start({ known: stale }), [read(claimed(), 0), 2]);

    const { actions } = run(
      first,
      [{ kind: 'timer', timer: 'poll', at: monoMs(102) }, 102],
      [read(item({ ended: [ended('other', { kind: 'failure', failure: failure('upstream_error', 1000) })] }), 102), 104],
    );

    expect(answerOf(actions)).toEqual({
      kind: 'failure',
      failure: failure('upstream_error', 1000),
      kept: stale,
      rejectedAt: epochMs(0),
      scope: 'client',
      cause: 'exchange',
    });
  });

  it('takes the outcome of a holder that took over from the one it waited for', () => {
    const taken = ended('third', { kind: 'answered', entry: token('via-lineage'), until: epochMs(T0 + 5000) }, ['other']);

    const { actions } = run(
      waiting(),
      [{ kind: 'timer', timer: 'poll', at: monoMs(102) }, 102],
      [read(item({ ended: [taken] }), 102), 104],
    );

    expect(answerOf(actions)).toMatchObject({ kind: 'token', entry: { token: { access_token: 'via-lineage' } } });
  });

  it('whose poll fails asks the IdP itself and polls on; the first token answers', () => {
    const failedPoll = run(waiting(), [{ kind: 'timer', timer: 'poll', at: monoMs(102) }, 102], [{ kind: 'read', read: 'failed' }, 110]);

    expect(kinds(failedPoll.actions)).toEqual(['exchange', 'timer:poll']);
    expect(failedPoll.actions[0]).toMatchObject({ hedged: true });
    const polledAgain = run(failedPoll, [{ kind: 'timer', timer: 'poll', at: monoMs(timerAt(failedPoll.actions, 'poll') as number) }, 210]);
    expect(kinds(polledAgain.actions)).toEqual(['read']);
  });

  it("holds its own exchange's failure back while the holder may still bring a token, and answers it at the deadline", () => {
    const failedPoll = run(waiting(), [{ kind: 'timer', timer: 'poll', at: monoMs(102) }, 102], [{ kind: 'read', read: 'failed' }, 110]);

    const own = run(failedPoll, [{ kind: 'exchanged', result: { failure: failure('upstream_error', 1000) } }, 300]);
    const late = run(own, [{ kind: 'timer', timer: 'deadline', at: monoMs(5000) }, 5000]);

    expect(own.actions).toEqual([]);
    expect(own.visit.fallback).toMatchObject({ failure: failure('upstream_error', 1000) });
    expect(answerOf(late.actions)).toMatchObject({ failure: failure('upstream_error', 1000) });
  });

  it('answers 504 at its deadline, the kept token standing in', () => {
    const stale = token('mine', 3_300_000);
    const first = run(start({ known: stale }), [read(claimed(), 0), 2]);

    const { actions } = run(first, [{ kind: 'timer', timer: 'deadline', at: monoMs(5000) }, 5000]);

    expect(answerOf(actions)).toMatchObject({ failure: { code: 'upstream_timeout' }, kept: stale, cause: 'deadline' });
  });
});

describe('a claim', () => {
  const claiming = (parts: Partial<VisitAsk> = {}) => run(start(parts), [read(undefined, 0, UNVERSIONED), 2]);
  const won: VisitEvent = wrote('claim', { kind: 'won' });

  it('that lands, with no hold: asks the IdP and renews every 250 ms', () => {
    const { visit, actions } = run(claiming(), [won, 5], [{ kind: 'hold', hold: undefined }, 6]);

    expect(actions).toEqual([
      { kind: 'exchange', leftMs: 4994, refresh: false, hedged: false },
      { kind: 'timer', timer: 'renew', at: 256 },
    ]);
    expect(visit).toMatchObject({ key: { kind: 'holding' }, item: revs('me.0') });
  });

  it('that lands before the hold read answers: waits for it, as long as the hedge', () => {
    const landed = run(claiming(), [won, 5]);
    const hedged = run(landed, [{ kind: 'timer', timer: 'hedge', at: monoMs(200) }, 200]);

    expect(landed.actions).toEqual([]);
    expect(kinds(hedged.actions)).toEqual(['exchange', 'timer:renew']);
    expect(hedged.actions[0]).toMatchObject({ hedged: true });
  });

  it('that lands with a hold in force: settles the hold as read and answers it honoured', () => {
    const hold = failure('upstream_throttled', 10_000);

    const { actions } = run(claiming(), [{ kind: 'hold', hold }, 4], [won, 5]);

    expect(writeOf(actions, 'settle')?.state.ended).toEqual([ended('me', { kind: 'failure', failure: hold })]);
    expect(run(claiming(), [{ kind: 'hold', hold }, 4], [won, 5], [wrote('settle', { kind: 'won' }), 8]).actions).toEqual([
      { kind: 'answer', outcome: expect.objectContaining({ failure: failure('upstream_throttled', 15_000), cause: 'hold' }) },
    ]);
  });

  it('that loses: decides again from the item it lost to', () => {
    const { visit } = run(claiming(), [wrote('claim', { kind: 'lost', read: (read(claimed(), 3) as { read: KeyRead }).read }), 5]);

    expect(visit.key.kind).toBe('waiting');
    expect(visit.refusals).toBe(1);
  });

  it('that loses to an item the server did not return: reads it again', () => {
    const { actions } = run(claiming(), [wrote('claim', { kind: 'lost', read: undefined }), 5]);

    expect(actions).toEqual([{ kind: 'read' }]);
  });

  it(`refused ${MAX_REFUSALS} times: goes on without the table, once the hold is known`, () => {
    let current = claiming();
    for (let refused = 1; refused < MAX_REFUSALS; refused++) {
      current = run(current, [wrote('claim', { kind: 'lost', read: undefined }), 5], [read(undefined, 6, UNVERSIONED), 7]);
    }
    const lastRefused = run(current, [wrote('claim', { kind: 'lost', read: undefined }), 8]);
    const heldOff = run(lastRefused, [{ kind: 'hold', hold: undefined }, 9]);
    const held = run(lastRefused, [{ kind: 'hold', hold: failure('upstream_throttled', 3000) }, 9]);

    expect(lastRefused.visit.key.kind).toBe('done');
    expect(kinds(heldOff.actions)).toEqual(['exchange']);
    expect(answerOf(held.actions)).toMatchObject({ cause: 'hold' });
  });

  it('whose answer never came: holds it as far as the item tells, once the hold read under way is known', () => {
    const failed = run(claiming(), [wrote('claim', { kind: 'failed' }), 5]);
    const held = run(failed, [{ kind: 'hold', hold: failure('upstream_throttled', 3000) }, 6]);
    const free = run(failed, [{ kind: 'hold', hold: undefined }, 6]);
    const renewed = run(free, [{ kind: 'timer', timer: 'renew', at: monoMs(256) }, 256]);

    // Its next write goes over what it read (absent) or its claim, whichever the item holds
    const either = { revs: ['me.0'], unversioned: true };
    expect(failed.actions).toEqual([]);
    expect(writeOf(held.actions, 'settle')).toMatchObject({ expected: either, state: { activity: { kind: 'idle' } } });
    expect(kinds(free.actions)).toEqual(['exchange', 'timer:renew']);
    expect(writeOf(renewed.actions, 'renew')).toMatchObject({ rev: 'me.1', expected: either });
  });

  it('whose answer never came, nor the hold read: asks the IdP at the hedge, as the holder', () => {
    const failed = run(claiming(), [wrote('claim', { kind: 'failed' }), 5]);

    const hedged = run(failed, [{ kind: 'timer', timer: 'hedge', at: monoMs(200) }, 200]);

    expect(hedged.actions).toEqual([
      { kind: 'exchange', leftMs: 4800, refresh: false, hedged: true },
      { kind: 'timer', timer: 'renew', at: 450 },
    ]);
  });

  it('that turns out not to have landed: the request answers with its own exchange, and shares its token', () => {
    const failed = run(claiming(), [wrote('claim', { kind: 'failed' }), 5], [{ kind: 'hold', hold: undefined }, 6]);
    const renewing = run(failed, [{ kind: 'timer', timer: 'renew', at: monoMs(256) }, 256]);
    const theirs = { state: claimed({ holder: 'other' }), expected: revs('n'), startedAt: monoMs(256), endedAt: monoMs(258) };
    const refused = run(renewing, [wrote('renew', { kind: 'lost', read: theirs }), 260]);

    const { actions } = run(refused, [{ kind: 'exchanged', result: { token: token('new') } }, 300]);

    expect(refused.actions).toEqual([]);
    expect(kinds(actions)).toEqual(['answer', 'write:share']);
    expect(writeOf(actions, 'share')).toMatchObject({ expected: revs('n'), state: { activity: { kind: 'claim' } } });
  });

  it('still out when the exchange the hedge started ends: the outcome goes out over the claim or what it claimed, and the caller has it at once', () => {
    const hedged = run(claiming(), [{ kind: 'timer', timer: 'hedge', at: monoMs(200) }, 200]);
    const answered = run(hedged, [{ kind: 'exchanged', result: { token: token('new') } }, 300]);
    const landed = run(answered, [wrote('claim', { kind: 'won' }, 'me.0'), 400]);
    const settled = run(landed, [wrote('settle', { kind: 'won' }, 'me.1'), 410]);

    expect(kinds(answered.actions)).toEqual(['write:settle', 'timer:settle', 'answer']);
    expect(writeOf(answered.actions, 'settle')).toMatchObject({
      rev: 'me.1',
      expected: { revs: ['me.0'], unversioned: true },
      state: { memo: { kept: token('new') }, activity: { kind: 'idle' } },
    });
    expect(answerOf(answered.actions)).toEqual({ kind: 'token', entry: token('new'), from: 'idp' });
    expect(landed.actions).toEqual([]);
    expect(landed.visit.item).toEqual(revs('me.0', 'me.1'));
    expect(visitOver(settled.visit)).toBe(true);
  });
});

describe('a claim, further', () => {
  const claiming = () => run(start(), [read(undefined, 0, UNVERSIONED), 2]);
  const won: VisitEvent = wrote('claim', { kind: 'won' });

  it('that loses after the hold was read in force: answers the hold', () => {
    const hold = failure('upstream_throttled', 3000);

    const { actions } = run(
      claiming(),
      [{ kind: 'hold', hold }, 3],
      [wrote('claim', { kind: 'lost', read: (read(undefined, 4, UNVERSIONED) as { read: KeyRead }).read }), 5],
    );

    expect(answerOf(actions)).toMatchObject({ failure: failure('upstream_throttled', 8000), cause: 'hold' });
  });

  it("that lands after the hedge started the exchange: that exchange is the holder's, renewed from then", () => {
    const hedged = run(claiming(), [{ kind: 'timer', timer: 'hedge', at: monoMs(200) }, 200], [{ kind: 'hold', hold: undefined }, 201]);

    const { visit, actions } = run(hedged, [won, 210]);

    expect(actions).toEqual([{ kind: 'timer', timer: 'renew', at: 460 }]);
    const renewed = run({ visit, actions }, [{ kind: 'timer', timer: 'renew', at: monoMs(460) }, 460]);
    expect(writeOf(renewed.actions, 'renew')?.state.activity).toMatchObject({ claim: { runMs: 260, leftMs: 4540 } });
  });

  it('whose answer never came, after the outcome went out: nothing more to do', () => {
    const hedged = run(
      claiming(),
      [{ kind: 'timer', timer: 'hedge', at: monoMs(200) }, 200],
      [{ kind: 'exchanged', result: { token: token('new') } }, 250],
    );

    const { visit, actions } = run(hedged, [wrote('claim', { kind: 'failed' }, 'me.0'), 260]);

    expect(actions).toEqual([]);
    expect(visit.key.kind).toBe('settling');
  });
});

describe('a holder, further', () => {
  const holding = (parts: Partial<VisitAsk> = {}) =>
    run(start(parts), [read(undefined, 0, UNVERSIONED), 2], [wrote('claim', { kind: 'won' }), 5], [{ kind: 'hold', hold: undefined }, 6]);
  const renewing = () => run(holding(), [{ kind: 'timer', timer: 'renew', at: monoMs(256) }, 256]);
  /** A refusal of the write `rev` (the latest) by an item at revision `at`. */
  const lost = (write: 'renew' | 'settle', state: KeyItem | undefined, at = 'n', rev = LATEST): VisitEvent =>
    wrote(write, { kind: 'lost', read: { state, expected: revs(at), startedAt: monoMs(0), endedAt: monoMs(0) } }, rev);

  it('settles at once when its exchange ends with a renewal out, over the claim or what the renewal leaves', () => {
    const done = run(renewing(), [{ kind: 'exchanged', result: { token: token('new') } }, 300]);

    expect(writeOf(done.actions, 'settle')).toMatchObject({ rev: 'me.2', expected: revs('me.0', 'me.1') });
  });

  it('whose renewal and then settle are refused by its own claim moved: writes the settle again over what refused it', () => {
    const done = run(renewing(), [{ kind: 'exchanged', result: { token: token('new') } }, 300]);
    const renewalRefused = run(done, [lost('renew', claimed({ holder: 'me' }), 'forged', 'me.1'), 310]);

    const { actions } = run(renewalRefused, [lost('settle', claimed({ holder: 'me' }), 'forged', 'me.2'), 312]);

    expect(renewalRefused.actions).toEqual([]);
    expect(writeOf(actions, 'settle')).toMatchObject({ rev: 'me.3', expected: revs('forged'), state: { memo: { kept: token('new') } } });
  });

  it('whose renewal is refused with no item returned: counts itself taken over', () => {
    const { visit } = run(renewing(), [wrote('renew', { kind: 'lost', read: undefined }), 260]);

    expect(visit.key.kind).toBe('done');
  });

  it('whose settle is refused with no item returned: answers, and shares nothing it cannot place', () => {
    const done = run(holding(), [{ kind: 'exchanged', result: { token: token('new') } }, 100]);

    const { actions } = run(done, [wrote('settle', { kind: 'lost', read: undefined }), 110]);

    expect(kinds(actions)).toEqual(['answer', 'write:share']);
  });

  it('taken over by someone who wrote garbage: shares its token over it, as a plain kept token', () => {
    const overtaken = run(renewing(), [lost('renew', undefined, 'garbage'), 260]);

    const { actions } = run(overtaken, [{ kind: 'exchanged', result: { token: token('mine') } }, 900]);

    expect(writeOf(actions, 'share')).toEqual({
      kind: 'write',
      write: 'share',
      rev: 'me.2',
      expected: revs('garbage'),
      state: item({ memo: { kept: token('mine'), rejectedAt: epochMs(0) } }),
    });
  });

  it('rewrites a failure it settles over its own claim moved, with no token on either side', () => {
    const done = run(holding(), [{ kind: 'exchanged', result: { failure: failure('upstream_error', 1100) } }, 100]);

    const { actions } = run(done, [lost('settle', claimed({ holder: 'me' }), 'forged'), 110]);

    expect(writeOf(actions, 'settle')?.state.memo).toEqual({ kept: null, rejectedAt: epochMs(0) });
  });

  it('answers once, though its settle lands after the hedge answered', () => {
    const done = run(holding(), [{ kind: 'exchanged', result: { token: token('new') } }, 100]);
    const answered = run(done, [{ kind: 'timer', timer: 'settle', at: monoMs(300) }, 300]);

    const { visit, actions } = run(answered, [wrote('settle', { kind: 'won' }), 310]);

    expect(actions).toEqual([]);
    expect(visitOver(visit)).toBe(true);
  });
});

describe('a waiter, further', () => {
  const failedPoll = () =>
    run(
      start(),
      [read(claimed(), 0), 2],
      [{ kind: 'timer', timer: 'poll', at: monoMs(102) }, 102],
      [{ kind: 'read', read: 'failed' }, 110],
    );

  it('whose own exchange brings a token: answers it, and shares it into the item it saw', () => {
    const { actions } = run(failedPoll(), [{ kind: 'exchanged', result: { token: token('mine') } }, 400]);

    expect(kinds(actions)).toEqual(['answer', 'write:share']);
    expect(writeOf(actions, 'share')?.state.activity).toEqual({ kind: 'claim', claim: claimFacts() });
  });

  it('whose polls fail again asks the IdP no second time', () => {
    const again = run(failedPoll(), [{ kind: 'timer', timer: 'poll', at: monoMs(210) }, 210], [{ kind: 'read', read: 'failed' }, 220]);

    expect(kinds(again.actions)).toEqual(['timer:poll']);
  });
});

describe('a holder', () => {
  const holding = (parts: Partial<VisitAsk> = {}) =>
    run(start(parts), [read(undefined, 0, UNVERSIONED), 2], [wrote('claim', { kind: 'won' }), 5], [{ kind: 'hold', hold: undefined }, 6]);
  const renewAt = monoMs(256);

  it('renews its claim under the next beat, over its own revision', () => {
    const { visit, actions } = run(holding(), [{ kind: 'timer', timer: 'renew', at: renewAt }, 256]);

    expect(writeOf(actions, 'renew')).toEqual({
      kind: 'write',
      write: 'renew',
      rev: 'me.1',
      expected: revs('me.0'),
      state: item({
        activity: { kind: 'claim', claim: { holder: 'me', beat: 1, leftMs: 4744, runMs: 250, claimedAt: epochMs(T0 + 2), lineage: [] } },
      }),
    });
    expect(visit.key).toMatchObject({ writing: true });
  });

  it('renews again 250 ms after a renewal lands, and after one that failed', () => {
    const renewing = run(holding(), [{ kind: 'timer', timer: 'renew', at: renewAt }, 256]);

    expect(run(renewing, [wrote('renew', { kind: 'won' }), 260]).actions).toEqual([{ kind: 'timer', timer: 'renew', at: 510 }]);
    const failed = run(renewing, [wrote('renew', { kind: 'failed' }), 260]);
    expect(failed.actions).toEqual([{ kind: 'timer', timer: 'renew', at: 510 }]);
    // The renewal may have landed: the next is written over either revision.
    const next = run(failed, [{ kind: 'timer', timer: 'renew', at: monoMs(510) }, 510]);
    expect(writeOf(next.actions, 'renew')).toMatchObject({ rev: 'me.2', expected: revs('me.0', 'me.1') });
    // One that landed is all the next is written over.
    const landed = run(run(renewing, [wrote('renew', { kind: 'won' }), 260]), [{ kind: 'timer', timer: 'renew', at: monoMs(510) }, 510]);
    expect(writeOf(landed.actions, 'renew')?.expected).toEqual(revs('me.1'));
  });

  it('keeps the revisions of its last eight unanswered writes, no more', () => {
    let current = holding();
    let at = 256;
    for (let index = 0; index < 10; index++, at += 254) {
      current = run(current, [{ kind: 'timer', timer: 'renew', at: monoMs(at) }, at]);
      current = run(current, [wrote('renew', { kind: 'failed' }), at + 4]);
    }

    const next = run(current, [{ kind: 'timer', timer: 'renew', at: monoMs(at) }, at]);

    expect(writeOf(next.actions, 'renew')).toMatchObject({
      rev: 'me.11',
      expected: revs('me.3', 'me.4', 'me.5', 'me.6', 'me.7', 'me.8', 'me.9', 'me.10'),
    });
  });

  it('writes over its own claim with no string revision, or as its rewrite left it', () => {
    const renewing = run(holding(), [{ kind: 'timer', timer: 'renew', at: renewAt }, 256]);
    const retyped = { state: claimed({ holder: 'me' }), expected: UNVERSIONED, startedAt: monoMs(256), endedAt: monoMs(258) };
    const rewriting = run(renewing, [wrote('renew', { kind: 'lost', read: retyped }), 260]);
    const failed = run(rewriting, [wrote('renew', { kind: 'failed' }), 270]);

    const next = run(failed, [{ kind: 'timer', timer: 'renew', at: monoMs(520) }, 520]);

    expect(writeOf(rewriting.actions, 'renew')).toMatchObject({ rev: 'me.2', expected: UNVERSIONED });
    expect(writeOf(next.actions, 'renew')?.expected).toEqual({ revs: ['me.2'], unversioned: true });
  });

  it('rewrites a renewal over a revision someone changed under its own claim, keeping a token they put there', () => {
    const renewing = run(holding(), [{ kind: 'timer', timer: 'renew', at: renewAt }, 256]);
    const shared = claimed({ holder: 'me', beat: 1 }, { memo: { kept: token('shared', 100), rejectedAt: epochMs(0) } });

    const { actions } = run(renewing, [
      wrote('renew', { kind: 'lost', read: { state: shared, expected: revs('forged'), startedAt: monoMs(256), endedAt: monoMs(258) } }),
      260,
    ]);

    expect(writeOf(actions, 'renew')?.expected).toEqual(revs('forged'));
    expect(writeOf(actions, 'renew')?.state.memo.kept).toEqual(token('shared', 100, true));
  });

  it('rewrites a renewal twice at most, then counts itself taken over', () => {
    let current = run(holding(), [{ kind: 'timer', timer: 'renew', at: renewAt }, 256]);
    const refusal = (rev: string): VisitEvent =>
      wrote('renew', {
        kind: 'lost',
        read: { state: claimed({ holder: 'me' }), expected: revs(rev), startedAt: monoMs(0), endedAt: monoMs(0) },
      });
    current = run(current, [refusal('a'), 260], [refusal('b'), 261]);
    expect(writeOf(current.actions, 'renew')?.expected).toEqual(revs('b'));

    current = run(current, [refusal('c'), 262]);

    expect(current.actions).toEqual([]);
    expect(current.visit.key.kind).toBe('done');
  });

  it('taken over: answers its caller with its own exchange, and writes nothing over a token the new holder kept', () => {
    const renewing = run(holding(), [{ kind: 'timer', timer: 'renew', at: renewAt }, 256]);
    const takenOver = run(renewing, [
      wrote('renew', {
        kind: 'lost',
        read: {
          state: claimed({ holder: 'new' }, { memo: { kept: token('new', 0), rejectedAt: epochMs(0) } }),
          expected: revs('n'),
          startedAt: monoMs(0),
          endedAt: monoMs(0),
        },
      }),
      260,
    ]);

    const { actions } = run(takenOver, [{ kind: 'exchanged', result: { token: token('mine') } }, 900]);

    expect(answerOf(actions)).toEqual({ kind: 'token', entry: token('mine'), from: 'idp' });
    expect(writeOf(actions)).toBeUndefined();
  });

  it('taken over before a token was kept: shares the token it got, keeping the new claim', () => {
    const renewing = run(holding(), [{ kind: 'timer', timer: 'renew', at: renewAt }, 256]);
    const theirs = claimed({ holder: 'new' });
    const takenOver = run(renewing, [
      wrote('renew', { kind: 'lost', read: { state: theirs, expected: revs('n'), startedAt: monoMs(0), endedAt: monoMs(0) } }),
      260,
    ]);

    const { actions } = run(takenOver, [{ kind: 'exchanged', result: { token: token('mine') } }, 900]);

    expect(writeOf(actions, 'share')).toEqual({
      kind: 'write',
      write: 'share',
      rev: 'me.2',
      expected: revs('n'),
      state: { ...theirs, memo: { kept: token('mine'), rejectedAt: epochMs(0) } },
    });
  });

  it("settles a keepable token as the kept one and as its waiters' answer, and answers once that landed", () => {
    const done = run(holding(), [{ kind: 'exchanged', result: { token: token('new') } }, 100]);
    const settled = run(done, [wrote('settle', { kind: 'won' }), 110]);

    expect(done.actions).toEqual([
      {
        kind: 'write',
        write: 'settle',
        rev: 'me.1',
        expected: revs('me.0'),
        state: item({
          memo: { kept: token('new'), rejectedAt: epochMs(0) },
          ended: [ended('me', { kind: 'answered', entry: token('new'), until: epochMs(T0 + 5100) })],
        }),
      },
      { kind: 'timer', timer: 'settle', at: 300 },
    ]);
    expect(answerOf(settled.actions)).toEqual({ kind: 'token', entry: token('new'), from: 'idp' });
    expect(visitOver(settled.visit)).toBe(true);
  });

  it('answers after the hedge when its settle has not landed', () => {
    const done = run(holding(), [{ kind: 'exchanged', result: { token: token('new') } }, 100]);

    expect(answerOf(run(done, [{ kind: 'timer', timer: 'settle', at: monoMs(300) }, 300]).actions)).toMatchObject({ kind: 'token' });
  });

  it('writes a settle whose answer never came again, over either revision, twice at most', () => {
    const done = run(holding(), [{ kind: 'exchanged', result: { token: token('new') } }, 100]);
    const settle = writeOf(done.actions, 'settle');

    const again = run(done, [wrote('settle', { kind: 'failed' }), 110]);
    const third = run(again, [wrote('settle', { kind: 'failed' }), 120]);
    const given = run(third, [wrote('settle', { kind: 'failed' }), 130]);

    expect(writeOf(again.actions, 'settle')).toEqual({ ...settle, rev: 'me.2', expected: revs('me.0', 'me.1') });
    expect(writeOf(third.actions, 'settle')).toMatchObject({ rev: 'me.3', expected: revs('me.0', 'me.1', 'me.2') });
    expect(kinds(given.actions)).toEqual(['answer']);
    expect(visitOver(given.visit)).toBe(true);
  });

  it('settles a token that cannot be kept as an outcome for its waiters alone, for a deadline', () => {
    const unkept = { token: { access_token: 'unkept' }, receivedAt: epochMs(T0 + 100) };

    const { actions } = run(holding(), [{ kind: 'exchanged', result: { token: unkept } }, 100]);

    expect(writeOf(actions, 'settle')?.state).toEqual(
      item({ ended: [ended('me', { kind: 'answered', entry: unkept, until: epochMs(T0 + 5100) })] }),
    );
  });

  it('cut short by its own late start: frees the key and leaves no outcome for anyone to learn', () => {
    const late = holding({ deadline: monoMs(3000) });

    const { actions } = run(late, [{ kind: 'exchanged', result: { failure: failure('upstream_timeout', 3000) } }, 3000]);

    expect(writeOf(actions, 'settle')?.state).toEqual(item());
  });

  it("settles a failure, with the key's kept token", () => {
    const stale = token('stale', 3_300_000);

    const { actions } = run(holding({ known: stale }), [{ kind: 'exchanged', result: { failure: failure('upstream_error', 1100) } }, 100]);

    expect(writeOf(actions, 'settle')?.state).toEqual(
      item({
        memo: { kept: stale, rejectedAt: epochMs(0) },
        ended: [ended('me', { kind: 'failure', failure: failure('upstream_error', 1100) })],
      }),
    );
  });

  it("settles a rejection as the key's last rejection, keeping no token, and answers it with none", () => {
    const done = run(holding({ known: token('stale', 3_300_000) }), [
      { kind: 'exchanged', result: { failure: failure('unauthorized', 5100) } },
      100,
    ]);
    const settled = run(done, [wrote('settle', { kind: 'won' }), 110]);

    expect(writeOf(done.actions, 'settle')?.state.memo).toEqual({ kept: null, rejectedAt: epochMs(T0 + 100) });
    expect(answerOf(settled.actions)).toMatchObject({ kept: undefined, rejectedAt: T0 + 100 });
  });

  it("puts a hold on the client's hold item when a kept token proved its key, and on the key alone otherwise", () => {
    const hold = failure('upstream_throttled', 30_000);
    const proven = run(holding({ known: token('stale', 3_300_000) }), [{ kind: 'exchanged', result: { failure: hold } }, 100]);
    const unproven = run(holding(), [{ kind: 'exchanged', result: { failure: hold } }, 100]);

    expect(proven.actions[0]).toEqual({ kind: 'write-hold', hold });
    expect(kinds(unproven.actions)).toEqual(['write:settle', 'timer:settle']);
  });

  it("puts a stored credential's hold on its hold item though nothing proved its key: the broker holds its secret", () => {
    const hold = failure('upstream_throttled', 30_000);
    const vouched = run(holding({ vouched: true }), [{ kind: 'exchanged', result: { failure: hold } }, 100]);

    expect(vouched.actions[0]).toEqual({ kind: 'write-hold', hold });
  });

  it('settles with a renewal out when its exchange ends, answering once the settle lands, or after the hedge', () => {
    const renewing = run(holding(), [{ kind: 'timer', timer: 'renew', at: renewAt }, 256]);
    const done = run(renewing, [{ kind: 'exchanged', result: { token: token('new') } }, 300]);
    const renewed = run(done, [wrote('renew', { kind: 'won' }, 'me.1'), 320]);
    const settled = run(renewed, [wrote('settle', { kind: 'won' }, 'me.2'), 330]);
    const late = run(done, [{ kind: 'timer', timer: 'settle', at: monoMs(500) }, 500]);

    expect(kinds(done.actions)).toEqual(['write:settle', 'timer:settle']);
    expect(writeOf(done.actions, 'settle')?.expected).toEqual(revs('me.0', 'me.1'));
    // The renewal's answer changes nothing but what a write again would go over.
    expect(renewed.actions).toEqual([]);
    expect(renewed.visit.item).toEqual(revs('me.1', 'me.2'));
    expect(answerOf(settled.actions)).toMatchObject({ kind: 'token' });
    expect(answerOf(late.actions)).toMatchObject({ kind: 'token' });
  });

  it('answers with its exchange at the deadline, if the exchange has ended', () => {
    const renewing = run(holding(), [{ kind: 'timer', timer: 'renew', at: renewAt }, 256]);
    const done = run(renewing, [{ kind: 'exchanged', result: { token: token('new') } }, 4990]);

    expect(answerOf(run(done, [{ kind: 'timer', timer: 'deadline', at: monoMs(5000) }, 5000]).actions)).toMatchObject({ kind: 'token' });
  });

  it('rewrites its settle over a revision someone changed under its own claim, and answers once it lands', () => {
    const done = run(holding(), [{ kind: 'exchanged', result: { token: token('new') } }, 100]);
    const own = { state: claimed({ holder: 'me' }), expected: revs('forged'), startedAt: monoMs(0), endedAt: monoMs(0) };

    const rewritten = run(done, [wrote('settle', { kind: 'lost', read: own }), 110]);

    expect(writeOf(rewritten.actions, 'settle')).toMatchObject({ expected: revs('forged'), state: { memo: { kept: token('new') } } });
  });

  it('taken over before it settled: answers, and shares its token where no fresh one is kept', () => {
    const done = run(holding(), [{ kind: 'exchanged', result: { token: token('new') } }, 100]);
    const theirs = { state: claimed({ holder: 'new' }), expected: revs('n'), startedAt: monoMs(0), endedAt: monoMs(0) };

    const { actions } = run(done, [wrote('settle', { kind: 'lost', read: theirs }), 110]);

    expect(kinds(actions)).toEqual(['answer', 'write:share']);
  });

  it('shares once more over what refused the share, and no more', () => {
    const done = run(holding(), [{ kind: 'exchanged', result: { token: token('new') } }, 100]);
    const refusal = (rev: string): VisitEvent =>
      wrote('share', {
        kind: 'lost',
        read: { state: claimed({ holder: 'new' }), expected: revs(rev), startedAt: monoMs(0), endedAt: monoMs(0) },
      });
    const theirs = { state: claimed({ holder: 'new' }), expected: revs('n'), startedAt: monoMs(0), endedAt: monoMs(0) };
    const shared = run(done, [wrote('settle', { kind: 'lost', read: theirs }), 110]);

    const again = run(shared, [refusal('n2'), 120]);

    expect(writeOf(again.actions, 'share')?.expected).toEqual(revs('n2'));
    expect(run(again, [refusal('n3'), 130], [refusal('n4'), 140]).actions).toEqual([]);
  });
});

describe('the hedge', () => {
  it('asks the IdP without the table when a table call has held the visit up that long', () => {
    const { visit, actions } = run(start(), [{ kind: 'timer', timer: 'hedge', at: monoMs(200) }, 200]);

    expect(actions).toEqual([{ kind: 'exchange', leftMs: 4800, refresh: false, hedged: true }]);
    expect(visit.exchange).toEqual({ kind: 'running', since: 200 });
  });

  it('goes off no more once the visit has an exchange, an answer, or another hedge', () => {
    const hedged = run(start(), [{ kind: 'timer', timer: 'hedge', at: monoMs(200) }, 200]);

    expect(run(hedged, [{ kind: 'timer', timer: 'hedge', at: monoMs(200) }, 201]).actions).toEqual([]);
    expect(run(start(), [{ kind: 'timer', timer: 'hedge', at: monoMs(199) }, 199]).actions).toEqual([]);
  });

  it('answers with a token the table gives first, and shares one the IdP gives first where the table kept none', () => {
    const hedged = run(start(), [{ kind: 'timer', timer: 'hedge', at: monoMs(200) }, 200]);
    const fromTable = run(hedged, [read(item({ memo: { kept: token('kept', 1000), rejectedAt: epochMs(0) } }), 201), 250]);
    const decided = run(hedged, [read(undefined, 201, UNVERSIONED), 250]);
    const fromIdp = run(hedged, [{ kind: 'exchanged', result: { token: token('new') } }, 260]);

    expect(answerOf(fromTable.actions)).toMatchObject({ kind: 'token', from: 'table' });
    expect(kinds(decided.actions)).toEqual(['write:claim', 'read-hold']);
    expect(kinds(fromIdp.actions)).toEqual(['answer']);
    expect(kinds(run(decided, [{ kind: 'exchanged', result: { token: token('new') } }, 260]).actions)).toEqual([
      'write:settle',
      'timer:settle',
      'answer',
    ]);
  });

  it("answers the table's failure only if its own exchange gives nothing better", () => {
    const hedged = run(start(), [{ kind: 'timer', timer: 'hedge', at: monoMs(200) }, 200]);
    const failed = run(hedged, [
      read(item({ ended: [ended('x', { kind: 'failure', failure: failure('upstream_error', 1000) })] }), 201),
      250,
    ]);

    expect(failed.actions).toEqual([]);
    expect(answerOf(run(failed, [{ kind: 'exchanged', result: { token: token('new') } }, 300]).actions)).toMatchObject({ kind: 'token' });
  });
});

describe('without the table', () => {
  it('after a first read that failed: asks the IdP, not as a hedge', () => {
    const { actions } = run(start(), [{ kind: 'read', read: 'failed' }, 50]);

    expect(actions).toEqual([{ kind: 'exchange', leftMs: 4950, refresh: false, hedged: false }]);
  });

  it('answers 504 when nothing is left of the deadline', () => {
    const { actions } = run(start(), [{ kind: 'read', read: 'failed' }, 5000]);

    expect(answerOf(actions)).toMatchObject({ failure: { code: 'upstream_timeout' }, cause: 'deadline' });
  });

  it('knows no rejection it did not read: no token stands in for a failure', () => {
    const { actions } = run(
      start({ known: token('stale', 3_300_000) }),
      [{ kind: 'read', read: 'failed' }, 50],
      [{ kind: 'exchanged', result: { failure: failure('upstream_error', 1050) } }, 60],
    );

    expect(answerOf(actions)).toMatchObject({ rejectedAt: UNKNOWN_REJECTION });
  });

  it('ignores events that no longer concern it', () => {
    const answered = run(start(), [read(item({ memo: { kept: token('kept'), rejectedAt: epochMs(0) } })), 1]);

    expect(step(answered.visit, wrote('renew', { kind: 'failed' }), at(2)).actions).toEqual([]);
    expect(step(answered.visit, { kind: 'timer', timer: 'deadline', at: monoMs(5000) }, at(5000)).actions).toEqual([]);
    expect(step(answered.visit, { kind: 'hold', hold: undefined }, at(3)).actions).toEqual([]);
  });
});

describe('visitOver', () => {
  it('is true once answered with nothing left to write', () => {
    const waiting = run(start(), [read(claimed()), 0]).visit;
    const claiming: Visit = run(
      start(),
      [{ kind: 'timer', timer: 'hedge', at: monoMs(200) }, 200],
      [read(undefined), 201],
      [{ kind: 'exchanged', result: { token: token('n') } }, 250],
    ).visit;

    expect(visitOver(waiting)).toBe(false);
    expect([claiming.answered, visitOver(claiming)]).toEqual([true, false]);
  });
});

describe('a read of the key, at its edges', () => {
  const waiting = () => run(start(), [read(claimed(), 0), 2], [{ kind: 'timer', timer: 'poll', at: monoMs(102) }, 102]);

  it('takes the outcome of the latest exchange it waited for, when the item carries several', () => {
    const outcomes = [
      ended('other', { kind: 'failure', failure: failure('upstream_error', 900) }),
      ended('next', { kind: 'answered', entry: token('after'), until: epochMs(T0 + 5000) }, ['other']),
    ];

    const { actions } = run(waiting(), [read(item({ ended: outcomes }), 102), 104]);

    expect(answerOf(actions)).toEqual({ kind: 'token', entry: token('after', 0, true), from: 'table' });
  });

  it('remembers the last failure the item carries, though an answered exchange came after it', () => {
    const outcomes = [
      ended('x', { kind: 'failure', failure: failure('upstream_error', 500) }),
      ended('y', { kind: 'failure', failure: failure('upstream_timeout', 600) }),
      ended('z', { kind: 'answered', entry: token('theirs'), until: epochMs(T0 + 5000) }),
    ];

    const { actions } = run(start(), [read(item({ ended: outcomes })), 0]);

    expect(answerOf(actions)).toMatchObject({ kind: 'failure', failure: failure('upstream_timeout', 600), cause: 'failure' });
  });

  it('takes a token dated as far ahead as the clocks tolerate', () => {
    const ahead = token('ahead', -CLOCK_TOLERANCE_MS);

    const { actions } = run(start(), [read(item({ memo: { kept: ahead, rejectedAt: epochMs(0) } })), 0]);

    expect(answerOf(actions)).toEqual({ kind: 'token', entry: { ...ahead, fleet: true }, from: 'table' });
  });

  it('carries no outcome whose use ended, even at the very moment it ended', () => {
    const answered = (holder: string, untilMs: number): Ended =>
      ended(holder, { kind: 'answered', entry: token(holder), until: epochMs(T0 + untilMs) });

    const { actions } = run(start(), [
      read(item({ ended: [answered('a', -CLOCK_TOLERANCE_MS), answered('b', 1 - CLOCK_TOLERANCE_MS)] })),
      0,
    ]);

    expect(writeOf(actions)?.state.ended.map((outcome) => outcome.holder)).toEqual(['b']);
  });

  it('claims again after a refusal without reading the hold a second time', () => {
    const claiming = run(start(), [read(undefined, 0, UNVERSIONED), 2]);

    const { actions } = run(claiming, [
      wrote('claim', { kind: 'lost', read: { state: undefined, expected: UNVERSIONED, startedAt: monoMs(3), endedAt: monoMs(4) } }),
      5,
    ]);

    expect(kinds(actions)).toEqual(['write:claim']);
  });

  it('writes into its claim how long the exchange the hedge started has run', () => {
    const { actions } = run(start(), [{ kind: 'timer', timer: 'hedge', at: monoMs(200) }, 200], [read(undefined), 260]);

    expect(writeOf(actions, 'claim')?.state.activity).toMatchObject({ claim: { runMs: 60, leftMs: 4740 } });
  });
});

describe('a visit, at its edges', () => {
  const holding = (parts: Partial<VisitAsk> = {}) =>
    run(start(parts), [read(undefined, 0, UNVERSIONED), 2], [wrote('claim', { kind: 'won' }), 5], [{ kind: 'hold', hold: undefined }, 6]);
  /** A refusal of the write `rev` (the latest) by an item at revision `at`. */
  const lost = (write: 'renew' | 'settle' | 'share', state: KeyItem | undefined, at = 'n', rev = LATEST): VisitEvent =>
    wrote(write, { kind: 'lost', read: { state, expected: revs(at), startedAt: monoMs(0), endedAt: monoMs(0) } }, rev);

  it('rewrites a settle over its own claim moved twice at most, then counts itself taken over', () => {
    const done = run(holding(), [{ kind: 'exchanged', result: { token: token('new') } }, 100]);
    const moved = claimed({ holder: 'me' });

    const once = run(done, [lost('settle', moved, 'f1'), 110]);
    const twice = run(once, [lost('settle', moved, 'f2'), 112]);
    const thrice = run(twice, [lost('settle', moved, 'f3'), 114]);

    expect(kinds(once.actions)).toEqual(['write:settle']);
    expect(kinds(twice.actions)).toEqual(['write:settle']);
    expect(kinds(thrice.actions)).toEqual(['answer', 'write:share']);
    expect(thrice.visit.key.kind).toBe('done');
  });

  it('rewrites its settle without the token a rejection since voids, keeping that rejection', () => {
    const mine = token('mine', 3_220_000);
    const done = run(holding({ known: mine }), [{ kind: 'exchanged', result: { failure: failure('upstream_error', 1100) } }, 100]);
    const rejected = claimed({ holder: 'me' }, { memo: { kept: null, rejectedAt: epochMs(T0 - 1000) } });

    const { actions } = run(done, [lost('settle', rejected, 'moved'), 110]);

    expect(writeOf(done.actions, 'settle')?.state.memo).toEqual({ kept: mine, rejectedAt: 0 });
    expect(writeOf(actions, 'settle')?.state.memo).toEqual({ kept: null, rejectedAt: T0 - 1000 });
  });

  it('writes a settle again over an item a refused renewal left with no string revision', () => {
    const renewing = run(holding(), [{ kind: 'timer', timer: 'renew', at: monoMs(256) }, 256]);
    const settling = run(renewing, [{ kind: 'exchanged', result: { token: token('new') } }, 300]);
    const renewalRefused = run(settling, [wrote('renew', { kind: 'lost', read: undefined }, 'me.1'), 310]);

    const { actions } = run(renewalRefused, [wrote('settle', { kind: 'failed' }, 'me.2'), 320]);

    expect(writeOf(actions, 'settle')?.expected).toEqual({ revs: ['me.2'], unversioned: true });
  });

  it('taken over where the item keeps only a stale token: shares its own', () => {
    const done = run(holding(), [{ kind: 'exchanged', result: { token: token('new') } }, 100]);
    const theirs = claimed({ holder: 'new' }, { memo: { kept: token('old', 3_300_000), rejectedAt: epochMs(0) } });

    const { actions } = run(done, [lost('settle', theirs), 110]);

    expect(kinds(actions)).toEqual(['answer', 'write:share']);
    expect(writeOf(actions, 'share')?.state.memo.kept).toEqual(token('new'));
  });

  it('shares no third time, however often the share is refused', () => {
    const done = run(holding(), [{ kind: 'exchanged', result: { token: token('new') } }, 100]);
    const shared = run(done, [lost('settle', claimed({ holder: 'new' })), 110]);
    const again = run(shared, [lost('share', claimed({ holder: 'new' }), 'n2'), 120]);

    const { actions } = run(again, [lost('share', claimed({ holder: 'new' }), 'n3'), 130]);

    expect(kinds(again.actions)).toEqual(['write:share']);
    expect(actions).toEqual([]);
  });

  it('ignores a renewal timer set before the hold read started the renewals anew', () => {
    const claimedFirst = run(start(), [read(undefined, 0, UNVERSIONED), 2], [wrote('claim', { kind: 'won' }), 5]);
    const hedged = run(claimedFirst, [{ kind: 'timer', timer: 'hedge', at: monoMs(200) }, 200]);
    const held = run(hedged, [{ kind: 'hold', hold: undefined }, 300]);

    const { actions } = run(held, [{ kind: 'timer', timer: 'renew', at: monoMs(450) }, 450]);

    expect(timerAt(hedged.actions, 'renew')).toBe(450);
    expect(timerAt(held.actions, 'renew')).toBe(550);
    expect(actions).toEqual([]);
  });

  it('asks the IdP no more at the hedge once it has answered, or settles a hold it read', () => {
    const answered = run(start(), [read(item({ memo: { kept: token('kept'), rejectedAt: epochMs(0) } })), 1]);
    const settlingHold = run(
      start(),
      [read(undefined, 0, UNVERSIONED), 2],
      [{ kind: 'hold', hold: failure('upstream_throttled', 10_000) }, 4],
      [wrote('claim', { kind: 'won' }), 5],
    );
    const hedge: VisitEvent = { kind: 'timer', timer: 'hedge', at: monoMs(200) };

    expect(kinds(settlingHold.actions)).toEqual(['write:settle', 'timer:settle']);
    expect(run(answered, [hedge, 200]).actions).toEqual([]);
    expect(run(settlingHold, [hedge, 200]).actions).toEqual([]);
  });

  it('is over once answered at its deadline while it waited or read', () => {
    const deadline: VisitEvent = { kind: 'timer', timer: 'deadline', at: monoMs(5000) };
    const waiting = run(start(), [read(claimed(), 0), 2]);
    const polling = run(waiting, [{ kind: 'timer', timer: 'poll', at: monoMs(102) }, 102]);

    expect(visitOver(run(waiting, [deadline, 5000]).visit)).toBe(true);
    expect(visitOver(run(polling, [deadline, 5000]).visit)).toBe(true);
  });

  it('answers a timeout of an exchange it started late as its own deadline', () => {
    const waiting = run(start(), [read(claimed(), 0), 2]);
    const polling = run(waiting, [{ kind: 'timer', timer: 'poll', at: monoMs(102) }, 1000]);
    const hedged = run(polling, [{ kind: 'timer', timer: 'hedge', at: monoMs(1200) }, 1200]);

    const { actions } = run(hedged, [{ kind: 'exchanged', result: { failure: failure('upstream_timeout', 1000) } }, 5000]);

    expect(answerOf(actions)).toMatchObject({ failure: { code: 'upstream_timeout' }, cause: 'deadline' });
  });

  it('lets no expired token stand in for a failure, though it still proves the key', () => {
    const expired = token('expired', 3_700_000);

    const { actions } = start({ known: expired, deadline: monoMs(0) });

    expect(answerOf(actions)).toMatchObject({ kind: 'failure', kept: undefined, scope: 'client' });
  });
});
