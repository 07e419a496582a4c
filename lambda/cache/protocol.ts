import {
  type ClaimBounds,
  EMPTY_WATCH,
  judge,
  lineageAfter,
  pollPauseMs,
  type ReadSpan,
  RENEW_EVERY_MS,
  type Verdict,
  waitedFor,
  type Watch,
} from './claims';
import { type ClaimFacts, type Ended, endsAt, type KeyItem, type KeyMemo } from './item-state';
import { type Entry, keepable, newest, openToFleet, phaseOf } from './lifetime';
import { type ExchangeResult, type FailureOutcome, type Outcome, UNKNOWN_REJECTION } from './outcome';
import {
  cutShort,
  decide,
  type Freshness,
  fromFleet,
  holdScope,
  inForce,
  isHold,
  longer,
  outlivesRejection,
  proves,
  type Remembered,
} from './rules';
import { CLOCK_TOLERANCE_MS, type EpochMs, epochMs, leftUntil, type MonoMs, monoMs } from './time';

// The shared tier's protocol for one request's visit of the table, as a pure transition function: given
// what the visit knows and what just happened (a read, a write's result, the IdP's answer, a timer) at a
// moment of both clocks, it returns what the visit knows now and what to do next. No I/O, no clock, no
// randomness of its own: shared-tier.ts does the calls and timers, and the simulator drives the same code.

/** The protocol's constants for one deployment. */
export interface ProtocolSettings extends ClaimBounds {
  /**
   * How long a request waits on table calls before it asks the IdP anyway, keeping whatever the table
   * then gives: an IdP that answers within the deadline then answers the caller, whatever the table does.
   */
  readonly hedgeMs: number;
}

/** What a request brings to its visit, fixed for the visit. */
export interface VisitAsk extends Freshness {
  /** This instance's kept token for the key, and the key's latest rejection it knows of (0: none). */
  readonly known: Entry | undefined;
  readonly rejectedAt: EpochMs;
  /** This instance's memory would refresh the known token ahead. */
  readonly refresh: boolean;
  /** A failure or hold this instance remembers for the key: it decides with the table's, which may know better. */
  readonly remembered: Remembered | undefined;
  readonly deadline: MonoMs;
  /** The name any claim of this visit is made under. */
  readonly holder: string;
  /** A stored credential's key: its secret is the broker's, so a hold it earns covers the credential whatever it kept. */
  readonly vouched: boolean;
}

/**
 * The condition a write overwrites the key's item under: the item is at one of `revs`, or
 * (`unversioned`) it has no string revision (absent, or not ours). More than one revision: the visit's
 * own writes that are out, or whose answers never came, any of which may have landed.
 */
export interface Expected {
  readonly revs: readonly string[];
  readonly unversioned: boolean;
}

/** A read of the key's item: its state (undefined: absent, or anything that does not open), how to overwrite it, when it ran. */
export interface KeyRead extends ReadSpan {
  readonly state: KeyItem | undefined;
  readonly expected: Expected;
}

/** `lost` with no read: the item is absent. `failed`: no answer came (an error, or the call limit): the write may still land. */
export type WriteResult =
  { readonly kind: 'won' } | { readonly kind: 'lost'; readonly read: KeyRead | undefined } | { readonly kind: 'failed' };

type WritePurpose = 'claim' | 'renew' | 'settle' | 'share';
type Timer = 'hedge' | 'poll' | 'renew' | 'settle' | 'deadline';

export type VisitEvent =
  | { readonly kind: 'read'; readonly read: KeyRead | 'failed' }
  | { readonly kind: 'written'; readonly write: WritePurpose; readonly rev: string; readonly result: WriteResult }
  /** The hold on the scopes that cover the key, as read (undefined: none, or the read failed). */
  | { readonly kind: 'hold'; readonly hold: Remembered | undefined }
  | { readonly kind: 'exchanged'; readonly result: ExchangeResult }
  /** A timer the visit set for `at` went off (timers may go off a little early: they are matched by `at`, not by the clock). */
  | { readonly kind: 'timer'; readonly timer: Timer; readonly at: MonoMs };

export type VisitAction =
  | { readonly kind: 'read' }
  /** Write `state` under the new revision `rev`, if the item is as `expected`. */
  | { readonly kind: 'write'; readonly write: WritePurpose; readonly rev: string; readonly state: KeyItem; readonly expected: Expected }
  | { readonly kind: 'read-hold' }
  /** Put a hold on the client's hold item (never shortening a longer one there). */
  | { readonly kind: 'write-hold'; readonly hold: Remembered }
  /** `hedged`: the table was too slow to wait for (the request asks the IdP without it). */
  | { readonly kind: 'exchange'; readonly leftMs: number; readonly refresh: boolean; readonly hedged: boolean }
  | { readonly kind: 'timer'; readonly timer: Timer; readonly at: MonoMs }
  | { readonly kind: 'answer'; readonly outcome: Outcome };

