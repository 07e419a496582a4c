import type { Answer, Asked, IdpCall, IdpPhase, SimKey, SimRecord, TableCall, Tampering, Violation } from '../record';
import {
  DEAD_HOLDER_DELAY_MS,
  COPY_SAYS_LESS_MS,
  EXPIRY_GUARD_MS,
  FAILURE_REMEMBERED_MS,
  HOLD_MAX_S,
  HOLD_MIN_S,
  HOLD_UNSAID_S,
  ITEM_TOKEN_BYTES,
  OVERSIZE_KNOWN_MS,
  SHARED_TOKEN_LIMIT_BYTES,
  PEPPER_SWITCH_MS,
  PROOF_LIFETIMES,
  REJECTION_REMEMBERED_MS,
  SECOND_MS,
  WHOLE_DEADLINE_SHORTFALL_SHARE,
} from './contract';
import { type Life, lifeOf } from './life';
import { listIn, Moments } from './moments';

// What every invariant reads, derived once from the record: keys, requests and calls by id, the tokens
// and their life, the holds, who could know what when, and the trouble that excuses. Nothing here is
// the cache's: each rule is the contract's, and each window is sized by the record's own clock spread.

/** A demand ("the cache must have known") is judged on what was surely so; an excuse on what possibly was. */
export type Certainty = 'surely' | 'possibly';

/** A token the IdP issued: at its call's end, received by the instance that made the call. */
export interface Issued {
  readonly token: string;
  readonly key: SimKey;
  readonly call: IdpCall;
  readonly receiver: string;
  readonly issuedAt: number;
  readonly life: Life;
}

/** A request that got an answer. */
export interface Answered {
  readonly asked: Asked;
  readonly key: SimKey;
  readonly answer: Answer;
}

/** A 200 and the token it carried, which the IdP issued (answers with any other token are the `issued` invariant's). */
export interface Served extends Answered {
  readonly issued: Issued;
}

/** A throttle's hold: earned at `from` by `source` on `instance`, in force until `until`. */
export interface Hold {
  readonly call: IdpCall;
  readonly source: SimKey;
  readonly instance: string;
  readonly from: number;
  readonly until: number;
  /**
   * The latest its own instance may see it end: a Lambda frozen when the IdP answered meets the throttle
   * when it thaws and counts the retry-after from then, or from its request's deadline (it came by then).
   */
  readonly lateUntil: number;
  readonly retryAfterS: number;
  /** When the request that earned it was answered, or its 429 reached its instance if later (a refresh ahead): published to the fleet by then. */
  readonly told: number | undefined;
  /** Whether the source's secret was proven when the hold was earned ("The IdP asks to wait"). */
  readonly proven: Readonly<Record<Certainty, boolean>>;
}

/** An instance that held a claim on a key and stopped renewing it: it died, or its writes no longer landed. */
export interface StoppedHolder {
  readonly instance: string;
  readonly at: number;
}

/** How long an IdP call's outcome is remembered for its key ("Remembered failures"); a token or a throttle: not at all. */
export function rememberedMs(call: IdpCall, T: number): number {
  switch (call.outcome) {
    case 'unauthorized':
      return REJECTION_REMEMBERED_MS;
    case 'error':
      return FAILURE_REMEMBERED_MS;
    case 'timeout':
      return wholeDeadline(call, T) ? FAILURE_REMEMBERED_MS : 0;
    default:
      return 0;
  }
}

/** A timeout given the whole deadline: one given less was "cut short by the request's own deadline" and is never remembered. */
export function wholeDeadline(call: IdpCall, T: number): boolean {
  return call.budgetMs >= T - T * WHOLE_DEADLINE_SHORTFALL_SHARE;
}

/** What `TOKEN_CACHE=off` would answer a request for `key` that arrived in `phase`, with `deadlineMs` to wait. */
function offStatuses(phase: IdpPhase, key: SimKey, deadlineMs: number): ReadonlySet<number> {
  // The record says of a wrong secret: rejected "unless the IdP is throttling everyone or failing".
  const status = { token: key.authentic ? 200 : 401, reject: 401, throttle: 503, error: 502 }[phase.answer.kind];
  if (phase.maxMs <= deadlineMs) return new Set([status]);
  if (phase.minMs > deadlineMs) return new Set([504]);
  return new Set([status, 504]);
}

