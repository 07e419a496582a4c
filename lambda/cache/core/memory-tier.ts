import { type EpochMs, epochMs, type MonoMs } from '../../clock';
import { keepable, newest, openToFleet } from './lifetime';
import type { Entry } from './lifetime';
import type { FailureOutcome, Outcome } from './outcome';
import {
  happenedAt,
  inForce,
  isHold,
  type KeyView,
  laterRejection,
  longer,
  NO_REJECTION,
  receivedSince,
  type Rejection,
  type Remembered,
  rejectionRemembered,
} from './rules';

/** A fetch of the key's token under way on this instance, which other requests for the key may share. */
export interface Pending {
  readonly outcome: Promise<Outcome>;
  /** When the request that started it, or the holder it waits on, must have its answer: a request whose own deadline ends much later need not share it. */
  deadline: MonoMs;
}

/** What this instance knows about one key. */
export interface Slot {
  /** The newest kept token (a copy, when another instance received it). */
  kept: Entry | undefined;
  /** The key's latest rejection known: no token received before it stands in for a failure. */
  rejection: Rejection;
  /** A remembered failure (not a hold). */
  failure: Remembered | undefined;
  /** A hold on this key alone: kept apart, so that no later failure shortens it. */
  hold: Remembered | undefined;
  pending: Pending | undefined;
  /** When a refresh ahead last ended: the next may start a second later. */
  refreshTriedAt: EpochMs;
  /** When this instance last looked in the table for a newer token of the key (shared only). */
  lookedAt: EpochMs;
  /** A look whose read has not come back: requests answered from memory meanwhile wait for it. */
  looking: Promise<void> | undefined;
}

/** The newest failure in force; past it, a rejection still remembered that no token has followed (a later, shorter failure hides it no longer). */
function rememberedFailure(slot: Slot, now: EpochMs): Remembered | undefined {
  if (inForce(slot.failure, now)) return slot.failure;
  const rejected = rejectionRemembered(slot.rejection);
  return !slot.kept && inForce(rejected, now) ? rejected : undefined;
}

/**
 * One function instance's memory: per key, the newest kept token, the key's latest rejection, a
 * remembered failure and the fetch under way; per hold key, a hold. Keys that keep a token and keys
 * that do not are bounded apart, least recently used first out, so requests that only fail (a flood of
 * wrong secrets) never push a kept token out. A request answered without a fetch leaves no trace.
 */
export class MemoryTier {
  private readonly keeping = new Map<string, Slot>();
  private readonly others = new Map<string, Slot>();
  private readonly holds = new Map<string, EpochMs>();

  constructor(
    private readonly maxEntries: number,
    private readonly refreshRetryMs: number,
  ) {}

  /** The key's slot, if there is one, made most recently used. */
  peek(key: string): Slot | undefined {
    const slot = this.keeping.get(key) ?? this.others.get(key);
    if (slot) this.place(key, slot);
    return slot;
  }

  /** The key's slot, made if there is none. */
  slot(key: string): Slot {
    return (
      this.peek(key) ??
      this.place(key, {
        kept: undefined,
        rejection: NO_REJECTION,
        failure: undefined,
        hold: undefined,
        pending: undefined,
        refreshTriedAt: epochMs(-Infinity),
        lookedAt: epochMs(-Infinity),
        looking: undefined,
      })
    );
  }

  /** The longest hold in force on any of these hold keys. */
  hold(holdKeys: readonly string[], now: EpochMs): Remembered | undefined {
    return holdKeys
      .map((holdKey) => this.holds.get(holdKey))
      .filter((until): until is EpochMs => until !== undefined && until > now)
      .map((until): Remembered => ({ code: 'upstream_throttled', until }))
      .reduce(longer, undefined);
  }

  /** Hold a hold key until `until`, or longer if it is held longer already. */
  setHold(holdKey: string, until: EpochMs): void {
    const held = this.holds.get(holdKey) ?? epochMs(-Infinity);
    this.holds.delete(holdKey);
    this.holds.set(holdKey, until > held ? until : held);
    evictOldest(this.holds, this.maxEntries);
  }