/** Both clocks, read once for a step. */
export interface Now {
  readonly epoch: EpochMs;
  readonly mono: MonoMs;
}

/** What the visit does with the key's item. */
type KeyStage =
  | { readonly kind: 'reading' }
  | { readonly kind: 'waiting'; readonly pollAt: MonoMs }
  | { readonly kind: 'claiming'; readonly facts: ClaimFacts; readonly memo: KeyMemo; readonly ended: readonly Ended[] }
  | {
      readonly kind: 'holding';
      readonly facts: ClaimFacts;
      readonly memo: KeyMemo;
      /** The outcomes of earlier exchanges the claim carries for their waiters. */
      readonly ended: readonly Ended[];
      /** A renewal is out; `retries`: rewrites of it over a revision someone changed under this claim. */
      readonly writing: boolean;
      readonly retries: number;
      readonly renewAt: MonoMs;
    }
  /** The outcome is written (`retries`: again, over what refused it or after no answer came). */
  | { readonly kind: 'settling'; readonly state: KeyItem; readonly retries: number }
  | { readonly kind: 'done' };

type HoldStage =
  { readonly kind: 'unread' } | { readonly kind: 'reading' } | { readonly kind: 'read'; readonly hold: Remembered | undefined };

type ExchangeStage =
  { readonly kind: 'none' } | { readonly kind: 'running'; readonly since: MonoMs } | { readonly kind: 'done'; readonly outcome: Outcome };

export interface Visit {
  readonly ask: VisitAsk;
  readonly settings: ProtocolSettings;
  /** The newest plausible token known that outlives the key's latest rejection (any phase: it proves the key). */
  readonly seen: Entry | undefined;
  readonly rejectedAt: EpochMs;
  /** The key's item was read: its rejections are known, so kept tokens may stand in for failures. */
  readonly confirmed: boolean;
  readonly watch: Watch;
  readonly key: KeyStage;
  readonly hold: HoldStage;
  readonly exchange: ExchangeStage;
  /** When the visit asks the IdP anyway if table work still holds it up; undefined: not armed. */
  readonly hedgeAt: MonoMs | undefined;
  /** The exchange this visit may make refreshes a kept token ahead. */
  readonly refresh: boolean;
  /** The highest beat this visit wrote, so every claim it writes is a renewal to those who saw an earlier one. */
  readonly beat: number;
  /** Conditional writes of claims refused in this visit: a few, then it goes on without the table. */
  readonly refusals: number;
  /** A failure to answer if nothing better comes by the deadline. */
  readonly fallback: FailureOutcome | undefined;
  /** The item as this visit last saw it (a read, or a refused write's answer): where a token it got is shared. */
  readonly lastRead: KeyRead | undefined;
  /**
   * What the key's item may be at, as far as this visit knows: what it last read or wrote, and its own
   * writes since that are out or never answered. Each write goes over all of them, so a write whose
   * answer is late never strands the visit's claim: whichever lands first, the next lands over it.
   */
  readonly item: Expected;
  /** Writes sent: each names its revision after the holder and this count. */
  readonly sent: number;
  /** Share writes made: one, and one more over what refused it. */
  readonly shares: number;
  readonly answered: boolean;
}

export interface Step {
  readonly visit: Visit;
  readonly actions: readonly VisitAction[];
}

/** Claims a visit may have refused before it goes on without the table. */
export const MAX_REFUSALS = 3;
/** Rewrites of one renewal or settle over a revision someone else changed under a live claim. */
const MAX_REWRITES = 2;

/** A visit's first step: read the key's item, and arm the hedge and the deadline. */
export function startVisit(ask: VisitAsk, settings: ProtocolSettings, now: Now): Step {
  const visit: Visit = {
    ask,
    settings,
    seen: proves(ask.known, ask.rejectedAt, now.epoch) ? ask.known : undefined,
    rejectedAt: ask.rejectedAt,
    confirmed: false,
    watch: EMPTY_WATCH,
    key: { kind: 'reading' },
    hold: { kind: 'unread' },
    exchange: { kind: 'none' },
    hedgeAt: monoMs(now.mono + settings.hedgeMs),
    refresh: ask.refresh,
    beat: -1,
    refusals: 0,
    fallback: undefined,
    lastRead: undefined,
    item: { revs: [], unversioned: false },
    sent: 0,
    shares: 0,
    answered: false,
  };
  if (leftUntil(ask.deadline, now.mono) <= 0) return answer(visit, deadlineOutcome(visit, now));
  return {
    visit,
    actions: [
      { kind: 'read' },
      { kind: 'timer', timer: 'hedge', at: visit.hedgeAt as MonoMs },
      { kind: 'timer', timer: 'deadline', at: ask.deadline },
    ],
  };
}