export class Facts {
  readonly T: number;
  /** Max skew less min skew over the record's instances: how far one's fact may take effect early or late on another. */
  readonly spread: number;
  readonly shared: boolean;
  readonly keys = new Map<string, SimKey>();
  readonly requests = new Map<number, Asked>();
  readonly answers = new Map<number, Answer>();
  /** Answered requests, in the order of their answers. */
  readonly answered: Answered[] = [];
  /** The 200s whose token the IdP issued, in the order of their answers. */
  readonly served: Served[] = [];
  /** Requests never answered. */
  readonly unanswered: Asked[] = [];
  /** IdP calls, in the order they were sent. */
  readonly calls: IdpCall[] = [];
  readonly tokens = new Map<string, Issued>();
  readonly holds: Hold[] = [];
  /** What the record names and does not hold (a request of no key, an answer to no request): nothing else can judge it. */
  readonly dangling: Violation[] = [];

  private readonly instances = new Map<string, { readonly skewMs: number; readonly diedAt: number | undefined }>();
  private readonly requestsOn = new Map<string, Asked[]>();
  private readonly callsByKey = new Map<string, IdpCall[]>();
  private readonly callsByRequest = new Map<number, IdpCall[]>();
  private readonly ended = new Map<string, Moments<IdpCall>>();
  private readonly tokensByKey = new Map<string, Moments<Issued>>();
  private readonly longestLife = new Map<string, number>();
  /** When each instance first answered each token: token, then instance. */
  private readonly firstServed = new Map<string, Map<string, number>>();
  private readonly servedBy = new Map<string, Served[]>();
  private readonly tableFaults = new Map<string, Moments<string>>();
  private reads: Map<string, Moments<TableCall>> | undefined;
  private readonly pepperSpans = new Map<string, { from: number; to: number }[]>();
  private readonly tamperings = new Map<string, Moments<Tampering>>();
  private readonly ttlDeletions = new Map<string, Moments>();
  private readonly rotations: Moments;
  private readonly stopped = new Map<string, Moments<StoppedHolder>>();
  private readonly phases: readonly IdpPhase[];
  private readonly sent: Moments<IdpCall>;
  private readonly allTamperings: Moments<Tampering>;
  private readonly noCacheMisses = new Map<string, Moments<Answered>>();
  private readonly holdsByClient = new Map<string, Moments<Hold>>();
  private readonly holdsByCall = new Map<IdpCall, Hold>();
  private readonly firstTooLarge = new Map<string, number>();

  constructor(readonly record: SimRecord) {
    this.T = record.upstreamTimeoutMs;
    this.shared = record.cache === 'shared';
    const skews = record.instances.map((instance) => instance.skewMs);
    this.spread = skews.length > 0 ? Math.max(...skews) - Math.min(...skews) : 0;
    for (const instance of record.instances) this.instances.set(instance.name, instance);
    for (const key of record.keys) this.keys.set(key.id, key);
    this.phases = [...record.idpPhases].sort((a, b) => a.from - b.from);
    this.rotations = Moments.of(record.rotations);
    this.allTamperings = new Moments(record.tamperings.map((tampering) => ({ at: tampering.at, what: tampering })));
    this.indexRequests();
    const throttles = this.indexCalls();
    this.sent = new Moments(this.calls.map((call) => ({ at: call.sentAt, what: call })));
    this.indexServed();
    this.indexTrouble();
    // Last: whom a hold covers depends on what its instance knew, which reads everything above.
    this.indexHolds(throttles);
  }

  // ---- keys, requests, calls, tokens ----

  /** The requests under way on `instance` at some moment of [from, to] (unanswered ones to the end). */
  underWay(instance: string, from: number, to: number): Asked[] {
    return (this.requestsOn.get(instance) ?? []).filter(
      (asked) => asked.arrivedAt <= to && (this.answers.get(asked.id)?.answeredAt ?? Infinity) >= from,
    );
  }

  /** Whether `asked` was the only request on its instance from its arrival to `until`. */
  alone(asked: Asked, until: number): boolean {
    return this.underWay(asked.instance, asked.arrivedAt, until).every((other) => other.id === asked.id);
  }

  callsFor(key: string): readonly IdpCall[] {
    return this.callsByKey.get(key) ?? [];
  }

  callsOf(request: number): readonly IdpCall[] {
    return this.callsByRequest.get(request) ?? [];
  }

  /** Calls sent in [from, to]. */
  sentWithin(from: number, to: number): IdpCall[] {
    return this.sent.within(from, to);
  }

  /** Calls for `key` that ended in [from, to]. */
  endedWithin(key: string, from: number, to: number): IdpCall[] {
    return this.ended.get(key)?.within(from, to) ?? [];
  }

  /** Tokens of `key` issued in [from, to], oldest first. */
  tokensWithin(key: string, from: number, to: number): Issued[] {
    return this.tokensByKey.get(key)?.within(from, to) ?? [];
  }

  /** Tokens of `key` a kept copy of which may still live at `at` (issued no longer than its longest life ago). */
  tokensAlive(key: string, at: number, lifetimes = 1): Issued[] {
    return this.tokensWithin(key, at - lifetimes * (this.longestLife.get(key) ?? 0) - this.spread, at);
  }

