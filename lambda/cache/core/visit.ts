import { type EpochMs, epochMs, type MonoMs, monoMs } from '../../clock';
import {
  type ClaimFacts,
  echoesOf,
  EMPTY_WATCH,
  judge,
  lineageAfter,
  marked,
  type ReadSpan,
  type Verdict,
  waitedFor,
  type Watch,
  withEcho,
} from './claims';
import {
  EMPTY_MEMO,
  entryOf,
  type Ended,
  endsAt,
  keeping,
  type KeyItem,
  type KeyMemo,
  provingOnly,
  type SharedOutcome,
  storedOf,
} from './item';
import { CLOCK_TOLERANCE_MS, type Entry, expiresAt, keepable, newest, openToFleet, phaseOf, served, tokenBytes } from './lifetime';
import { type ExchangeResult, type FailureOutcome, type Outcome, tokenOutcome } from './outcome';
import {
  answersNoCache,
  cutShort,
  decide,
  type Freshness,
  fromFleet,
  happenedAt,
  holdScope,
  inForce,
  isHold,
  type KeyView,
  laterRejection,
  longer,
  outlastsTimeout,
  receivedSince,
  proves,
  type Rejection,
  type Remembered,
} from './rules';
import { type CacheSettings, type Hedge, pollPauseMs } from './settings';

// One request's visit to the shared table, as a pure transition function: given what the visit knows
// and what just happened (a read, a write's answer, the IdP's answer, the time) it returns what the
// visit knows now and what to do. No I/O, no clock, no randomness: shell/shared-tier.ts makes the calls
// and sets the one timer `wakeAt` asks for, and the simulator drives the same code.

/** What a request brings to its visit, fixed for the visit. */
export interface VisitAsk extends Freshness {
  /** What this instance's memory knows of the key: what the visit does when the table says nothing in time. */
  readonly memory: KeyView;
  /** The key's latest rejection this instance knows of. */
  readonly rejection: Rejection;
  readonly deadline: MonoMs;
  /** The instance the visit runs on: a token it received itself comes back from the table as its own, not a copy. */
  readonly instance: string;
  /** The name the visit's claims, marks and writes go under. */
  readonly holder: string;
  /** A stored credential's key: its secret is the broker's, so a hold it earns covers the credential whatever it kept. */
  readonly vouched: boolean;
  /** When this instance switched to a rotated pepper (0: never): a token it received before goes into no item sealed with the new one. */
  readonly pepperSwitchedAt: EpochMs;
}

/** The condition a write goes over: the item is at one of `revs`, or (`unversioned`) has no string revision (absent, or not ours). */
export interface Expected {
  readonly revs: readonly string[];
  readonly unversioned: boolean;
}

/** A read of the key's item: its state (undefined: absent, or anything that does not open), how to overwrite it, when it ran. */
export interface KeyRead extends ReadSpan {
  readonly state: KeyItem | undefined;
  readonly expected: Expected;
}

/** `lost`: refused, with the item that refused it (none: absent, or not ours). `failed`: no answer came: the write may still have landed. */
export type WriteResult = { readonly kind: 'won' } | { readonly kind: 'lost'; readonly read: KeyRead } | { readonly kind: 'failed' };

export type WriteKind = 'claim' | 'renew' | 'mark' | 'publish';

export type VisitEvent =
  | { readonly kind: 'read'; readonly read: KeyRead | 'failed' }
  /** The longest hold on the scopes that cover the key, as read; `failed`: the read gave nothing. */
  | { readonly kind: 'holds'; readonly hold: Remembered | undefined | 'failed' }
  | { readonly kind: 'written'; readonly write: WriteKind; readonly rev: string; readonly result: WriteResult }
  | { readonly kind: 'hold-written' }
  | { readonly kind: 'exchanged'; readonly result: ExchangeResult }
  /** The exchange was not sent: a hold this instance learnt meanwhile (its own 429 for another request) forbids it. */
  | { readonly kind: 'held'; readonly hold: Remembered }
  /**
   * The time `at` the visit asked to be woken at came. Timers may go off a hair early (whole-millisecond
   * loops, rounding): a tick counts as at least `at`, so what was due then is done. `hedgeMs`: the hedge
   * (from the visit's start) that what the table has been answering in lately calls for now (hedgeFor).
   */
  | { readonly kind: 'tick'; readonly at: MonoMs; readonly hedgeMs: number };

export type VisitAction =
  | { readonly kind: 'read' }
  | { readonly kind: 'read-holds' }
  /** Write `state` under the new revision `rev`, if the item is as `expected`. */
  | { readonly kind: 'write'; readonly write: WriteKind; readonly rev: string; readonly state: KeyItem; readonly expected: Expected }
  /** Put a hold on the hold item a proven key's hold goes to, never shortening a longer one there. */
  | { readonly kind: 'write-hold'; readonly hold: Remembered }
  /** Ask the IdP; `hedged`: the table was too slow or failing to wait for. */
  | { readonly kind: 'exchange'; readonly refresh: boolean; readonly hedged: boolean }
  | { readonly kind: 'answer'; readonly outcome: Outcome }
  /** Its own exchange's outcome, for this instance's memory at once: the next request there knows it, answered or not. */
  | { readonly kind: 'met'; readonly outcome: Outcome }
  /** It waits on a holder whose deadline ends by `until`: a request here whose own ends much later need not share the wait. */
  | { readonly kind: 'waits'; readonly until: MonoMs };

/** Both clocks, read once for a step. */
export interface Now {
  readonly epoch: EpochMs;
  readonly mono: MonoMs;
}

/** An exchange of this visit's, running since `since`. */
interface Running {
  readonly since: MonoMs;
  /** The latest rejection this visit knew when it asked: its token comes after it. */
  readonly after: EpochMs;
}

/** What the hold items told: not asked, being read, read, or unreadable. */
type Holds = { readonly kind: 'unread' | 'reading' | 'failed' } | { readonly kind: 'read'; readonly hold: Remembered | undefined };

/**
 * Where the visit is, as one whole situation: what it waits for, and the exchange it runs if any.
 * The caller's answer is apart (`answered`): a visit may still publish after it answered.
 */
type Situation =
  /** The key's item is being read (or was, and the holds that may lengthen a hold it shows are); the hedge bounds the wait. */
  | { readonly kind: 'reading'; readonly hedgeAt: MonoMs; readonly read?: KeyRead }
  /** A claim is out (and, once the hedge passed, the exchange runs meanwhile). */
  | { readonly kind: 'claiming'; readonly claim: ClaimFacts; readonly hedgeAt: MonoMs; readonly exchange: Running | undefined }
  /** The claim is held; the holds are still being read (the hedge bounds it). */
  | { readonly kind: 'claimed'; readonly claim: ClaimFacts; readonly hedgeAt: MonoMs }
  /** The claim is held and the exchange runs; the claim is renewed every `renewEveryMs`. */
  | {
      readonly kind: 'holding';
      readonly claim: ClaimFacts;
      readonly exchange: Running;
      readonly renewAt: MonoMs;
      readonly renewing: boolean;
      readonly rewrites: number;
    }
  /** Another holder's exchange runs: its outcome is this request's; `pollAt` undefined while a read or mark is out. */
  | {
      readonly kind: 'waiting';
      readonly pollAt: MonoMs | undefined;
      readonly marks: number;
      readonly exchange: Running | undefined;
    }
  /** The exchange runs without a claim: the table is slow, failing, contended, or this visit was taken over. */
  | { readonly kind: 'asking'; readonly exchange: Running }
  /**
   * Another's claim took this holder's place while its exchange runs (one that outlasts it, or took it for silent):
   * it reads the item every renewal, and claims again once the item is idle or its claim was given back, so that
   * the fleet never takes the key for free while its exchange runs. `pollAt` undefined while a read is out.
   */
  | { readonly kind: 'displaced'; readonly claim: ClaimFacts; readonly exchange: Running; readonly pollAt: MonoMs | undefined }
  /** The outcome is being written; the caller has it once the writes it waits for landed, or at `answerAt`. */
  | {
      readonly kind: 'publishing';
      readonly outcome: Outcome;
      /** The claim the visit held, which the outcome replaces (its lineage names those who waited for it). */
      readonly claim: ClaimFacts | undefined;
      /** A hold as the fleet wrote it, which the outcome settles for the waiters in place of the one honoured here. */
      readonly recorded: Remembered | undefined;
      readonly state: KeyItem;
      readonly retries: number;
      readonly answerAt: MonoMs;
      readonly awaiting: { readonly key: boolean; readonly hold: boolean };
    }
  | { readonly kind: 'done' };