/** The visit once `event` happened at `now`, and what to do next. */
export function step(visit: Visit, event: VisitEvent, now: Now): Step {
  switch (event.kind) {
    case 'read':
      if (visit.key.kind !== 'reading') return { visit, actions: [] };
      if (event.read !== 'failed') return decideFrom(visit, event.read, now);
      return visit.watch.last === undefined ? withoutTable({ ...visit, key: { kind: 'done' } }, now) : pollAgain(visit, now);
    case 'written':
      return written(visit, event.write, event.rev, event.result, now);
    case 'hold': {
      // Kept as read: honoured (fromFleet) where it decides, never written back honoured.
      const read: Visit = { ...visit, hold: { kind: 'read', hold: event.hold } };
      return read.key.kind === 'done' ? withoutTable(read, now) : proceedAsHolder(read, now);
    }
    case 'exchanged':
      return exchanged(visit, event.result, now);
    case 'timer':
      return timer(visit, event.timer, event.at, now);
  }
}

/** Whether the visit has nothing more to do: answered, and done with the key's item. */
export function visitOver(visit: Visit): boolean {
  return visit.answered && visit.key.kind === 'done';
}

/** Decide from a read of the key's item (or the item a refused write returned). */
function decideFrom(before: Visit, read: KeyRead, now: Now): Step {
  const visit = { ...learn(before, read.state, now), lastRead: read, item: read.expected };
  const activity = read.state?.activity;
  const ended = read.state?.ended ?? [];
  const mine = [...ended].reverse().find((outcome) => waitedFor(visit.watch, outcome.holder, outcome.lineage));
  if (mine) {
    const done = { ...visit, key: { kind: 'done' } as const };
    if (mine.outcome.kind === 'answered') return answer(done, { kind: 'token', entry: fleetEntry(mine.outcome.entry), from: 'table' });
    return failed(done, outcomeOf(done, mine.outcome.failure, 'exchange', now));
  }
  let watch = visit.watch;
  let verdict: Verdict | undefined;
  if (activity?.kind === 'claim') {
    ({ watch, verdict } = judge(watch, activity.claim, read, now.epoch, leftUntil(visit.ask.deadline, now.mono), visit.settings));
  }
  const lastFailure = [...ended].reverse().find((outcome) => outcome.outcome.kind === 'failure')?.outcome;
  const table = lastFailure?.kind === 'failure' ? fromFleet(lastFailure.failure, now.epoch) : undefined;
  const remembered = [table, inForce(visit.ask.remembered, now.epoch) ? visit.ask.remembered : undefined];
  const entry = usable(visit.seen, now.epoch);
  const busy = verdict === 'alive';
  const view = {
    entry,
    failure: remembered.find((failure) => failure && !isHold(failure)),
    hold: [...remembered, visit.hold.kind === 'read' ? fromFleet(visit.hold.hold, now.epoch) : undefined]
      .filter((hold) => hold && isHold(hold))
      .reduce(longer, undefined),
    busy,
    // A token only the table has is the asker's to refresh early in the window (lifetime.ts, openToFleet).
    refreshing: busy || (entry !== undefined && entry !== visit.ask.known && !openToFleet(entry, now.epoch)),
  };
  const plan = decide(view, visit.ask, now.epoch);
  const decided = { ...visit, watch };
  switch (plan.act) {
    case 'answer':
      return answer(
        { ...decided, key: { kind: 'done' } },
        { kind: 'token', entry: plan.entry, from: plan.entry === visit.ask.known ? 'memory' : 'table' },
      );
    case 'fail':
      return failed({ ...decided, key: { kind: 'done' } }, outcomeOf(decided, plan.failure, plan.cause, now));
    case 'wait': {
      const pollAt = monoMs(now.mono + pollPauseMs(leftUntil(visit.ask.deadline, now.mono), 0.5));
      // A live holder is the exchange this request shares: no hedge while the table answers.
      return {
        visit: { ...decided, key: { kind: 'waiting', pollAt }, hedgeAt: undefined },
        actions: [{ kind: 'timer', timer: 'poll', at: pollAt }],
      };
    }
    case 'exchange': {
      const lineage = activity?.kind === 'claim' && verdict !== 'implausible' ? lineageAfter(activity.claim) : [];
      return claim({ ...decided, refresh: plan.refresh }, lineage, carried(ended, now), now);
    }
  }
}