  /**
   * Whether a token that cannot be kept found no room in its key's item beside another of the key that may have stood there
   * with it: the kept one while unexpired, or one riding along while its outcome was of use (ITEM_TOKEN_BYTES together).
   */
  squeezed(call: IdpCall): boolean {
    const issued = this.tokens.get(call.token ?? '');
    if (!this.shared || !issued || issued.life.kept) return false;
    const usefulMs = this.T + this.spread;
    return this.tokensWithin(issued.key.id, -Infinity, call.endedAt + usefulMs).some(
      (other) =>
        other !== issued &&
        other.call.bytes + call.bytes > ITEM_TOKEN_BYTES &&
        (other.life.kept
          ? other.call.bytes <= SHARED_TOKEN_LIMIT_BYTES && other.issuedAt + other.life.lifeMs + this.spread >= call.sentAt
          : other.issuedAt + usefulMs >= call.sentAt),
    );
  }

  /**
   * Whether the fleet surely knew at `at` that `key`'s tokens may not fit in its item: one over an item's room was published
   * (its request answered with no trouble) within the hour before, and its item was left alone since ("Large tokens").
   */
  oversizeKnown(key: string, at: number): boolean {
    return this.tokensWithin(key, at - OVERSIZE_KNOWN_MS + this.spread, at).some((issued) => {
      const told = this.answers.get(issued.call.request)?.answeredAt;
      const asked = this.requests.get(issued.call.request)?.arrivedAt ?? issued.call.sentAt;
      return (
        issued.call.bytes > ITEM_TOKEN_BYTES &&
        told !== undefined &&
        told < at &&
        !this.troubled(issued.receiver, asked, told) &&
        this.intact(key, told, at)
      );
    });
  }

  /** Whether a token of `key` issued by `at` could not reach waiters through the table (DynamoDB's item limit). */
  tooLargeBefore(key: string, at: number): boolean {
    let first = this.firstTooLarge.get(key);
    if (first === undefined) {
      const large = this.tokensWithin(key, -Infinity, Infinity).find(
        (issued) => issued.call.bytes > SHARED_TOKEN_LIMIT_BYTES || this.squeezed(issued.call),
      );
      first = large?.issuedAt ?? Infinity;
      this.firstTooLarge.set(key, first);
    }
    return first <= at;
  }

  /** The answers that carried `token`. */
  servedWith(token: string): readonly Served[] {
    return this.servedBy.get(token) ?? [];
  }

  deadline(asked: Asked): number {
    return asked.arrivedAt + this.T;
  }

  /** How far a fact dated by `writer` may take effect early or late on `reader`: exact on one clock. */
  slack(writer: string, reader: string): number {
    return writer === reader ? 0 : this.spread;
  }

  /** What `TOKEN_CACHE=off` would answer a request for `key` arriving at `at`, with `deadlineMs` to wait. */
  off(key: SimKey, at: number, deadlineMs = this.T): ReadonlySet<number> {
    let phase: IdpPhase | undefined;
    for (const candidate of this.phases) if (candidate.from <= at) phase = candidate;
    return phase ? offStatuses(phase, key, deadlineMs) : new Set();
  }

  /** Whether `off` would surely answer `status`. */
  offSurely(key: SimKey, at: number, status: number, deadlineMs = this.T): boolean {
    const statuses = this.off(key, at, deadlineMs);
    return statuses.size === 1 && statuses.has(status);
  }

  // ---- who knew what, when ----

  /** Whether `instance` answered `token` before `before`. */
  answeredWith(instance: string, token: string, before: number): boolean {
    const first = this.firstServed.get(token)?.get(instance);
    return first !== undefined && first < before;
  }

  diedAt(instance: string): number | undefined {
    return this.instances.get(instance)?.diedAt;
  }

  /** No-cache requests for `key` answered `miss` with a token issued in [from, to] (by the token's issue). */
  noCacheMissesWithin(key: string, from: number, to: number): Answered[] {
    return this.noCacheMisses.get(key)?.within(from, to) ?? [];
  }

  /**
   * Whether a token's exchange outlived its request: its instance may have been frozen when it ended, so its receiver
   * may date it from the call's send, and its copies with it (a range from send to receipt).
   */
  outlived(issued: Issued): boolean {
    return (this.answers.get(issued.call.request)?.answeredAt ?? Infinity) < issued.call.endedAt;
  }

  /** The earliest moment a token may be dated at: its call's send if its exchange outlived its request, else its receipt. */
  datedFrom(issued: Issued): number {
    return this.outlived(issued) ? issued.call.sentAt : issued.issuedAt;
  }