export interface Visit {
  readonly ask: VisitAsk;
  readonly settings: CacheSettings;
  /** When the visit started, and how long it waits on the table before it asks the IdP anyway (settings.ts, hedgeFor). */
  readonly startedAt: MonoMs;
  readonly hedgeMs: number;
  /** The latest its hedge may stretch to once the table answers slowly: the IdP's room in the deadline. */
  readonly hedgeCapAt: MonoMs;
  /** What the visit does with the key's item. */
  readonly situation: Situation;
  readonly answered: boolean;
  /** The newest token known that outlives the key's latest rejection (any phase: it proves the key). */
  readonly seen: Entry | undefined;
  /** Whether the item showed `seen`: one kept from before a pepper switch may have a 401 only the old items know. */
  readonly seenInItem: boolean;
  readonly rejection: Rejection;
  /** The key's item was read: its rejections are known, so kept tokens may stand in for failures. */
  readonly confirmed: boolean;
  /** The key's tokens are known too large for an item: no claim is waited on, none is made. */
  readonly oversize: boolean;
  /** The item's remembered failure and the longest hold on the key alone it carries, as read. */
  readonly tableFailure: Remembered | undefined;
  readonly tableHold: Remembered | undefined;
  readonly holds: Holds;
  readonly watch: Watch;
  /** The item as far as this visit knows it (read, refused with, or written), and what it may be at. */
  readonly mirror: KeyItem | undefined;
  readonly item: Expected;
  /** Writes sent: each names its revision after the holder and this count. */
  readonly sent: number;
  /** Claims refused so far: a few, then the visit goes on without the table. */
  readonly refusals: number;
  /** The exchange the visit makes refreshes a kept token ahead. */
  readonly refresh: boolean;
  /** A failure to answer if nothing better comes by the deadline. */
  readonly fallback: FailureOutcome | undefined;
  /** This visit's own exchange ended while it waited on another's: its outcome still goes to the table. */
  readonly unpublished: Outcome | undefined;
  /** The visit has asked the IdP: once is all a request ever asks. */
  readonly asked: boolean;
  /** When its latest read of the item, and the one before, started (this instance's clock). */
  readonly readAt: EpochMs;
  readonly priorReadAt: EpochMs;
  /** Holders whose outcome the latest read shows and the one before did not: published in between. */
  readonly appeared: readonly string[];
  /** Each holder's claim as last read (its beat, and when that read started): a higher beat later is a renewal. */
  readonly sightings: readonly Sighting[];
  /** Holders whose timeout this visit outlasts: it came while this request waited, with time left for its own exchange. */
  readonly outlasts: readonly string[];
  /** The live claim this visit's claim took over because it outlasts its holder (Bursts), and that holder's deadline at the latest. */
  readonly outlasting: Outlasting | undefined;
  /** Holders seen renewing, or claiming anew, after this request arrived, and since when on this clock: their exchange still ran then. */
  readonly ranAfter: readonly (readonly [holder: string, at: EpochMs])[];
  /** Holders whose outcome this visit has read: their exchange is over, so a claim of theirs read later is an old copy written back. */
  readonly finished: readonly string[];
}

interface Outlasting {
  readonly claim: ClaimFacts;
  readonly until: MonoMs;
}

interface Sighting {
  readonly holder: string;
  readonly beat: number;
  readonly at: EpochMs;
}

export interface Step {
  readonly visit: Visit;
  readonly actions: readonly VisitAction[];
}

const nothing = (visit: Visit): Step => ({ visit, actions: [] });
const IDLE = { kind: 'idle' } as const;

/** A visit's first step: read the key's item, and the holds that cover it when the request may go to the IdP. */
export function startVisit(ask: VisitAsk, settings: CacheSettings, hedge: Hedge, now: Now): Step {
  const memoryEntry = ask.memory.entry;
  const visit: Visit = {
    ask,
    settings,
    startedAt: now.mono,
    hedgeMs: hedge.ms,
    hedgeCapAt: monoMs(now.mono + hedge.capMs),
    situation: { kind: 'reading', hedgeAt: monoMs(now.mono + hedge.ms) },
    answered: false,
    seen: proves(memoryEntry, ask.rejection, now.epoch) ? memoryEntry : undefined,
    seenInItem: false,
    rejection: ask.rejection,
    confirmed: false,
    oversize: false,
    tableFailure: undefined,
    tableHold: undefined,
    holds: { kind: 'unread' },
    watch: EMPTY_WATCH,
    mirror: undefined,
    // Unread, the item is taken as absent: a write over anything else is refused with what is there, and learns it.
    item: { revs: [], unversioned: true },
    sent: 0,
    refusals: 0,
    refresh: false,
    fallback: undefined,
    unpublished: undefined,
    asked: false,
    readAt: now.epoch,
    priorReadAt: now.epoch,
    appeared: [],
    sightings: [],
    ranAfter: [],
    finished: [],
    outlasts: [],
    outlasting: undefined,
  };
  if (now.mono >= ask.deadline) return answer({ ...visit, situation: { kind: 'done' } }, deadlineOutcome(visit, now), now);
  // The holds are read alongside only when memory would go to the IdP, or answer a hold (the fleet's may be
  // longer: a hold is never shortened); a claim reads them later if it must.
  const plan = decide(ask.memory, ask, now.epoch);
  const readHolds = plan.act === 'exchange' || (plan.act === 'fail' && plan.cause === 'hold');
  return {
    visit: readHolds ? { ...visit, holds: { kind: 'reading' } } : visit,
    actions: readHolds ? [{ kind: 'read' }, { kind: 'read-holds' }] : [{ kind: 'read' }],
  };
}

/** When the visit must next be woken (a tick), if ever: its deadline, its hedge, a renewal, a poll or an answer due. */
export function wakeAt(visit: Visit): MonoMs | undefined {
  const { situation } = visit;
  const due: (MonoMs | undefined)[] = [visit.answered ? undefined : visit.ask.deadline];
  switch (situation.kind) {
    case 'reading':
    case 'claimed':
      due.push(situation.hedgeAt);
      break;
    case 'claiming':
      due.push(situation.exchange ? undefined : situation.hedgeAt);
      break;
    case 'holding':
      due.push(situation.renewing ? undefined : situation.renewAt);
      break;
    case 'waiting':
    case 'displaced':
      due.push(situation.pollAt);
      break;
    case 'publishing':
      due.push(visit.answered ? undefined : situation.answerAt);
      break;
    default:
      break;
  }
  const times = due.filter((at): at is MonoMs => at !== undefined);
  return times.length === 0 ? undefined : monoMs(Math.min(...times));
}

/** Whether the visit has nothing more to do: answered, and done with the table. */
export function visitOver(visit: Visit): boolean {
  return visit.answered && visit.situation.kind === 'done';
}

/** The visit once `event` happened at `now`, and what to do next. */
export function step(visit: Visit, event: VisitEvent, now: Now): Step {
  switch (event.kind) {
    case 'read':
      return event.read === 'failed' ? readFailed(visit, now) : readDone(visit, event.read, now);
    case 'holds':
      return holdsRead({ ...visit, holds: event.hold === 'failed' ? { kind: 'failed' } : { kind: 'read', hold: event.hold } }, now);
    case 'written':
      return written(visit, event.write, event.rev, event.result, now);
    case 'hold-written':
      return landed(visit, 'hold', now);
    case 'exchanged':
      return exchanged(visit, event.result, now);
    case 'held':
      return heldBack(visit, event.hold, now);
    case 'tick':
      return tick(visit, { epoch: now.epoch, mono: monoMs(Math.max(now.mono, event.at)) }, event.hedgeMs);
  }
}

// ---- What the table tells -------------------------------------------------------------------------

/** A read of the key's item came: what the situation waiting on it makes of it. */
function readDone(visit: Visit, read: KeyRead, now: Now): Step {
  const before = rejectedSince(visit, read.state);
  const { situation } = before;
  const awaited =
    situation.kind === 'reading' ||
    (situation.kind === 'waiting' && situation.pollAt === undefined) ||
    // A read the hedge did not wait for still counts: what the table gives answers, if it comes first.
    (situation.kind === 'asking' && !before.answered);
  if (situation.kind === 'displaced' && situation.pollAt === undefined) return reclaim(before, situation, read, now);
  return awaited ? consider(learn(before, read, now), read, now) : nothing(before);
}