/** What a read teaches: the item's rejection and kept token, merged with what the visit knew. */
function learn(visit: Visit, state: KeyItem | undefined, now: Now): Visit {
  const memo = state?.memo;
  const rejectedAt = epochMs(Math.max(visit.rejectedAt, memo?.rejectedAt ?? 0));
  const candidates = [visit.seen, memo?.kept ? fleetEntry(memo.kept) : undefined].filter(
    (entry): entry is Entry =>
      entry !== undefined && entry.receivedAt <= now.epoch + CLOCK_TOLERANCE_MS && proves(entry, rejectedAt, now.epoch),
  );
  return { ...visit, rejectedAt, confirmed: true, seen: candidates.reduce<Entry | undefined>(newest, undefined) };
}

/** Write a claim on the key over what the read saw, and read the hold alongside if not yet read. The read's hedge bounds both. */
function claim(visit: Visit, lineage: readonly string[], ended: readonly Ended[], now: Now): Step {
  const beat = visit.beat + 1;
  const facts: ClaimFacts = {
    holder: visit.ask.holder,
    beat,
    leftMs: leftUntil(visit.ask.deadline, now.mono),
    runMs: visit.exchange.kind === 'running' ? now.mono - visit.exchange.since : 0,
    claimedAt: now.epoch,
    lineage,
  };
  const memo = memoOf(visit);
  const readHold = visit.hold.kind === 'unread';
  const sent = write(visit, 'claim', { kind: 'key', memo, activity: { kind: 'claim', claim: facts }, ended });
  return {
    visit: { ...sent.visit, beat, key: { kind: 'claiming', facts, memo, ended }, hold: readHold ? { kind: 'reading' } : visit.hold },
    actions: [sent.action, ...(readHold ? [{ kind: 'read-hold' } as const] : [])],
  };
}

/** Send a write over whatever the item may be at; from then on it may be at this write's revision too. */
function write(visit: Visit, purpose: WritePurpose, state: KeyItem, expected = visit.item): { visit: Visit; action: VisitAction } {
  const rev = `${visit.ask.holder}.${visit.sent}`;
  return {
    visit: { ...visit, sent: visit.sent + 1, item: { ...visit.item, revs: [...visit.item.revs, rev].slice(-REVS_KEPT) } },
    action: { kind: 'write', write: purpose, rev, state, expected },
  };
}

// The revisions a condition allows: more than a visit has out or unanswered but while the table fails.
const REVS_KEPT = 8;

/**
 * What the item may be at once the write `rev` answered: its revision (and this visit's writes sent
 * after it), what refused it (absent, when the refusal came with no item), or, with no answer, as before.
 */
function afterWrite(item: Expected, rev: string, result: WriteResult): Expected {
  const later = item.revs.slice(item.revs.indexOf(rev) + 1);
  switch (result.kind) {
    case 'won':
      return { revs: [rev, ...later], unversioned: false };
    case 'lost':
      return result.read
        ? { revs: [...result.read.expected.revs, ...later], unversioned: result.read.expected.unversioned }
        : { revs: later, unversioned: true };
    case 'failed':
      return item;
  }
}

type Holding = Extract<KeyStage, { kind: 'holding' }>;
type Claimed = Extract<KeyStage, { kind: 'claiming' | 'holding' }>;

function written(before: Visit, purpose: WritePurpose, rev: string, result: WriteResult, now: Now): Step {
  const visit = { ...before, item: afterWrite(before.item, rev, result) };
  const { key } = visit;
  if (purpose === 'claim' && key.kind === 'claiming') return claimWritten(visit, key, result, now);
  if (purpose === 'renew' && key.kind === 'holding') return renewWritten(visit, key, result, now);
  if (purpose === 'settle' && key.kind === 'settling') return settleWritten(visit, key, result, now);
  // One more try of a share, over what the item holds now.
  if (purpose === 'share' && result.kind === 'lost' && result.read && visit.exchange.kind === 'done') {
    return share({ ...visit, lastRead: result.read }, visit.exchange.outcome, now);
  }
  return { visit, actions: [] };
}