  /**
   * When the fleet could surely read a token from the table: its receiver answered the request that got it
   * with no faulty table call or pepper read in between ("Every outcome a request meets is published").
   */
  publishedAt(issued: Issued): number | undefined {
    if (!this.shared || !issued.life.kept || issued.call.bytes > SHARED_TOKEN_LIMIT_BYTES) return undefined;
    const told = this.answers.get(issued.call.request)?.answeredAt;
    // Trouble anywhere in the request that got it: a visit that began without the table never publishes.
    const asked = this.requests.get(issued.call.request)?.arrivedAt ?? issued.call.sentAt;
    if (told === undefined || this.troubled(issued.receiver, asked, told)) return undefined;
    // An exchange that outlived its request (a refresh ahead) publishes once its token reached the receiver.
    return Math.max(told, this.reachedAt(issued.call));
  }

  /**
   * Whether the table surely kept what was published in `key`'s item over [from, to]: no one touched it, and the
   * pepper stood or (`sealedAlike`) its rotation came before the writer and the reader had switched.
   */
  intact(key: string, from: number, to: number, sealedAlike = false): boolean {
    return !this.tampered(key, from, to) && !this.ttlDeleted(key, from, to) && (sealedAlike || !this.rotated(from - PEPPER_SWITCH_MS, to));
  }

  /**
   * The pepper: "items sealed with the old one are then ignored". Whether `issued` stays readable to `reader`
   * from `from` to `to`: every rotation that could void it came before its receiver's visit began, and both
   * the receiver and the reader had read the new pepper by then, so its item is sealed with the pepper the reader uses.
   */
  sealedAlike(issued: Issued, reader: string, from: number, to: number): boolean {
    const rotations = this.record.rotations.filter((at) => at >= issued.issuedAt - PEPPER_SWITCH_MS && at <= to);
    if (rotations.length === 0) return true;
    const last = Math.max(...rotations);
    const sealedFrom = Math.min(this.requests.get(issued.call.request)?.arrivedAt ?? Infinity, issued.call.sentAt);
    return last < sealedFrom && this.switched(issued.receiver, last, sealedFrom) && this.switched(reader, last, from);
  }

  /** Whether a read of the pepper as it stood after the rotation at `rotation` reached `instance` before `by` (at a thaw: in either order, so not). */
  private switched(instance: string, rotation: number, by: number): boolean {
    return this.record.pepper.some(
      (read) =>
        read.instance === instance &&
        read.fault === 'none' &&
        read.sentAt >= rotation &&
        read.answeredAt !== undefined &&
        this.thawedAt(instance, read.answeredAt) < by,
    );
  }

  /**
   * Whether `instance` surely held `issued` for a request that arrived at `arrivedAt`, until `until`:
   * in memory (it received or answered the token before), or (`shared`) from the table, published
   * before, untouched since, and read by an instance whose table and pepper answered all along.
   */
  heldSurely(instance: string, issued: Issued, arrivedAt: number, until: number): 'memory' | 'table' | undefined {
    if (!issued.life.kept) return undefined;
    if ((issued.receiver === instance && this.reachedAt(issued.call) < arrivedAt) || this.answeredWith(instance, issued.token, arrivedAt))
      return 'memory';
    const published = this.publishedAt(issued);
    if (published === undefined || !(published < arrivedAt)) return undefined;
    // Untouched from the receipt on: a copy written back between the publication's write and its answer hides it too.
    const sealedAlike = this.sealedAlike(issued, instance, arrivedAt, until);
    if (!this.intact(issued.key.id, this.reachedAt(issued.call), until, sealedAlike) || this.troubled(instance, arrivedAt, until))
      return undefined;
    return 'table';
  }

  /**
   * When an IdP call's answer reached its instance: when the IdP answered, unless the instance, shaped like
   * Lambda, was frozen then (its request answered, no other under way); then when the next request thawed
   * it, in whichever order the two come to it.
   */
  reachedAt(call: IdpCall): number {
    return this.thawedAt(call.instance, call.endedAt);
  }

  /** When an answer that came to `instance` at `at` reached its code: then, unless it was a frozen Lambda's; then at its thaw. */
  private thawedAt(instance: string, at: number): number {
    if (this.record.mode !== 'lambda') return at;
    if (this.underWay(instance, at, at).length > 0) return at;
    return (this.requestsOn.get(instance) ?? []).find((asked) => asked.arrivedAt > at)?.arrivedAt ?? Infinity;
  }

  /**
   * A 401 for `key` that ended in (after, upTo] and that `instance` may have learnt of: with `memory`,
   * its own; with `shared`, any (the demand that a token be used gives way to any 401 it may know).
   */
  rejectedAfter(key: string, instance: string, after: number, upTo: number): IdpCall | undefined {
    return this.endedWithin(key, after, upTo).find(
      (call) => call.outcome === 'unauthorized' && call.endedAt > after && (this.shared || call.instance === instance),
    );
  }