  /** What this instance knows about a key, as a request sees it. A copy is its receiver's to refresh, early on. */
  view(slot: Slot | undefined, hold: Remembered | undefined, now: EpochMs): KeyView {
    const kept = slot?.kept;
    return {
      entry: kept,
      failure: slot && rememberedFailure(slot, now),
      hold: longer(hold, slot && inForce(slot.hold, now) ? slot.hold : undefined),
      busy: slot?.pending !== undefined,
      refreshing:
        slot?.pending !== undefined ||
        now - (slot?.refreshTriedAt ?? -Infinity) < this.refreshRetryMs ||
        (kept?.copy === true && !openToFleet(kept, now)),
    };
  }

  /**
   * Keep what a fetch learnt: a newer keepable token, a remembered failure (a rejection voids every
   * token received before it), the key's rejection, and a hold (for the client, or the key alone).
   */
  store(key: string, slot: Slot, clientHoldKey: string, outcome: Outcome, refresh: boolean, now: EpochMs): void {
    if (outcome.kind === 'token') {
      // A remembered failure stays its time: a token that arrives meanwhile answers, but the IdP is not asked again.
      if (keepable(outcome.entry.token)) this.keep(slot, [outcome.entry]);
    } else {
      const { failure } = outcome;
      // A rejection met without the table's word is dated when it happened: met here now, or as remembered (maybe by another clock).
      const unknown: Rejection =
        failure.code !== 'unauthorized'
          ? NO_REJECTION
          : outcome.cause === 'exchange'
            ? { at: outcome.metAt, own: true }
            : { at: happenedAt(failure), own: false };
      slot.rejection = laterRejection(slot.rejection, outcome.rejection === 'unknown' ? unknown : outcome.rejection);
      this.keep(slot, outcome.kept ? [outcome.kept] : []);
      // A 504 cut short by the request's own deadline is not remembered; the token it answered with is kept all the same.
      if (outcome.cause !== 'deadline') this.remember(slot, clientHoldKey, outcome, now);
    }
    // A refresh that brought a new token leaves nothing to refresh for far longer than the retry pause; one a hold held
    // back (met as a hold, or answered with the kept token as the table showed the hold) was never tried: it goes once the hold ends.
    const tried = outcome.kind === 'token' ? outcome.from === 'idp' : !isHold(outcome.failure);
    if (refresh && tried) slot.refreshTriedAt = now;
    this.place(key, slot);
  }

  /** A failure or hold met: a hold this request's own exchange earned covers whom its scope says; one seen elsewhere, this key alone. */
  private remember(slot: Slot, clientHoldKey: string, outcome: FailureOutcome, now: EpochMs): void {
    const { failure } = outcome;
    if (isHold(failure) && outcome.scope === 'client' && outcome.cause === 'exchange') this.setHold(clientHoldKey, failure.until);
    else if (isHold(failure)) slot.hold = longer(inForce(slot.hold, now) ? slot.hold : undefined, failure);
    else slot.failure = failure;
  }

  /** What a look in the table found: the key's latest rejection (which voids older tokens here too), and its newest token. */
  looked(key: string, slot: Slot, seen: Entry | undefined, rejection: Rejection): void {
    slot.rejection = laterRejection(slot.rejection, rejection);
    this.keep(slot, seen && keepable(seen.token) ? [seen] : []);
    this.place(key, slot);
  }

  /** Keep the newest of what the slot had and `entries`, none received before the key's last rejection. */
  private keep(slot: Slot, entries: readonly Entry[]): void {
    slot.kept = [slot.kept, ...entries]
      .filter((entry): entry is Entry => entry !== undefined && receivedSince(entry, slot.rejection))
      .reduce<Entry | undefined>(newest, undefined);
  }

  /** Put a slot where it belongs (with the keys that keep a token, or with the others), most recently used. */
  private place(key: string, slot: Slot): Slot {
    this.keeping.delete(key);
    this.others.delete(key);
    const map = slot.kept ? this.keeping : this.others;
    map.set(key, slot);
    evictOldest(map, this.maxEntries);
    return slot;
  }
}

function evictOldest(map: Map<string, unknown>, max: number): void {
  while (map.size > max) map.delete(map.keys().next().value as string);
}