/** Whatever its situation makes of a read, it tells the key's latest rejection: that voids older tokens at once, here and in memory. */
function rejectedSince(visit: Visit, state: KeyItem | undefined): Visit {
  const rejection = laterRejection(visit.rejection, { at: state?.memo.rejectedAt ?? epochMs(0), own: false });
  return { ...visit, rejection, seen: visit.seen && receivedSince(visit.seen, rejection) ? visit.seen : undefined };
}

/** Decide from what the item holds (a read, or the item a refused write came back with). */
function consider(visit: Visit, read: KeyRead, now: Now): Step {
  const mine = outcomeForMe(visit, read.state, now);
  if (mine) return mine;
  const activity = read.state?.activity;
  // This visit's own claim, which landed though its answer said otherwise or never came: it holds it.
  if (activity?.kind === 'claim' && activity.claim.holder === visit.ask.holder) {
    return claimWritten(visit, activity.claim, runningOf(visit.situation), { kind: 'won' }, now);
  }
  let watch = visit.watch;
  let verdict: Verdict | undefined;
  if (activity?.kind === 'claim') {
    const leftMs = leftOf(visit, now);
    ({ watch, verdict } = judge(watch, activity.claim, read, visit.ask.holder, now.epoch, leftMs, visit.settings, visit.finished));
  }
  // Its mark landed with this read (its own write read back): what it saw of the holder before proves nothing more.
  const known = watch.current?.mark === 'landed' && visit.watch.current?.mark !== 'landed' ? markLanded(visit, watch) : { ...visit, watch };
  const decided = activity?.kind === 'claim' ? sighted(known, activity.claim, verdict) : known;
  const busy = (verdict === 'alive' || verdict === 'mark') && !visit.oversize;
  // A refresh under way by a holder this request would take over, were it waiting, is still the one refresh: nobody waits on it.
  const refreshing = busy || verdict === 'dominated';
  const plan = decide(tableView(decided, busy, now, refreshing), decided.ask, now.epoch);
  switch (plan.act) {
    case 'answer':
      return answerToken(decided, plan.entry, now);
    case 'fail':
      // A hold the holds (being) read may lengthen waits for them, within the hedge: a hold is never shortened.
      if (
        decided.situation.kind === 'reading' &&
        (decided.holds.kind === 'reading' || (decided.holds.kind === 'unread' && plan.cause === 'hold'))
      ) {
        return awaitHolds(decided, decided.situation, read);
      }
      return failWith(decided, outcomeOf(decided, plan.failure, plan.cause, now), now);
    case 'wait': {
      const exchange = runningOf(decided.situation);
      const marks = decided.situation.kind === 'waiting' ? decided.situation.marks : 0;
      const waiting: Visit = { ...decided, situation: { kind: 'waiting', pollAt: nextPoll(decided, now), marks, exchange } };
      const step = verdict === 'mark' ? mark(waiting, read) : nothing(waiting);
      // The holder wrote its time left before this read ended: its deadline is no later than that.
      const until = monoMs(read.endedAt + (activity as Extract<typeof activity, { kind: 'claim' }>).claim.leftMs);
      return { ...step, actions: [...step.actions, { kind: 'waits', until }] };
    }
    case 'exchange': {
      // One exchange per visit: its own, still under way, brings the answer; failed, its failure is the answer.
      if (visit.asked) {
        const running = runningOf(decided.situation);
        if (running) return nothing({ ...decided, situation: { kind: 'asking', exchange: running } });
        // Ended, it left this visit deciding only when it failed while the visit waited: that failure is the fallback.
        return answer(settled(decided), visit.fallback as FailureOutcome, now);
      }
      // A token too large to share goes to no waiter: each instance asks the IdP for its own, once the holds are read.
      if (visit.oversize) {
        const alone: Visit = { ...decided, refresh: plan.refresh };
        if ((alone.holds.kind === 'unread' || alone.holds.kind === 'reading') && alone.situation.kind === 'reading') {
          return awaitHolds(alone, alone.situation, read);
        }
        return withoutTable(alone, now);
      }
      const claim = activity?.kind === 'claim' && verdict !== undefined && verdict !== 'implausible' ? activity.claim : undefined;
      const outlasting = claim && verdict === 'dominated' ? { claim, until: monoMs(read.endedAt + claim.leftMs) } : undefined;
      return claimKey({ ...decided, refresh: plan.refresh, outlasting }, claim, now, read.endedAt - read.startedAt);
    }
  }
}

/** Park the read while the holds are read (asked for now, unless already under way); `holdsRead` decides on it. */
function awaitHolds(visit: Visit, situation: Extract<Situation, { kind: 'reading' }>, read: KeyRead): Step {
  const parked: Visit = { ...visit, situation: { ...situation, read }, holds: { kind: 'reading' } };
  return visit.holds.kind === 'unread' ? { visit: parked, actions: [{ kind: 'read-holds' }] } : nothing(parked);
}

/**
 * A claim read: a beat higher than the one this visit last read of its holder is a renewal, made since that read started,
 * unless it lacks this visit's landed mark (`forged`: a copy written back).
 */
function sighted(visit: Visit, claim: ClaimFacts, verdict: Verdict | undefined): Visit {
  const last = visit.sightings.find((one) => one.holder === claim.holder);
  const sighting: Sighting = { holder: claim.holder, beat: claim.beat, at: visit.readAt };
  const sightings = [...visit.sightings.filter((one) => one !== last), sighting].slice(-visit.settings.kept.lineage);
  if (!last || claim.beat <= last.beat || visit.finished.includes(claim.holder) || verdict === 'forged') return { ...visit, sightings };
  const ranAfter = [...visit.ranAfter.filter(([holder]) => holder !== claim.holder), [claim.holder, last.at] as const].slice(
    -visit.settings.kept.lineage,
  );
  return { ...visit, sightings, ranAfter };
}

/**
 * The visit once its mark landed on the claim it watches: the holder's renewals it saw before (a copy written back
 * replays them as well) no longer show it ran after this request came; only one that echoes the mark does from now.
 */
function markLanded(visit: Visit, watch: Watch): Visit {
  const holder = watch.current?.holder;
  return { ...visit, watch, ranAfter: visit.ranAfter.filter(([one]) => one !== holder) };
}

/**
 * Whether this request may outlast a timeout the table remembers (Bursts): the exchange timed out
 * after this request arrived — it appeared since this visit's previous look at the item, or, at its
 * first, is dated after its arrival — and more than the take-over margin of this request's deadline is
 * left now, when that exchange's deadline has passed: its own exchange could still answer in time.
 */
function outlasted(visit: Visit, ended: Ended, now: Now): boolean {
  if (ended.outcome.kind !== 'failure' || ended.outcome.failure.code !== 'upstream_timeout') return false;
  if (visit.outlasts.includes(ended.holder)) return true;
  const [before, leftMs, marginMs] = [visit.mirror?.ended, visit.ask.deadline - now.mono, visit.settings.dominanceMs];
  if (!before) return outlastsTimeout(ended.outcome.failure, visit.ask.arrivedAt, leftMs, marginMs);
  return !before.some((one) => one.holder === ended.holder) && leftMs > marginMs;
}

/** `list` with `added` moved to its end, each holder once, the newest `limit` kept. */
function remembered(list: readonly string[], added: readonly string[], limit: number): readonly string[] {
  return [...list.filter((holder) => !added.includes(holder)), ...added].slice(-limit);
}

function sameReceipt(a: Entry, b: Entry): boolean {
  return a.receivedAt === b.receivedAt && a.receivedBy === b.receivedBy;
}