  /** The age at which a token stops being served to `instance`: its receiver 5 s before expiry, a copy 5 s sooner ("Clocks"). */
  servingLimitMs(issued: Issued, instance: string): number | undefined {
    const { lifeMs } = issued.life;
    if (lifeMs === undefined) return undefined;
    return lifeMs - EXPIRY_GUARD_MS - (issued.receiver === instance ? 0 : COPY_SAYS_LESS_MS);
  }

  /** Whether `instance` sent writes to `item` from `from` on, and none of them landed by `by`. */
  writesUnlanded(instance: string, item: string, from: number, by: number): boolean {
    const puts = this.record.table.filter(
      (call) => call.instance === instance && call.item === item && call.op === 'put' && call.sentAt >= from,
    );
    return puts.length > 0 && !puts.some((call) => call.landedAt !== undefined && call.landedAt <= by);
  }

  /**
   * Whether the fleet was never surely told of a call's outcome by `at`: it came at its request's deadline, where
   * "Everything a request does ... ends", and no write its instance sent from the call's end had landed by then.
   */
  untoldAtDeadline(call: IdpCall, at: number): boolean {
    const asked = this.requests.get(call.request);
    const answeredAt = this.answers.get(call.request)?.answeredAt;
    const atDeadline =
      call.outcome === 'timeout' || (answeredAt !== undefined && asked !== undefined && answeredAt >= this.deadline(asked));
    return atDeadline && this.writesUnlanded(call.instance, call.key, call.endedAt, at);
  }

  /** Whether `instance` had an answer from the table to a read (of an item `item` accepts) sent in [from, to]. */
  readTable(instance: string, from: number, to: number, item: (name: string) => boolean = () => true): boolean {
    return this.record.table.some(
      (call) =>
        call.instance === instance &&
        call.op === 'get' &&
        call.answeredAt !== undefined &&
        call.sentAt >= from &&
        call.sentAt <= to &&
        item(call.item),
    );
  }

  // ---- trouble ----

  /** Whether `instance` had a table call with a fault sent in [from, to] (on `item` when given), or a pepper read with one. */
  troubled(instance: string, from: number, to: number, item?: string): boolean {
    return this.tableFault(instance, from, to, item) || this.pepperFault(instance, from, to);
  }

  pepperFault(instance: string, from: number, to: number): boolean {
    return (this.pepperSpans.get(instance) ?? []).some((span) => span.from <= to && span.to >= from);
  }

  tableFault(instance: string, from: number, to: number, item?: string): boolean {
    const items = this.tableFaults.get(instance)?.within(from, to) ?? [];
    return item === undefined ? items.length > 0 : items.includes(item);
  }

  /**
   * Whether the table had not yet told `instance` what the items `which` names hold at `at`: it read one
   * since `from`, that read was still out at `at`, and none it sent since `from` had answered by then.
   */
  tableSilent(instance: string, which: (item: string) => boolean, from: number, at: number): boolean {
    const reads = this.readsWithin(instance, which, from, at);
    const answered = (read: TableCall) => read.answeredAt !== undefined && read.answeredAt <= at;
    return reads.length > 0 && !reads.some(answered);
  }

  /** Whether `instance` read an item `which` names, sent after `from` and answered with no fault by `to`. */
  readBetween(instance: string, which: (item: string) => boolean, from: number, to: number): boolean {
    return this.readsWithin(instance, which, from, to).some(
      (read) => read.sentAt > from && read.fault === 'none' && read.answeredAt !== undefined && read.answeredAt <= to,
    );
  }

  /** As `readBetween`, and met when answered: a frozen Lambda meets a read's answer only as the next request thaws it, in either order. */
  readMet(instance: string, which: (item: string) => boolean, from: number, to: number): boolean {
    return this.readsWithin(instance, which, from, to).some(
      (read) =>
        read.sentAt > from &&
        read.fault === 'none' &&
        read.answeredAt !== undefined &&
        read.answeredAt <= to &&
        this.thawedAt(instance, read.answeredAt) === read.answeredAt,
    );
  }

  private readsWithin(instance: string, which: (item: string) => boolean, from: number, to: number): TableCall[] {
    // Indexed when first asked: only the hold and 401 readings ask.
    if (!this.reads) {
      const byInstance = new Map<string, { at: number; what: TableCall }[]>();
      for (const call of this.record.table) if (call.op === 'get') listIn(byInstance, call.instance).push({ at: call.sentAt, what: call });
      this.reads = new Map([...byInstance].map(([name, list]) => [name, new Moments(list)]));
    }
    return (this.reads.get(instance)?.within(from, to) ?? []).filter((read) => which(read.item));
  }