function claimWritten(visit: Visit, key: Extract<KeyStage, { kind: 'claiming' }>, result: WriteResult, now: Now): Step {
  if (result.kind !== 'lost') {
    // A claim whose answer never came may have landed: the visit holds it as far as the item tells, and
    // its next write, over the claim or what it claimed, finds out.
    const held: Holding = {
      kind: 'holding',
      facts: key.facts,
      memo: key.memo,
      ended: key.ended,
      writing: false,
      retries: 0,
      renewAt: now.mono,
    };
    return proceedAsHolder({ ...visit, key: held }, now);
  }
  const refused = { ...visit, refusals: visit.refusals + 1 };
  if (refused.refusals >= MAX_REFUSALS) return withoutTable({ ...refused, key: { kind: 'done' } }, now);
  if (result.read) return decideFrom({ ...refused, key: { kind: 'reading' } }, result.read, now);
  return { visit: { ...refused, key: { kind: 'reading' } }, actions: [{ kind: 'read' }] };
}

function renewWritten(visit: Visit, key: Holding, result: WriteResult, now: Now): Step {
  // A holder's exchange runs until it ends, and then the claim is settled: renewals answer while it runs.
  const { since } = visit.exchange as Extract<ExchangeStage, { kind: 'running' }>;
  if (result.kind !== 'lost') {
    const held = { ...key, writing: false, retries: 0 };
    return scheduleRenewal({ ...visit, key: held }, held, now);
  }
  const { read } = result;
  if (read && ownClaim(visit, read) && key.retries < MAX_REWRITES) {
    // Someone changed the revision under this claim, perhaps to share a token: keep what the item holds.
    const learned = { ...learn(visit, read.state, now), lastRead: read };
    const held = { ...key, memo: memoOf(learned), retries: key.retries + 1 };
    const sent = write({ ...learned, key: held }, 'renew', renewal(learned, held, since, now));
    return { visit: sent.visit, actions: [sent.action] };
  }
  // Another instance counted this holder as gone and took over: its outcome is its own to write.
  return takenOver({ ...visit, lastRead: read ?? visit.lastRead }, now);
}

function settleWritten(visit: Visit, key: Extract<KeyStage, { kind: 'settling' }>, result: WriteResult, now: Now): Step {
  if (result.kind === 'failed' && key.retries < MAX_REWRITES) {
    // A settle left unwritten leaves a silent claim for the next request to wait out: once more, over either revision.
    const sent = write({ ...visit, key: { ...key, retries: key.retries + 1 } }, 'settle', key.state);
    return { visit: sent.visit, actions: [sent.action] };
  }
  const read = result.kind === 'lost' ? result.read : undefined;
  if (read && ownClaim(visit, read) && key.retries < MAX_REWRITES) {
    const learned = learn(visit, read.state, now);
    const state = { ...key.state, memo: newerMemo(key.state.memo, memoOf(learned)) };
    const sent = write({ ...learned, lastRead: read, key: { ...key, state, retries: key.retries + 1 } }, 'settle', state);
    return { visit: sent.visit, actions: [sent.action] };
  }
  // Landed, failed, or taken over: the new holder's outcome is its own, but a token this one got is shared.
  return result.kind === 'lost'
    ? takenOver({ ...visit, lastRead: read ?? visit.lastRead }, now)
    : answerExchange({ ...visit, key: { kind: 'done' } });
}

/** Whether a refused write's item is this visit's own claim under a revision someone else changed. */
function ownClaim(visit: Visit, read: KeyRead): boolean {
  const activity = read.state?.activity;
  return activity?.kind === 'claim' && activity.claim.holder === visit.ask.holder;
}

/** As the holder: once the hold is known, ask the IdP (renewing the claim meanwhile), or settle the hold. */
function proceedAsHolder(visit: Visit, now: Now): Step {
  const { key } = visit;
  if (key.kind !== 'holding' || visit.hold.kind !== 'read') return { visit, actions: [] };
  // An exchange the hedge started before the claim landed is the holder's exchange.
  if (visit.exchange.kind === 'running') return scheduleRenewal(visit, key, now);
  const read = visit.hold.hold;
  const hold = fromFleet(read, now.epoch);
  if (hold) {
    const outcome = outcomeOf(visit, hold, 'hold', now);
    // The waiters get the hold as the fleet wrote it, and honour it themselves.
    return settle({ ...visit, exchange: { kind: 'done', outcome } }, key, outcome, now, read);
  }
  return exchangeAsHolder(visit, key, now);
}

/** Ask the IdP as the holder, renewing the claim meanwhile (`hedged`: without waiting any longer for the hold read). */
function exchangeAsHolder(visit: Visit, key: Holding, now: Now, hedged = false): Step {
  const started = startExchange(visit, now, hedged);
  const renewing = scheduleRenewal(started.visit, key, now);
  return { visit: renewing.visit, actions: [...started.actions, ...renewing.actions] };
}