/** What a read teaches: the item's rejection, kept token and remembered failure, merged with what the visit knew. */
function learn(known: Visit, read: KeyRead, now: Now): Visit {
  const visit = rejectedSince(known, read.state);
  const { rejection } = visit;
  const memo = read.state?.memo ?? EMPTY_MEMO;
  const shown = memo.kept ? entryOf(memo.kept, visit.ask.instance) : undefined;
  const candidates = [visit.seen, shown].filter(
    (entry): entry is Entry =>
      entry !== undefined &&
      entry.receivedAt <= now.epoch + CLOCK_TOLERANCE_MS &&
      keepable(entry.token) &&
      proves(entry, rejection, now.epoch),
  );
  // The last failure is the key's remembered one; a hold on the key stands beside it, never shortened by a later failure.
  const ended = read.state?.ended ?? [];
  const outlasts = ended.filter((one) => outlasted(visit, one, now)).map((one) => one.holder);
  const failures = ended.flatMap((one) => (one.outcome.kind === 'failure' && !outlasts.includes(one.holder) ? [one.outcome.failure] : []));
  // The newest failure still in force, unless a token came after it: a later failure's shorter time over, an older rejection answers again.
  const latest = [...ended]
    .reverse()
    .find(
      (one) =>
        one.outcome.kind === 'answered' ||
        (!isHold(one.outcome.failure) && !outlasts.includes(one.holder) && one.outcome.failure.until > now.epoch),
    );
  const failure = latest?.outcome.kind === 'failure' ? latest.outcome.failure : failures.filter((one) => !isHold(one)).at(-1);
  // A claim this visit had not seen, absent from what it saw before, of no holder seen ended: written since, so its exchange
  // runs after this request came.
  const claim = read.state?.activity.kind === 'claim' ? read.state.activity.claim : undefined;
  const before = visit.mirror?.activity;
  const fresh =
    claim &&
    visit.mirror &&
    !(before?.kind === 'claim' && before.claim.holder === claim.holder) &&
    !visit.sightings.some((one) => one.holder === claim.holder) &&
    !visit.finished.includes(claim.holder);
  const endedHolders = ended.map((one) => one.holder);
  const ranAfter = fresh ? [...visit.ranAfter, [claim.holder, visit.readAt] as const].slice(-visit.settings.kept.lineage) : visit.ranAfter;
  const seen = candidates.reduce<Entry | undefined>(newest, undefined);
  return {
    ...visit,
    ranAfter,
    finished: remembered(visit.finished, endedHolders, visit.settings.kept.lineage),
    readAt: epochMs(now.epoch - (now.mono - read.startedAt)),
    priorReadAt: visit.readAt,
    appeared: visit.mirror
      ? ended.filter((one) => !visit.mirror?.ended.some((old) => old.holder === one.holder)).map((one) => one.holder)
      : [],
    rejection,
    confirmed: true,
    oversize: memo.oversizeUntil > now.epoch,
    seen,
    // The same receipt, whichever copy stands for it (memory's own wins a tie with the item's); else `seen` is the one seen before.
    seenInItem: seen !== undefined && ((shown !== undefined && sameReceipt(seen, shown)) || visit.seenInItem),
    outlasts: remembered(visit.outlasts, outlasts, visit.settings.kept.ended),
    tableFailure: fromFleet(failure, now.epoch),
    // A hold seen in an earlier read stays known though a later write left it out: a hold is never shortened.
    tableHold: failures
      .filter(isHold)
      .map((hold) => fromFleet(hold, now.epoch))
      .reduce(longer, fromFleet(visit.tableHold, now.epoch)),
    mirror: read.state,
    item: read.expected,
  };
}

/** What the item holds for this request: the outcome of the exchange it waited for, when that may be taken. */
function outcomeForMe(visit: Visit, state: KeyItem | undefined, now: Now): Step | undefined {
  // An exchange this visit waited on, or one that brought a token of its own after this request came, though its claim was gone before it looked.
  const ended = [...(state?.ended ?? [])]
    .reverse()
    .find(
      (outcome) =>
        waitedFor(visit.watch, outcome.holder, outcome.lineage) ||
        (outcome.outcome.kind === 'answered' &&
          typeof outcome.outcome.token === 'object' &&
          outcome.outcome.token.receivedAt >= visit.ask.arrivedAt),
    );
  if (!ended) return undefined;
  if (ended.outcome.kind === 'failure') {
    // A failure whose time is over is news of an exchange that ended before this request could share it, but
    // for a timeout at its holder's deadline (remembered by nobody) that this request waited on: it shares it.
    // A timeout it outlasts is that exchange's deadline, not this request's.
    const { failure } = ended.outcome;
    const over = failure.until <= now.epoch;
    const waitedOut = over && failure.code === 'upstream_timeout' && waitedFor(visit.watch, ended.holder, ended.lineage);
    if ((over && !waitedOut) || visit.outlasts.includes(ended.holder)) return undefined;
    // A no-cache request takes no remembered failure: only one its writer dated after this request came (Clocks), or a
    // hold (dated by its end). Having seen the exchange run proves nothing: copies written back replay its claims and
    // renewals, never a later date.
    if (visit.ask.noCache && happenedAt(failure) < visit.ask.arrivedAt) return undefined;
    return failWith(visit, outcomeOf(visit, failure, waitedOut ? 'deadline' : 'exchange', now), now);
  }
  const entry = sharedToken(ended.outcome, state as KeyItem, visit.ask.instance);
  if (!entry || (visit.ask.noCache && !answersNoCache(entry, visit.ask))) return undefined;
  // A kept token past its freshness here (an old outcome written back) is no answer of this burst's.
  if (keepable(entry.token) && !['fresh', 'refresh'].includes(phaseOf(entry, now.epoch))) return undefined;
  // A token that cannot be kept goes to those who came while its exchange ran: by this instance's own
  // clock for its own token; for a copy, as dated, or when this visit saw its holder renew since.
  const renewedAt = visit.ranAfter.find(([holder]) => holder === ended.holder)?.[1] ?? epochMs(-Infinity);
  // Published since the read before, and found before its holder answered: those who came by then were first.
  const foundEarly = ended.outcome.kind === 'answered' && visit.appeared.includes(ended.holder) && now.epoch <= ended.outcome.answerBy;
  const runningAt = entry.copy
    ? epochMs(Math.max(entry.receivedAt, renewedAt, foundEarly ? visit.priorReadAt : -Infinity))
    : entry.receivedAt;
  if (!keepable(entry.token) && runningAt < visit.ask.arrivedAt) return undefined;
  return answer(settled(visit), { kind: 'token', entry, from: 'table', runningAt }, now);
}

/** The token an `answered` outcome gives its waiters: the item's kept one (as new or newer), its own, or none. */
function sharedToken(outcome: Extract<SharedOutcome, { kind: 'answered' }>, state: KeyItem, self: string): Entry | undefined {
  if (outcome.token === 'unshared') return undefined;
  if (outcome.token !== 'kept') return entryOf(outcome.token, self);
  const kept = state.memo.kept;
  return kept && kept.receivedAt >= outcome.receivedAt ? entryOf(kept, self) : undefined;
}

/** The key as memory and the table together show it. */
function tableView(visit: Visit, busy: boolean, now: Now, refreshing = busy): KeyView {
  const { memory } = visit.ask;
  const entry = visit.seen && served(visit.seen, now.epoch) ? visit.seen : undefined;
  const heldHere = visit.holds.kind === 'read' ? fromFleet(visit.holds.hold, now.epoch) : undefined;
  return {
    entry,
    failure: memory.failure ?? visit.tableFailure,
    hold: [memory.hold, heldHere, visit.tableHold].reduce(longer, undefined),
    busy,
    // A copy is its receiver's to refresh early in the window (lifetime.ts, openToFleet).
    refreshing: refreshing || memory.refreshing || (entry !== undefined && entry.copy && !openToFleet(entry, now.epoch)),
  };
}

function readFailed(visit: Visit, now: Now): Step {
  const { situation } = visit;
  if (situation.kind === 'reading') return withoutTable(visit, now);
  if (situation.kind === 'displaced')
    return nothing({ ...visit, situation: { ...situation, pollAt: situation.pollAt ?? renewDue(visit, now) } });
  if (situation.kind !== 'waiting' || situation.pollAt !== undefined) return nothing(visit);
  // The holder may still put its outcome where the next poll sees it: poll on, and ask the IdP meanwhile.
  const polling: Visit = { ...visit, situation: { ...situation, pollAt: nextPoll(visit, now) } };
  return situation.exchange || visit.asked ? nothing(polling) : startExchange(polling, now, true);
}

function holdsRead(visit: Visit, now: Now): Step {
  const { situation } = visit;
  if (situation.kind === 'reading' && situation.read) return consider(visit, situation.read, now);
  return situation.kind === 'claimed' ? proceedAsHolder(visit, situation.claim, now) : nothing(visit);
}

// ---- Claims ---------------------------------------------------------------------------------------