  /** Adversary writes to `item` in [from, to] (only those `which` accepts). */
  tampered(item: string, from: number, to: number, which: (tampering: Tampering) => boolean = () => true): boolean {
    return (this.tamperings.get(item)?.within(from, to) ?? []).some(which);
  }

  /** Adversary writes in [from, to] to any item `which` names. */
  tamperedItems(which: (item: string) => boolean, from: number, to: number): boolean {
    return this.allTamperings.within(from, to).some((tampering) => which(tampering.item));
  }

  ttlDeleted(item: string, from: number, to: number): boolean {
    return this.ttlDeletions.get(item)?.any(from, to) ?? false;
  }

  rotated(from: number, to: number): boolean {
    return this.rotations.any(from, to);
  }

  /** Instances that stopped renewing a claim on `key` in [from, to] ("A dead holder": "it died, or its writes no longer land"). */
  stoppedHolders(key: string, from: number, to: number): StoppedHolder[] {
    return this.stopped.get(key)?.within(from, to) ?? [];
  }

  /**
   * Holders whose claim may still stand for a request arriving at `at`: stopped in the second before, or
   * earlier with no other instance sending for the key since (a takeover sends), so that the request meets
   * the claim and may spend its 1 s on it (liveness "never compares two clocks": only watching tells).
   */
  standingStopped(key: string, at: number): StoppedHolder[] {
    return this.stoppedHolders(key, -Infinity, at).filter(
      (holder) =>
        holder.at >= at - DEAD_HOLDER_DELAY_MS ||
        !this.callsFor(key).some((call) => call.instance !== holder.instance && call.sentAt > holder.at && call.sentAt < at),
    );
  }

  // ---- holds ----

  /** The hold a throttled call earned. */
  holdOf(call: IdpCall): Hold | undefined {
    return this.holdsByCall.get(call);
  }

  /** Holds earned in [from, to] for `key`'s client id and token URL, the only ones that may cover it. */
  holdsWithin(key: SimKey, from: number, to: number): Hold[] {
    return this.holdsByClient.get(clientOf(key))?.within(from, to) ?? [];
  }

  /** Holds that may be in force at `at` for `key`: earned by then, and not ended by any clock. */
  holdsAround(key: SimKey, at: number): Hold[] {
    return this.holdsWithin(key, at - HOLD_MAX_S * SECOND_MS - this.T - this.spread, at);
  }

  /** Whether `hold` covers requests for `key` ("The IdP asks to wait"). */
  covers(hold: Hold, key: SimKey, certainty: Certainty): boolean {
    const { source } = hold;
    if (key.id === source.id) return true;
    if (key.client !== source.client || key.tokenUrl !== source.tokenUrl) return false;
    switch (source.kind) {
      case 'assertion':
        return key.kind === 'assertion';
      case 'credential':
        return false;
      case 'secret':
        return hold.proven[certainty];
    }
  }

  /** An item whose loss or replay can hide a hold: the source's own, or a hold item naming its client or credential. */
  holdItem(item: string, source: SimKey): boolean {
    if (item === source.id) return true;
    const scope = item.startsWith('hold:') ? item.slice('hold:'.length) : undefined;
    return scope !== undefined && (scope.includes(source.client) || (source.credential !== undefined && scope.includes(source.credential)));
  }

  private indexRequests(): void {
    for (const asked of this.record.requests) {
      if (!this.keys.has(asked.key) || !this.instances.has(asked.instance)) {
        this.dangle(asked.arrivedAt, `request ${asked.id} names key ${asked.key} on ${asked.instance}, which the record does not hold`);
      } else {
        this.requests.set(asked.id, asked);
        listIn(this.requestsOn, asked.instance).push(asked);
      }
    }
    for (const answer of [...this.record.answers].sort((a, b) => a.answeredAt - b.answeredAt)) {
      const asked = this.requests.get(answer.request);
      if (!asked) this.dangle(answer.answeredAt, `an answer to request ${answer.request}, which the record does not hold`);
      else if (this.answers.has(asked.id)) this.dangle(answer.answeredAt, `request ${asked.id} answered twice`);
      else {
        this.answers.set(asked.id, answer);
        this.answered.push({ asked, key: this.keys.get(asked.key) as SimKey, answer });
      }
    }
    for (const list of this.requestsOn.values()) list.sort((a, b) => a.arrivedAt - b.arrivedAt);
    for (const asked of this.requests.values()) if (!this.answers.has(asked.id)) this.unanswered.push(asked);
  }