function scheduleRenewal(visit: Visit, key: Holding, now: Now): Step {
  const renewAt = monoMs(now.mono + RENEW_EVERY_MS);
  return { visit: { ...visit, key: { ...key, renewAt } }, actions: [{ kind: 'timer', timer: 'renew', at: renewAt }] };
}

/** The claim again under this visit's latest beat, with what is left of the deadline and how long the exchange has run. */
function renewal(visit: Visit, held: Holding, since: MonoMs, now: Now): KeyItem {
  const claim = { ...held.facts, beat: visit.beat, leftMs: leftUntil(visit.ask.deadline, now.mono), runMs: now.mono - since };
  return { kind: 'key', memo: held.memo, activity: { kind: 'claim', claim }, ended: held.ended };
}

function startExchange(visit: Visit, now: Now, hedged = false): Step {
  const left = leftUntil(visit.ask.deadline, now.mono);
  return {
    visit: { ...visit, exchange: { kind: 'running', since: now.mono }, hedgeAt: undefined },
    actions: [{ kind: 'exchange', leftMs: left, refresh: visit.refresh, hedged }],
  };
}

/**
 * The key's item is of no more use to this visit: the IdP decides, with what is left of the deadline,
 * once a hold read under way has answered (or the hedge, armed since the claim, has passed): a hold is
 * never run through.
 */
function withoutTable(visit: Visit, now: Now): Step {
  // An exchange that has ended has answered already.
  if (visit.answered || visit.exchange.kind !== 'none') return { visit, actions: [] };
  if (leftUntil(visit.ask.deadline, now.mono) <= 0) return answer(visit, deadlineOutcome(visit, now));
  if (visit.hold.kind === 'reading') return { visit, actions: [] };
  const hold = visit.hold.kind === 'read' ? fromFleet(visit.hold.hold, now.epoch) : undefined;
  if (hold) return answer(visit, outcomeOf(visit, hold, 'hold', now));
  return startExchange(visit, now);
}

function exchanged(before: Visit, result: ExchangeResult, now: Now): Step {
  let visit = before;
  const { since } = visit.exchange as Extract<ExchangeStage, { kind: 'running' }>;
  if ('failure' in result && result.failure.code === 'unauthorized') {
    // A rejection voids every token of the key received before it.
    visit = { ...visit, seen: undefined, rejectedAt: now.epoch };
  }
  // A timeout the cache's own waiting cut short is this visit's deadline, not the IdP's failure.
  const cause =
    'failure' in result && cutShort(result.failure, visit.ask.deadline - since, visit.settings.upstreamTimeoutMs) ? 'deadline' : 'exchange';
  const outcome: Outcome =
    'token' in result ? { kind: 'token', entry: result.token, from: 'idp' } : outcomeOf(visit, result.failure, cause, now);
  visit = { ...visit, exchange: { kind: 'done', outcome } };
  const holdWrite: VisitAction[] =
    outcome.kind === 'failure' && isHold(outcome.failure) && outcome.scope === 'client'
      ? [{ kind: 'write-hold', hold: outcome.failure }]
      : [];
  const next = (() => {
    const { key } = visit;
    switch (key.kind) {
      case 'holding':
        // Over the claim as last written or as a renewal still out leaves it: the caller never waits on a renewal.
        return settle(visit, key, outcome, now);
      case 'claiming': {
        // The hedge sent this exchange: the table is slow. The outcome goes out over the claim or what it
        // claimed, whichever the item holds when it lands, and the caller has it at once.
        const settled = settle(visit, key, outcome, now);
        const answered = answer(settled.visit, outcome);
        return { visit: answered.visit, actions: [...settled.actions, ...answered.actions] };
      }
      case 'waiting':
        // A failure of this visit's own exchange waits for the live holder's outcome, which may be a token.
        if (outcome.kind === 'failure') return { visit: { ...visit, fallback: outcome }, actions: [] };
        return answerAndShare(visit, outcome, now);
      default:
        return answerAndShare(visit, outcome, now);
    }
  })();
  return { visit: next.visit, actions: [...holdWrite, ...next.actions] };
}

/**
 * Replace the claim with the outcome where the waiters read it; the caller gets its answer once that
 * landed, or after the hedge. `recorded`: a hold as the fleet wrote it, in place of the one honoured here.
 */