/** Claim the key's exchange over the item as the visit knows it; `over`: the claim this takes over from. */
function claimKey(visit: Visit, over: ClaimFacts | undefined, now: Now, readMs: number): Step {
  const claim: ClaimFacts = {
    holder: visit.ask.holder,
    beat: 0,
    leftMs: leftOf(visit, now),
    runMs: 0,
    claimedAt: now.epoch,
    lineage: over ? lineageAfter(over, visit.settings) : [],
    echoes: [],
  };
  const state: KeyItem = {
    kind: 'key',
    ...carrying(visit, memoOf(visit, visit.mirror?.memo ?? EMPTY_MEMO), now),
    activity: { kind: 'claim', claim },
  };
  const exchange = runningOf(visit.situation);
  // The claim's write may take twice what the read just took (a loaded table): the hedge waits for it, within its cap.
  const hedgeAt =
    visit.situation.kind === 'reading'
      ? monoMs(Math.max(visit.situation.hedgeAt, Math.min(visit.hedgeCapAt, now.mono + 2 * readMs)))
      : monoMs(now.mono + visit.hedgeMs);
  const sent = write({ ...visit, situation: { kind: 'claiming', claim, hedgeAt, exchange } }, 'claim', state);
  const readHolds = visit.holds.kind === 'unread';
  return {
    visit: readHolds ? { ...sent.visit, holds: { kind: 'reading' } } : sent.visit,
    actions: readHolds ? [sent.action, { kind: 'read-holds' }] : [sent.action],
  };
}

function claimWritten(visit: Visit, claim: ClaimFacts, exchange: Running | undefined, result: WriteResult, now: Now): Step {
  if (result.kind !== 'lost') {
    // A claim whose answer never came may have landed: the visit holds it as far as it knows, and its
    // next write, over the claim or what it claimed over, finds out.
    if (exchange) return renewLater(visit, claim, exchange, now);
    if (visit.holds.kind === 'reading') {
      // Held, the claim keeps its waiters waiting: the holds may hold the exchange back the shortest hedge more at most
      // (the hedge stretches for the claim's write, which the waiters share, not for a slow hold item).
      const hedgeAt =
        visit.situation.kind === 'claiming'
          ? monoMs(Math.min(visit.situation.hedgeAt, now.mono + visit.settings.hedge.minMs))
          : monoMs(now.mono);
      return nothing({ ...visit, situation: { kind: 'claimed', claim, hedgeAt } });
    }
    return proceedAsHolder(visit, claim, now);
  }
  const refused: Visit = { ...visit, refusals: visit.refusals + 1 };
  if (refused.refusals >= visit.settings.maxRefusals) return goAlone(refused, exchange, now);
  // A refusal answers the claim this visit has out ('claiming'): it decides again within that claim's hedge.
  const { hedgeAt } = visit.situation as Extract<Situation, { kind: 'claiming' }>;
  const deciding: Visit = { ...refused, situation: exchange ? { kind: 'asking', exchange } : { kind: 'reading', hedgeAt } };
  return consider(learn(deciding, result.read, now), result.read, now);
}

/** As the holder, once the holds are known: settle a hold in force for the waiters, or ask the IdP. */
function proceedAsHolder(visit: Visit, claim: ClaimFacts, now: Now): Step {
  const claimed: Visit = { ...visit, situation: { kind: 'claimed', claim, hedgeAt: monoMs(now.mono) } };
  const hold = heldNow(visit, now);
  // The waiters get the hold as the fleet wrote it, and honour it themselves.
  if (hold) return publish(claimed, outcomeOf(visit, hold.honoured, 'hold', now), now, hold.read);
  return startExchange(claimed, now, false);
}

/** The hold in force on the key, as memory knows it or the hold items were read (`read`: as written, for the waiters). */
function heldNow(visit: Visit, now: Now): { readonly honoured: Remembered; readonly read: Remembered | undefined } | undefined {
  const read = visit.holds.kind === 'read' ? visit.holds.hold : undefined;
  const honoured = longer(inForce(visit.ask.memory.hold, now.epoch) ? visit.ask.memory.hold : undefined, fromFleet(read, now.epoch));
  return honoured && { honoured, read: honoured === visit.ask.memory.hold ? undefined : read };
}

/** The holder's claim as it renews it: a higher beat, what is left of its deadline, how long its exchange has run. */
function renewal(visit: Visit, claim: ClaimFacts, exchange: Running, now: Now): ClaimFacts {
  return { ...claim, beat: claim.beat + 1, leftMs: leftOf(visit, now), runMs: now.mono - exchange.since };
}

function renewLater(visit: Visit, claim: ClaimFacts, exchange: Running, now: Now, rewrites = 0): Step {
  const renewAt = renewDue(visit, now);
  return nothing({ ...visit, situation: { kind: 'holding', claim, exchange, renewAt, renewing: false, rewrites } });
}

function renew(visit: Visit, claim: ClaimFacts, exchange: Running, rewrites: number, now: Now): Step {
  const next = renewal(visit, claim, exchange, now);
  // A holder knows its item: the claim it wrote, or what a read or a refused renewal showed (absent, once displaced).
  const state: KeyItem = {
    kind: 'key',
    ...carrying(visit, memoOf(visit, visit.mirror?.memo ?? EMPTY_MEMO), now),
    activity: { kind: 'claim', claim: next },
  };
  const sent = write(
    { ...visit, situation: { kind: 'holding', claim: next, exchange, renewAt: now.mono, renewing: true, rewrites } },
    'renew',
    state,
  );
  return { visit: sent.visit, actions: [sent.action] };
}

function renewWritten(visit: Visit, held: Extract<Situation, { kind: 'holding' }>, result: WriteResult, now: Now): Step {
  if (result.kind !== 'lost') return renewLater(visit, held.claim, held.exchange, now);
  const read = result.read;
  const claim = read.state?.activity.kind === 'claim' ? read.state.activity.claim : undefined;
  if (claim?.holder === visit.ask.holder) {
    // Waiters' marks, or a token someone shared, changed the item under this claim: carry them on.
    // Only rewrites that bring no new mark count against the bound (marks are a waiter each).
    const echoes = echoesOf(held.claim, claim, visit.settings);
    const rewrites = echoes.length > held.claim.echoes.length ? held.rewrites : held.rewrites + 1;
    if (rewrites <= visit.settings.maxRewrites) {
      return renew(learn(visit, read, now), { ...held.claim, echoes }, held.exchange, rewrites, now);
    }
  }
  const taken: Visit = { ...visit, mirror: read.state, item: read.expected };
  // The item keeps changing under its own claim: its outcome is its own to write.
  if (claim?.holder === visit.ask.holder) return nothing({ ...taken, situation: { kind: 'asking', exchange: held.exchange } });
  // Another took its place (one that outlasts it, or took it for silent): it watches for the key to be free again.
  return nothing({ ...taken, situation: { kind: 'displaced', claim: held.claim, exchange: held.exchange, pollAt: renewDue(visit, now) } });
}

/** A displaced holder's look at the item: another's claim still there, it looks again later; else it claims again over what it read. */
function reclaim(visit: Visit, displaced: Extract<Situation, { kind: 'displaced' }>, read: KeyRead, now: Now): Step {
  const found = read.state?.activity.kind === 'claim' ? read.state.activity.claim : undefined;
  if (found && found.holder !== visit.ask.holder) {
    return nothing({ ...visit, mirror: read.state, item: read.expected, situation: { ...displaced, pollAt: renewDue(visit, now) } });
  }
  // Given back, its claim may carry a beat its taker added: the renewal goes above it, so that watchers see it renewed.
  const claim = { ...displaced.claim, beat: Math.max(displaced.claim.beat, found?.beat ?? 0) };
  return renew(learn(visit, read, now), claim, displaced.exchange, 0, now);
}

function renewDue(visit: Visit, now: Now): MonoMs {
  return monoMs(now.mono + visit.settings.renewEveryMs);
}

// ---- Waiting --------------------------------------------------------------------------------------

/** Ask the holder being watched to echo this waiter in its next renewal: the item as read, with this waiter's name in the claim. */
function mark(visit: Visit, read: KeyRead): Step {
  const state = read.state as KeyItem;
  const activity = state.activity as Extract<KeyItem['activity'], { kind: 'claim' }>;
  const withMark: KeyItem = { ...state, activity: { kind: 'claim', claim: withEcho(activity.claim, visit.ask.holder, visit.settings) } };
  const waiting = visit.situation as Extract<Situation, { kind: 'waiting' }>;
  const sent = write(
    { ...visit, watch: marked(visit.watch, 'sent'), situation: { ...waiting, pollAt: undefined, marks: waiting.marks + 1 } },
    'mark',
    withMark,
    read.expected,
  );
  return { visit: sent.visit, actions: [sent.action] };
}