  /** Calls by key and request, and the tokens they issued; returns the throttles, whose holds come last. */
  private indexCalls(): [IdpCall, SimKey][] {
    const endings = new Map<string, { at: number; what: IdpCall }[]>();
    const issuedByKey = new Map<string, Issued[]>();
    const throttles: [IdpCall, SimKey][] = [];
    for (const call of [...this.record.idp].sort((a, b) => a.sentAt - b.sentAt)) {
      const key = this.keys.get(call.key);
      if (!key) {
        this.dangle(call.sentAt, `IdP call ${call.id} names key ${call.key}, which the record does not hold`);
        continue;
      }
      this.calls.push(call);
      listIn(this.callsByKey, call.key).push(call);
      listIn(this.callsByRequest, call.request).push(call);
      listIn(endings, call.key).push({ at: call.endedAt, what: call });
      if (call.outcome === 'token') this.issue(call, key, issuedByKey);
      if (call.outcome === 'throttled') throttles.push([call, key]);
    }
    for (const [key, list] of endings) this.ended.set(key, new Moments(list));
    for (const [key, list] of issuedByKey)
      this.tokensByKey.set(key, new Moments(list.map((issued) => ({ at: issued.issuedAt, what: issued }))));
    return throttles;
  }

  /** Who answered which token when, and the no-cache misses that replace a key's kept token. */
  private indexServed(): void {
    const misses = new Map<string, { at: number; what: Answered }[]>();
    for (const answered of this.answered) {
      const issued = answered.answer.status === 200 ? this.tokens.get(answered.answer.token ?? '') : undefined;
      if (!issued) continue;
      const served = { ...answered, issued };
      this.served.push(served);
      listIn(this.servedBy, issued.token).push(served);
      let byInstance = this.firstServed.get(issued.token);
      if (!byInstance) this.firstServed.set(issued.token, (byInstance = new Map()));
      if (!byInstance.has(served.asked.instance)) byInstance.set(served.asked.instance, served.answer.answeredAt);
      if (served.asked.noCache && served.answer.header === 'miss')
        listIn(misses, served.key.id).push({ at: issued.issuedAt, what: served });
    }
    for (const [key, list] of misses) this.noCacheMisses.set(key, new Moments(list));
  }

  /** Faulty table calls and pepper reads, adversary writes, TTL deletions, and claim holders that stopped. */
  private indexTrouble(): void {
    const faults = new Map<string, { at: number; what: string }[]>();
    const stopped = new Map<string, { at: number; what: StoppedHolder }[]>();
    for (const call of this.record.table) {
      if (call.fault === 'none') continue;
      listIn(faults, call.instance).push({ at: call.sentAt, what: call.item });
      // A claim's renewal that never landed: "its writes no longer land".
      if (call.op === 'put' && call.landedAt === undefined && (call.fault === 'error' || call.fault === 'hang'))
        listIn(stopped, call.item).push({ at: call.sentAt, what: { instance: call.instance, at: call.sentAt } });
    }
    for (const [instance, list] of faults) this.tableFaults.set(instance, new Moments(list));
    // A faulty read of the pepper leaves its instance without one until a later read answers.
    const pepper = new Map<string, { from: number; to: number }[]>();
    for (const read of [...this.record.pepper].sort((a, b) => a.sentAt - b.sentAt)) {
      const spans = listIn(pepper, read.instance);
      const open = spans.at(-1);
      if (read.fault !== 'none') {
        if (!open || open.to !== Infinity) spans.push({ from: read.sentAt, to: Infinity });
      } else if (open && open.to === Infinity && read.answeredAt !== undefined) open.to = read.answeredAt;
    }
    for (const [instance, spans] of pepper) this.pepperSpans.set(instance, spans);
    const tampered = new Map<string, { at: number; what: Tampering }[]>();
    for (const tampering of this.record.tamperings) listIn(tampered, tampering.item).push({ at: tampering.at, what: tampering });
    for (const [item, list] of tampered) this.tamperings.set(item, new Moments(list));
    const deleted = new Map<string, number[]>();
    for (const deletion of this.record.deletions) listIn(deleted, deletion.item).push(deletion.at);
    for (const [item, list] of deleted) this.ttlDeletions.set(item, Moments.of(list));
    // A holder of a key's claim is, seen from outside, an instance that died with a request for the key open on it.
    const deaths = new Set<string>();
    for (const asked of this.unanswered) {
      const died = this.instances.get(asked.instance)?.diedAt;
      const once = `${asked.instance} ${asked.key}`;
      if (died === undefined || died < asked.arrivedAt || deaths.has(once)) continue;
      deaths.add(once);
      listIn(stopped, asked.key).push({ at: died, what: { instance: asked.instance, at: died } });
    }
    for (const [item, list] of stopped) this.stopped.set(item, new Moments(list));
  }