function settle(visit: Visit, held: Claimed, outcome: Outcome, now: Now, recorded?: Remembered): Step {
  const memo = memoOf(visit);
  const { holder } = visit.ask;
  const { lineage } = held.facts;
  const ended = carried(held.ended, now);
  let state: KeyItem;
  if (outcome.kind === 'token') {
    // The token goes to those who waited for this exchange by name, whatever the item holds by the time
    // they read it (a later claim carries it); a keepable one is kept for later requests too.
    const until = epochMs(now.epoch + visit.settings.upstreamTimeoutMs);
    state = {
      kind: 'key',
      memo: keepable(outcome.entry.token) ? { ...memo, kept: outcome.entry } : memo,
      activity: { kind: 'idle' },
      ended: [...ended, { holder, lineage, outcome: { kind: 'answered', entry: outcome.entry, until } }],
    };
  } else if (outcome.cause === 'deadline') {
    // Cut short by the cache's own waiting: nothing for anyone to learn; the key is free to claim again.
    state = { kind: 'key', memo, activity: { kind: 'idle' }, ended };
  } else {
    const failure = recorded ?? outcome.failure;
    state = {
      kind: 'key',
      memo,
      activity: { kind: 'idle' },
      ended: [...ended, { holder, lineage, outcome: { kind: 'failure', failure } }],
    };
  }
  const settleAt = monoMs(now.mono + visit.settings.hedgeMs);
  const sent = write({ ...visit, key: { kind: 'settling', state, retries: 0 } }, 'settle', state);
  return { visit: sent.visit, actions: [sent.action, { kind: 'timer', timer: 'settle', at: settleAt }] };
}

/** A holder another instance took over: it answers its own caller with its own exchange, and shares a token it got. */
function takenOver(visit: Visit, now: Now): Step {
  const done = { ...visit, key: { kind: 'done' } as const };
  return done.exchange.kind === 'done' ? answerAndShare(done, done.exchange.outcome, now) : withoutTable(done, now);
}

/** Answer with the visit's own exchange, and share its token if it got one. */
function answerAndShare(visit: Visit, outcome: Outcome, now: Now): Step {
  const answered = answer(visit, outcome);
  const shared = share(answered.visit, outcome, now);
  return { visit: shared.visit, actions: [...answered.actions, ...shared.actions] };
}

/**
 * Put a keepable token this visit's own exchange brought, without holding the key's claim (taken over,
 * or asked the IdP while the table was slow), into the item as the visit last saw it, keeping whatever
 * claim and outcomes it holds: one conditional write, and one more over what refused it.
 */
function share(visit: Visit, outcome: Outcome, now: Now): Step {
  // Only this visit's own exchange gives a token here: always the IdP's.
  if (outcome.kind !== 'token' || !keepable(outcome.entry.token) || visit.lastRead === undefined || visit.shares >= 2) {
    return { visit, actions: [] };
  }
  const base = visit.lastRead.state;
  // The item has a token that answers: nothing to add, and what another holder wrote stays.
  if (base?.memo.kept && phaseOf(base.memo.kept, now.epoch) === 'fresh') return { visit, actions: [] };
  const memo = newerMemo(base?.memo ?? { kept: null, rejectedAt: epochMs(0) }, { kept: outcome.entry, rejectedAt: visit.rejectedAt });
  const state: KeyItem = { kind: 'key', memo, activity: base?.activity ?? { kind: 'idle' }, ended: carried(base?.ended ?? [], now) };
  const sent = write({ ...visit, shares: visit.shares + 1 }, 'share', state, visit.lastRead.expected);
  return { visit: sent.visit, actions: [sent.action] };
}

/** Two memos as one: the newer token that outlives the later rejection. */
function newerMemo(a: KeyMemo, b: KeyMemo): KeyMemo {
  const rejectedAt = epochMs(Math.max(a.rejectedAt, b.rejectedAt));
  const kept = [a.kept, b.kept]
    .filter((entry): entry is Entry => entry !== null && outlivesRejection(entry, rejectedAt))
    .reduce<Entry | undefined>(newest, undefined);
  return { kept: kept ?? null, rejectedAt };
}