function markWritten(visit: Visit, waiting: Extract<Situation, { kind: 'waiting' }>, result: WriteResult, now: Now): Step {
  const polling: Visit = { ...visit, situation: { ...waiting, pollAt: waiting.pollAt ?? nextPoll(visit, now) } };
  switch (result.kind) {
    case 'won':
      return nothing(markLanded(polling, marked(visit.watch, 'landed')));
    case 'failed':
      return nothing({ ...polling, watch: marked(visit.watch, 'unknown') });
    case 'lost': {
      // Another waiter's mark, or a renewal, came first: mark again over it (a few times at most; then silence alone decides).
      const watch = marked(visit.watch, waiting.marks >= visit.settings.maxRefusals ? 'unknown' : 'none');
      const next: Visit = { ...visit, watch, situation: { ...waiting, pollAt: undefined } };
      return consider(learn(next, result.read, now), result.read, now);
    }
  }
}

function poll(visit: Visit, waiting: Extract<Situation, { kind: 'waiting' }>): Step {
  return { visit: { ...visit, situation: { ...waiting, pollAt: undefined } }, actions: [{ kind: 'read' }] };
}

function nextPoll(visit: Visit, now: Now): MonoMs {
  return monoMs(now.mono + pollPauseMs(visit.settings, leftOf(visit, now)));
}

// ---- The IdP --------------------------------------------------------------------------------------

/** Ask the IdP from where the visit is: as the holder of its claim, or without one. */
function startExchange(before: Visit, now: Now, hedged: boolean): Step {
  // Never a second time: its callers reach it only with no exchange asked (consider and readFailed check `asked` first).
  const visit: Visit = { ...before, asked: true };
  const exchange: Running = { since: now.mono, after: visit.rejection.at };
  const { situation } = visit;
  let next: Situation;
  switch (situation.kind) {
    case 'claimed':
      next = {
        kind: 'holding',
        claim: situation.claim,
        exchange,
        renewAt: monoMs(now.mono + visit.settings.renewEveryMs),
        renewing: false,
        rewrites: 0,
      };
      break;
    case 'claiming':
      next = { ...situation, exchange };
      break;
    case 'waiting':
      next = { ...situation, exchange };
      break;
    default:
      next = { kind: 'asking', exchange };
  }
  return { visit: { ...visit, situation: next }, actions: [{ kind: 'exchange', refresh: visit.refresh, hedged }] };
}

/**
 * The table cannot say in time (its read failed, or the hedge passed, or it refused every claim): the
 * visit does what memory would, with what it learnt: answer a fresh token, answer a remembered failure
 * or a hold, or ask the IdP with what is left of the deadline (a hold read still out is not waited for).
 */
function withoutTable(visit: Visit, now: Now): Step {
  // Reached only before the visit asked the IdP: from 'reading', goAlone with no exchange, or consider's oversize path.
  const plan = decide(tableView(visit, false, now), visit.ask, now.epoch);
  switch (plan.act) {
    case 'answer':
      return answerToken(visit, plan.entry, now);
    case 'fail':
      return answer(settled(visit), outcomeOf(visit, plan.failure, plan.cause, now), now);
    default:
      // No hold is in force here: tableView holds every one heldNow() knows, and decide() never asks the IdP past one.
      return startExchange({ ...visit, refresh: plan.act === 'exchange' && plan.refresh }, now, true);
  }
}

/** Claims refused again and again: the IdP alone (what it gives still goes to the table). */
function goAlone(visit: Visit, exchange: Running | undefined, now: Now): Step {
  return exchange
    ? nothing({ ...visit, situation: { kind: 'asking', exchange } })
    : withoutTable({ ...visit, situation: { kind: 'reading', hedgeAt: monoMs(now.mono) } }, now);
}

function exchanged(visit: Visit, result: ExchangeResult, now: Now): Step {
  const running = runningOf(visit.situation);
  if (!running) return nothing(visit);
  const budgetMs = visit.ask.deadline - running.since;
  let known = visit;
  if ('failure' in result && result.failure.code === 'unauthorized') {
    // A rejection voids every token of the key received before it, here first.
    const rejection: Rejection = { at: now.epoch, own: true };
    known = { ...visit, rejection, seen: visit.seen && receivedSince(visit.seen, rejection) ? visit.seen : undefined };
  }
  // Its caller answered, the instance may have been frozen when the IdP answered: the token is dated
  // when it was asked for, so that no answer overstates its life.
  const sentAt = epochMs(now.epoch - (now.mono - running.since));
  const outcome: Outcome =
    'token' in result
      ? tokenOutcome(
          {
            ...result.token,
            after: epochMs(Math.max(result.token.after, running.after)),
            ...(visit.answered ? { receivedAt: sentAt } : {}),
          },
          'idp',
        )
      : outcomeOf(
          known,
          result.failure,
          cutShort(result.failure, budgetMs, visit.settings.upstreamTimeoutMs) ? 'deadline' : 'exchange',
          now,
        );
  const met: VisitAction = { kind: 'met', outcome };
  const { situation } = known;
  if (situation.kind === 'waiting' && outcome.kind === 'failure' && !known.answered) {
    // A failure of this visit's own exchange waits for the live holder's outcome, which may be a token.
    return {
      visit: { ...known, situation: { ...situation, exchange: undefined }, fallback: outcome, unpublished: outcome },
      actions: [met],
    };
  }
  const published = publish(known, outcome, now);
  return { visit: published.visit, actions: [met, ...published.actions] };
}

/** The exchange this visit asked for was held back: the hold is its outcome, published as one seen. */
function heldBack(visit: Visit, hold: Remembered, now: Now): Step {
  if (!runningOf(visit.situation)) return nothing(visit);
  return publish(visit, outcomeOf(visit, hold, 'hold', now), now, hold);
}

// ---- Publishing -----------------------------------------------------------------------------------

/**
 * Put the visit's outcome where the fleet reads it, whatever path led to the IdP: in place of the
 * claim it holds, or beside whatever claim the item holds. The caller has its answer once that landed
 * (with the client's hold, when the outcome is one), or after the hedge, never past its deadline.
 * `recorded`: a hold as the fleet wrote it, for the waiters to honour themselves.
 */
function publish(visit: Visit, outcome: Outcome, now: Now, recorded?: Remembered): Step {
  const { situation } = visit;
  const claim =
    situation.kind === 'holding' || situation.kind === 'claimed' || situation.kind === 'claiming' || situation.kind === 'displaced'
      ? situation.claim
      : undefined;
  const answerAt = monoMs(Math.min(visit.ask.deadline, now.mono + visit.hedgeMs));
  const state = publication(visit, outcome, claim, now, recorded, answerAt);
  const holdWrite = outcome.kind === 'failure' && outcome.cause === 'exchange' && isHold(outcome.failure) && outcome.scope === 'client';
  const publishing: Situation = {
    kind: 'publishing',
    outcome,
    claim,
    recorded,
    state,
    retries: 0,
    answerAt,
    awaiting: { key: true, hold: holdWrite },
  };
  const sent = write({ ...visit, situation: publishing, unpublished: undefined }, 'publish', state);
  const hold: VisitAction[] = outcome.kind === 'failure' && holdWrite ? [{ kind: 'write-hold', hold: outcome.failure }] : [];
  return { visit: sent.visit, actions: [sent.action, ...hold] };
}

/**
 * The item with this visit's outcome: its memo brought up to date, the claim it held released, the outcome for its waiters
 * (a token's marked with when its caller has it, `answerAt`, however late a rewrite goes).
 */
function publication(
  visit: Visit,
  outcome: Outcome,
  claim: ClaimFacts | undefined,
  now: Now,
  recorded: Remembered | undefined,
  answerAt: MonoMs,
): KeyItem {
  const base = visit.mirror;
  let memo = provingOnly(memoOf(visit, base?.memo ?? EMPTY_MEMO), now.epoch);
  const ownEnded: Ended[] = [];
  const lineage = claim?.lineage ?? [];
  if (outcome.kind === 'token' && outcome.from === 'idp') {
    const { entry } = outcome;
    const kept = shareable(entry, visit.settings) && entry.receivedAt > memo.rejectedAt;
    if (kept) memo = keeping(memo, entry);
    // Too large for the item to keep, its receiver keeps it in memory: a rejection this item meets later must outlive it there too.
    else if (keepable(entry.token)) memo = { ...memo, keptUntil: epochMs(Math.max(memo.keptUntil, expiresAt(entry))) };
    const bytes = tokenBytes(entry.token);
    const inline = !keepable(entry.token) && bytes <= tokenRoom(visit, memo);
    const token = kept ? 'kept' : inline ? storedOf(entry) : 'unshared';
    // A token the item cannot carry (too large for any, or without room beside the kept one) reaches no waiter through the
    // table: the key's next ones may not either.
    if (keepable(entry.token) ? bytes > visit.settings.itemTokenBytes : !inline) memo = crowded(memo, visit, now);
    const until = epochMs(now.epoch + visit.settings.upstreamTimeoutMs);
    const answerBy = epochMs(now.epoch + answerAt - now.mono);
    ownEnded.push({
      holder: visit.ask.holder,
      lineage,
      outcome: { kind: 'answered', receivedAt: entry.receivedAt, until, answerBy, token },
    });
  } else if (outcome.kind === 'failure' && outcome.cause !== 'deadline' && (recorded ?? outcome.failure).until > now.epoch) {
    // A failure whose time is over by now (its news came late) has nothing left to tell.
    ownEnded.push({ holder: visit.ask.holder, lineage, outcome: { kind: 'failure', failure: recorded ?? outcome.failure } });
  }
  // Another's claim stays; this visit's own is released, or gives back the claim it took over while that holder's exchange may run.
  const activity =
    base?.activity.kind === 'claim' && base.activity.claim.holder !== visit.ask.holder ? base.activity : released(visit, base, now);
  const own = ownEnded.reduce((sum, one) => sum + inlineBytes(one), 0);
  const kept = carrying(visit, memo, now, own);
  return { kind: 'key', memo: kept.memo, activity, ended: [...kept.ended, ...ownEnded] };
}