  private indexHolds(throttles: readonly [IdpCall, SimKey][]): void {
    const byClient = new Map<string, { at: number; what: Hold }[]>();
    for (const [call, key] of throttles) {
      const hold = this.holdFrom(call, key);
      this.holds.push(hold);
      this.holdsByCall.set(call, hold);
      listIn(byClient, clientOf(key)).push({ at: hold.from, what: hold });
    }
    for (const [client, list] of byClient) this.holdsByClient.set(client, new Moments(list));
  }

  private issue(call: IdpCall, key: SimKey, issuedByKey: Map<string, Issued[]>): void {
    if (call.token === undefined) {
      this.dangle(call.endedAt, `IdP call ${call.id} issued a token without naming it`);
      return;
    }
    if (this.tokens.has(call.token)) {
      this.dangle(call.endedAt, `token ${call.token} issued twice`);
      return;
    }
    const issued: Issued = { token: call.token, key, call, receiver: call.instance, issuedAt: call.endedAt, life: lifeOf(call.expiresIn) };
    this.tokens.set(call.token, issued);
    listIn(issuedByKey, key.id).push(issued);
    this.longestLife.set(key.id, Math.max(this.longestLife.get(key.id) ?? 0, issued.life.lifeMs ?? 0));
  }

  /** When a throttle was published: by its request's answer, or, for an exchange that outlived it (a refresh ahead), once the 429 reached its instance. */
  private toldAt(call: IdpCall): number | undefined {
    const answeredAt = this.answers.get(call.request)?.answeredAt;
    return answeredAt === undefined ? undefined : Math.max(answeredAt, this.reachedAt(call));
  }

  private holdFrom(call: IdpCall, source: SimKey): Hold {
    const retryAfterS = Math.min(HOLD_MAX_S, Math.max(HOLD_MIN_S, call.retryAfterS ?? HOLD_UNSAID_S));
    const from = call.endedAt;
    const asked = this.requests.get(call.request);
    const metLate = this.reachedAt(call) > from && asked !== undefined;
    const proven = (certainty: Certainty) => source.kind === 'secret' && this.proven(source, call, certainty);
    return {
      call,
      source,
      instance: call.instance,
      from,
      until: from + retryAfterS * SECOND_MS,
      lateUntil: (metLate ? Math.max(from, this.deadline(asked)) : from) + retryAfterS * SECOND_MS,
      retryAfterS,
      told: this.toldAt(call),
      proven: { surely: proven('surely'), possibly: proven('possibly') },
    };
  }

  /**
   * Whether the instance a throttle answered knew its key proven: "a request whose key has a kept token
   * (fresh, stale or expired less than one lifetime ago)" and no 401 since. Surely: it held the token
   * (as `heldSurely`), by every clock, and no 401 it may have learnt of came after. Possibly: it may
   * have read the token from the table, by some clock, and got no 401 for it itself.
   */
  private proven(source: SimKey, throttle: IdpCall, certainty: Certainty): boolean {
    const { instance, endedAt: at } = throttle;
    const arrivedAt = this.requests.get(throttle.request)?.arrivedAt ?? throttle.sentAt;
    return this.tokensAlive(source.id, at, PROOF_LIFETIMES).some((issued) => {
      if (!issued.life.kept) return false;
      const slack = this.slack(issued.receiver, instance);
      const provesUntil = issued.issuedAt + PROOF_LIFETIMES * issued.life.lifeMs;
      if (certainty === 'surely') {
        return (
          provesUntil > at + slack &&
          // A 401 another clock dated after the token's receipt may void it ("Clocks": up to the spread early or late).
          this.rejectedAfter(source.id, instance, issued.issuedAt - (this.shared ? this.spread : 0), at) === undefined &&
          this.heldSurely(instance, issued, arrivedAt, at) !== undefined
        );
      }
      const ownRejection = this.endedWithin(source.id, issued.issuedAt, at).some(
        (call) => call.outcome === 'unauthorized' && call.instance === instance && call.endedAt > issued.issuedAt,
      );
      const mayKnow = this.shared || issued.receiver === instance || this.answeredWith(instance, issued.token, at);
      // With `shared` the throttle also answers the requests that shared it, each on its own clock ("Clocks").
      return provesUntil > at - (this.shared ? this.spread : slack) && !ownRejection && mayKnow;
    });
  }

  private dangle(at: number, detail: string): void {
    this.dangling.push({ rule: 'record', at, detail });
  }
}

/** "that token URL (the whole URL, query included) for that client id". */
function clientOf(key: SimKey): string {
  return `${key.client}\n${key.tokenUrl}`;
}

/** A request in a few words, for a violation's detail. */
export function describe(asked: Asked): string {
  return `request ${asked.id} (${asked.key} on ${asked.instance}${asked.noCache ? ', no-cache' : ''}, arrived ${asked.arrivedAt})`;
}