function timer(visit: Visit, which: Timer, at: MonoMs, now: Now): Step {
  const { key } = visit;
  switch (which) {
    case 'hedge':
      if (visit.answered || visit.exchange.kind !== 'none' || visit.hedgeAt !== at) return { visit, actions: [] };
      return key.kind === 'holding' ? exchangeAsHolder(visit, key, now, true) : startExchange(visit, now, true);
    case 'poll':
      if (key.kind !== 'waiting' || key.pollAt !== at) return { visit, actions: [] };
      return pollNow(visit, now);
    case 'renew': {
      if (key.kind !== 'holding' || key.writing || visit.exchange.kind !== 'running' || key.renewAt !== at) return { visit, actions: [] };
      const renewing = { ...visit, beat: visit.beat + 1 };
      const sent = write({ ...renewing, key: { ...key, writing: true } }, 'renew', renewal(renewing, key, visit.exchange.since, now));
      return { visit: sent.visit, actions: [sent.action] };
    }
    case 'settle':
      return key.kind === 'settling' ? answerExchange(visit) : { visit, actions: [] };
    case 'deadline':
      if (visit.exchange.kind === 'done') return answerExchange(visit);
      return answer(visit, visit.fallback ?? deadlineOutcome(visit, now));
  }
}

function pollNow(visit: Visit, now: Now): Step {
  // A poll the table is slow to answer must not hold the request up: the hedge is armed again for it.
  const hedgeAt = visit.exchange.kind === 'none' ? monoMs(now.mono + visit.settings.hedgeMs) : undefined;
  return {
    visit: { ...visit, key: { kind: 'reading' }, hedgeAt },
    actions: [{ kind: 'read' }, ...(hedgeAt === undefined ? [] : [{ kind: 'timer', timer: 'hedge', at: hedgeAt } as const])],
  };
}

/**
 * A poll that failed while a live holder's exchange runs: the holder may still put its token where the
 * next poll sees it, so the waiter polls on, and asks the IdP itself meanwhile; the first token answers.
 */
function pollAgain(visit: Visit, now: Now): Step {
  const started = visit.exchange.kind === 'none' ? startExchange(visit, now, true) : { visit, actions: [] };
  const pollAt = monoMs(now.mono + pollPauseMs(leftUntil(visit.ask.deadline, now.mono), 0.5));
  return {
    visit: { ...started.visit, key: { kind: 'waiting', pollAt } },
    actions: [...started.actions, { kind: 'timer', timer: 'poll', at: pollAt }],
  };
}

/** Answer with the outcome of the visit's own exchange (the visit has one by then). */
function answerExchange(visit: Visit): Step {
  return answer(visit, (visit.exchange as Extract<ExchangeStage, { kind: 'done' }>).outcome);
}

/** A failure the table gave: answered at once, unless this visit's own exchange may still give a token. */
function failed(visit: Visit, outcome: FailureOutcome): Step {
  if (visit.exchange.kind === 'running') return { visit: { ...visit, fallback: outcome }, actions: [] };
  return answer(visit, outcome);
}

function answer(visit: Visit, outcome: Outcome): Step {
  if (visit.answered) return { visit, actions: [] };
  // A read or a wait is of no more use once the caller has its answer; writes under way still land.
  const key = visit.key.kind === 'reading' || visit.key.kind === 'waiting' ? ({ kind: 'done' } as const) : visit.key;
  return { visit: { ...visit, answered: true, key }, actions: [{ kind: 'answer', outcome }] };
}

/** A failure as this visit answers it: with the newest token that may stand in, and whom a hold covers. */
function outcomeOf(visit: Visit, failure: Remembered, cause: FailureOutcome['cause'], now: Now): FailureOutcome {
  const scope = holdScope(visit.ask.vouched, visit.seen, visit.rejectedAt, now.epoch);
  const rejectedAt = visit.confirmed ? visit.rejectedAt : UNKNOWN_REJECTION;
  return { kind: 'failure', failure, kept: usable(visit.seen, now.epoch), rejectedAt, scope, cause };
}

function deadlineOutcome(visit: Visit, now: Now): FailureOutcome {
  return outcomeOf(visit, { code: 'upstream_timeout', until: now.epoch }, 'deadline', now);
}

/** What every item this visit writes remembers: the newest token that proves the key, and its latest rejection. */
function memoOf(visit: Visit): KeyMemo {
  return { kept: visit.seen ?? null, rejectedAt: visit.rejectedAt };
}

/** A token that may answer at `now`: not expired. */
function usable(entry: Entry | undefined, now: EpochMs): Entry | undefined {
  return entry && phaseOf(entry, now) !== 'expired' ? entry : undefined;
}

const fleetEntry = (entry: Entry): Entry => ({ ...entry, fleet: true });

// The outcomes a write carries forward: those still of use to someone (within the clocks' tolerance), the last few.
const ENDED_KEPT = 4;

function carried(ended: readonly Ended[], now: Now): readonly Ended[] {
  return ended.filter((outcome) => endsAt(outcome) + CLOCK_TOLERANCE_MS > now.epoch).slice(-ENDED_KEPT);
}