/** What a visit's own claim leaves: the claim it took over from a holder it outlasts, renewed, while that holder's exchange may run. */
function released(visit: Visit, base: KeyItem | undefined, now: Now): KeyItem['activity'] {
  const { outlasting } = visit;
  if (!outlasting || base?.activity.kind !== 'claim' || now.mono >= outlasting.until) return IDLE;
  if (base.ended.some((one) => one.holder === outlasting.claim.holder)) return IDLE;
  return { kind: 'claim', claim: { ...outlasting.claim, beat: outlasting.claim.beat + 1 } };
}

function publishWritten(visit: Visit, publishing: Extract<Situation, { kind: 'publishing' }>, result: WriteResult, now: Now): Step {
  const retry = (state: KeyItem, from: Visit, claim: ClaimFacts | undefined, retries: number): Step => {
    const sent = write({ ...from, situation: { ...publishing, state, claim, retries } }, 'publish', state);
    return { visit: sent.visit, actions: [sent.action] };
  };
  if (result.kind === 'won') return landed(visit, 'key', now);
  // Waiters' new marks on the claim it wrote over (its own, or the one that took over) refused it: those do not count
  // against the bound (a waiter marks a claim once).
  const found = result.kind === 'lost' && result.read.state?.activity.kind === 'claim' ? result.read.state.activity.claim : undefined;
  const { claim } = publishing;
  const over = visit.mirror?.activity.kind === 'claim' ? visit.mirror.activity.claim : claim;
  const marks = over !== undefined && found?.holder === over.holder && found.echoes.some((echo) => !over.echoes.includes(echo));
  const retries = marks ? publishing.retries : publishing.retries + 1;
  if (retries <= visit.settings.maxRewrites) {
    // Written again: over either revision when no answer came, or over what refused it, merged anew.
    if (result.kind === 'failed') return retry(publishing.state, visit, claim, retries);
    const learnt = learn(visit, result.read, now);
    const merged = marks && claim && found?.holder === claim.holder ? { ...claim, echoes: echoesOf(claim, found, visit.settings) } : claim;
    return retry(publication(learnt, publishing.outcome, merged, now, publishing.recorded, publishing.answerAt), learnt, merged, retries);
  }
  return landed(visit, 'key', now);
}

/** A write the answer waits for is done with (landed, or given up): the caller has its answer once none is left. */
function landed(visit: Visit, which: 'key' | 'hold', now: Now): Step {
  const { situation } = visit;
  if (situation.kind !== 'publishing') return nothing(visit);
  const awaiting = { key: which === 'key' ? false : situation.awaiting.key, hold: which === 'hold' ? false : situation.awaiting.hold };
  if (awaiting.key || awaiting.hold) return nothing({ ...visit, situation: { ...situation, awaiting } });
  return answer({ ...visit, situation: { kind: 'done' } }, situation.outcome, now);
}

// ---- Time -----------------------------------------------------------------------------------------

function tick(visit: Visit, now: Now, hedgeMs: number): Step {
  const { situation } = visit;
  if (!visit.answered && now.mono >= visit.ask.deadline) return atDeadline(visit, now);
  switch (situation.kind) {
    case 'reading': {
      const hedgeAt = situation.read ? situation.hedgeAt : stretched(visit, situation.hedgeAt, hedgeMs);
      if (now.mono < hedgeAt) return nothing({ ...visit, situation: { ...situation, hedgeAt } });
      // The holds did not come within the hedge: the key's item decides alone.
      return situation.read ? consider({ ...visit, holds: { kind: 'failed' } }, situation.read, now) : withoutTable(visit, now);
    }
    case 'claiming': {
      if (situation.exchange) return nothing(visit);
      const hedgeAt = stretched(visit, situation.hedgeAt, hedgeMs);
      return now.mono < hedgeAt ? nothing({ ...visit, situation: { ...situation, hedgeAt } }) : hedged(visit, now);
    }
    case 'claimed':
      return now.mono >= situation.hedgeAt ? startExchange(visit, now, true) : nothing(visit);
    case 'holding':
      return !situation.renewing && now.mono >= situation.renewAt
        ? renew(visit, situation.claim, situation.exchange, situation.rewrites, now)
        : nothing(visit);
    case 'waiting':
      return situation.pollAt !== undefined && now.mono >= situation.pollAt ? poll(visit, situation) : nothing(visit);
    case 'displaced':
      return situation.pollAt !== undefined && now.mono >= situation.pollAt
        ? { visit: { ...visit, situation: { ...situation, pollAt: undefined } }, actions: [{ kind: 'read' }] }
        : nothing(visit);
    case 'publishing':
      return !visit.answered && now.mono >= situation.answerAt ? answer(visit, situation.outcome, now) : nothing(visit);
    default:
      return nothing(visit);
  }
}

/**
 * A hedge that came while the key's item or the claim was still out, once the table answered slower calls since it was
 * set (a loaded table, not a hung one): it follows them from the visit's start, within its cap (Bursts' one IdP request).
 */
function stretched(visit: Visit, hedgeAt: MonoMs, hedgeMs: number): MonoMs {
  return monoMs(Math.max(hedgeAt, Math.min(visit.hedgeCapAt, visit.startedAt + hedgeMs)));
}

/** The hedge passed while a claim was out: ask the IdP, unless a hold known meanwhile forbids it. */
function hedged(visit: Visit, now: Now): Step {
  const hold = heldNow(visit, now);
  if (hold) return publish(visit, outcomeOf(visit, hold.honoured, 'hold', now), now, hold.read);
  return startExchange(visit, now, true);
}

/**
 * The deadline came first: the caller gets the failure this visit met, or a timeout cut short by its
 * own deadline. An exchange under way still ends and is published; a claim with none is released.
 */
function atDeadline(visit: Visit, now: Now): Step {
  const { situation } = visit;
  if (situation.kind === 'publishing') return answer(visit, situation.outcome, now);
  const outcome = visit.fallback ?? deadlineOutcome(visit, now);
  const running = runningOf(situation);
  if (running) return answer({ ...visit, situation: { kind: 'asking', exchange: running } }, outcome, now);
  if (situation.kind !== 'claiming' && situation.kind !== 'claimed') return answer({ ...visit, situation: { kind: 'done' } }, outcome, now);
  const released = publish(visit, deadlineOutcome(visit, now), now);
  const answered = answer(released.visit, outcome, now);
  return { visit: answered.visit, actions: [...released.actions, ...answered.actions] };
}

// ---- Answers --------------------------------------------------------------------------------------

function answerToken(visit: Visit, entry: Entry, now: Now): Step {
  return answer(settled(visit), tokenOutcome(entry, entry.copy ? 'table' : 'memory'), now);
}

/** A failure the table gave: answered at once, unless this visit's own exchange may still bring a token. */
function failWith(visit: Visit, outcome: FailureOutcome, now: Now): Step {
  const running = runningOf(visit.situation);
  if (running) return nothing({ ...visit, situation: { kind: 'asking', exchange: running }, fallback: outcome });
  return answer(settled(visit), outcome, now);
}

/** The visit done with the item, but for an outcome of its own still to publish. */
function settled(visit: Visit): Visit {
  const running = runningOf(visit.situation);
  return { ...visit, situation: running ? { kind: 'asking', exchange: running } : { kind: 'done' } };
}

/** Answer the caller (once); an outcome of this visit's own still unpublished then goes to the table. */
function answer(visit: Visit, outcome: Outcome, now: Now): Step {
  if (visit.answered) return nothing(visit);
  const answered: Visit = { ...visit, answered: true };
  const actions: VisitAction[] = [{ kind: 'answer', outcome: withLongestHold(visit, outcome, now) }];
  if (!answered.unpublished || answered.situation.kind !== 'done') return { visit: answered, actions };
  const published = publish(answered, answered.unpublished, now);
  return { visit: published.visit, actions: [...actions, ...published.actions] };
}

/** A hold is never shortened: one answered is the longest this visit knows of (a refused write may have shown a longer one). */
function withLongestHold(visit: Visit, outcome: Outcome, now: Now): Outcome {
  if (outcome.kind !== 'failure' || !isHold(outcome.failure)) return outcome;
  const longest = [outcome.failure, visit.tableHold, heldNow(visit, now)?.honoured].reduce(longer, undefined) as Remembered;
  const answered = longest === outcome.failure ? outcome : { ...outcome, failure: longest, metAt: now.epoch };
  // The IdP's own 429 to this request, met while it waited on another's exchange (so still its to publish), says its seconds,
  // unless a hold ends later than they do; a hold the table gave meanwhile is told as the seconds left.
  const own = visit.fallback && visit.fallback === visit.unpublished && isHold(visit.fallback.failure) ? visit.fallback : undefined;
  return own && own.failure.until - own.metAt >= answered.failure.until - Math.min(now.epoch, answered.metAt) ? own : answered;
}

/** A failure as this visit answers it: with the newest token that may stand in, and whom a hold covers. */
function outcomeOf(visit: Visit, failure: Remembered, cause: FailureOutcome['cause'], now: Now): FailureOutcome {
  const scope = holdScope(visit.ask.vouched, visit.seen, visit.rejection, now.epoch);
  // A token kept from before a pepper switch may have a 401 only the old items know: it stands in only as the new item shows it.
  const sighted = visit.seenInItem || (visit.seen?.receivedAt ?? 0) > visit.ask.pepperSwitchedAt;
  const kept = visit.seen && served(visit.seen, now.epoch) && sighted ? visit.seen : undefined;
  return { kind: 'failure', failure, kept, rejection: visit.confirmed ? visit.rejection : 'unknown', scope, cause, metAt: now.epoch };
}

function deadlineOutcome(visit: Visit, now: Now): FailureOutcome {
  return outcomeOf(visit, { code: 'upstream_timeout', until: now.epoch }, 'deadline', now);
}

// ---- Writes ---------------------------------------------------------------------------------------

/** Send a write over whatever the item may be at; from then on it may be at this write's revision too. */
function write(visit: Visit, purpose: WriteKind, state: KeyItem, expected = visit.item): { visit: Visit; action: VisitAction } {
  const rev = `${visit.ask.holder}.${visit.sent}`;
  return {
    visit: {
      ...visit,
      sent: visit.sent + 1,
      mirror: state,
      item: { ...visit.item, revs: [...visit.item.revs, rev].slice(-visit.settings.kept.revs) },
    },
    action: { kind: 'write', write: purpose, rev, state, expected },
  };
}

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
      return { revs: [...result.read.expected.revs, ...later], unversioned: result.read.expected.unversioned };
    case 'failed':
      return item;
  }
}

function written(before: Visit, purpose: WriteKind, rev: string, result: WriteResult, now: Now): Step {
  const visit: Visit = { ...before, item: afterWrite(before.item, rev, result) };
  const { situation } = visit;
  if (purpose === 'claim' && situation.kind === 'claiming') return claimWritten(visit, situation.claim, situation.exchange, result, now);
  if (purpose === 'renew' && situation.kind === 'holding' && situation.renewing) return renewWritten(visit, situation, result, now);
  if (purpose === 'mark' && situation.kind === 'waiting') return markWritten(visit, situation, result, now);
  if (purpose === 'publish' && situation.kind === 'publishing') return publishWritten(visit, situation, result, now);
  return nothing(visit);
}

// ---- Small parts ----------------------------------------------------------------------------------

function runningOf(situation: Situation): Running | undefined {
  switch (situation.kind) {
    case 'claiming':
    case 'waiting':
      return situation.exchange;
    case 'holding':
    case 'asking':
    case 'displaced':
      return situation.exchange;
    default:
      return undefined;
  }
}

function leftOf(visit: Visit, now: Now): number {
  return Math.max(0, Math.floor(visit.ask.deadline - now.mono));
}

/** What every item this visit writes remembers: the newest token that proves the key, and its latest rejection, over what the item had. */
function memoOf(visit: Visit, base: KeyMemo): KeyMemo {
  const rejectedAt = epochMs(Math.max(base.rejectedAt, visit.rejection.at));
  const memo: KeyMemo = { ...base, kept: base.kept && base.kept.receivedAt > rejectedAt ? base.kept : null, rejectedAt };
  const { seen } = visit;
  // A copy goes back only into the item it came from: one remembered from before a pepper rotation (or read from an item since overwritten) is not re-shared.
  // A token received before a pepper switch may have a 401 only the old items know: it is not shared anew.
  const ours =
    seen &&
    seen.receivedAt > visit.ask.pepperSwitchedAt &&
    (!seen.copy || (base.kept?.receivedAt === seen.receivedAt && base.kept.by === seen.receivedBy));
  return ours && seen.receivedAt > rejectedAt && shareable(seen, visit.settings) ? keeping(memo, seen) : memo;
}

/** The room an item with this memo has left for tokens riding along for waiters. */
function tokenRoom(visit: Visit, memo: KeyMemo): number {
  return visit.settings.itemTokenBytes - (memo.kept ? tokenBytes(memo.kept.token) : 0);
}

function inlineBytes(outcome: Ended): number {
  return outcome.outcome.kind === 'answered' && typeof outcome.outcome.token === 'object' ? tokenBytes(outcome.outcome.token.token) : 0;
}

/** Whether a token may go into the table: kept tokens up to the size an item can carry. */
function shareable(entry: Entry, settings: CacheSettings): boolean {
  return keepable(entry.token) && tokenBytes(entry.token) <= settings.maxSharedTokenBytes;
}

/** The index of the outcome that ends first. */
function firstEnding(outcomes: readonly Ended[]): number {
  const ends = outcomes.map(endsAt);
  return ends.indexOf(epochMs(Math.min(...ends)));
}

/** The memo and the outcomes a write keeps, `own` bytes of tokens going to its own outcome first. */
function carrying(visit: Visit, memo: KeyMemo, now: Now, own = 0): Pick<KeyItem, 'memo' | 'ended'> {
  const { ended, squeezed } = carried(visit, visit.mirror?.ended ?? [], now, tokenRoom(visit, memo) - own);
  // A waiter whose token was squeezed out would wait on the next claim in vain: for a while, nobody waits on the key's claims.
  return { memo: squeezed ? crowded(memo, visit, now) : memo, ended };
}

/** The memo of a key whose tokens are known not to fit in its item: each instance asks for its own. */
function crowded(memo: KeyMemo, visit: Visit, now: Now): KeyMemo {
  return { ...memo, oversizeUntil: epochMs(Math.max(memo.oversizeUntil, now.epoch + visit.settings.oversizeKnownMs)) };
}

/** The outcomes a write carries forward: those still of use to someone, the last few, and tokens of their own only while they fit. */
function carried(
  visit: Visit,
  ended: readonly Ended[],
  now: Now,
  room: number,
): { readonly ended: readonly Ended[]; readonly squeezed: boolean } {
  const live = ended.filter((outcome) => endsAt(outcome) + CLOCK_TOLERANCE_MS > now.epoch);
  // Past the bound, the oldest go first, holds last of all and the one that ends first: no later outcome shortens a hold.
  while (live.length > visit.settings.kept.ended) {
    const drop = live.findIndex((outcome) => !(outcome.outcome.kind === 'failure' && isHold(outcome.outcome.failure)));
    live.splice(drop < 0 ? firstEnding(live) : drop, 1);
  }
  let squeezed = false;
  const kept = live
    .reverse()
    .map((outcome): Ended => {
      if (outcome.outcome.kind !== 'answered' || typeof outcome.outcome.token !== 'object') return outcome;
      room -= inlineBytes(outcome);
      if (room >= 0) return outcome;
      squeezed = true;
      return { ...outcome, outcome: { ...outcome.outcome, token: 'unshared' } };
    })
    .reverse();
  return { ended: kept, squeezed };
}
