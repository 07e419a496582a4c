import { keepable, newest, openToFleet } from './lifetime';
import type { Entry } from './lifetime';
import { type Outcome, UNKNOWN_REJECTION } from './outcome';
import { inForce, isHold, type KeyView, longer, outlivesRejection, type Remembered } from './rules';
import { type EpochMs, epochMs } from './time';

/** What this instance knows about one key. */
export interface Slot {
  /** The newest kept token (one another instance received carries `fleet`: that one is the other's to refresh early). */
  kept: Entry | undefined;
  /** The key's latest rejection known (0: none): no token received before it stands in for a failure. */
  rejectedAt: EpochMs;
  /** A remembered failure, or a hold on this key alone. */
  failure: Remembered | undefined;
  /** The fetch under way, which other requests for the key share. */
  pending: Promise<Outcome> | undefined;
  /** When a refresh ahead last ended: the next may start a second later. */
  refreshTriedAt: EpochMs;
}

const REFRESH_RETRY_MS = 1000;

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

  constructor(private readonly maxEntries: number) {}

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
        rejectedAt: epochMs(0),
        failure: undefined,
        pending: undefined,
        refreshTriedAt: epochMs(-Infinity),
      })
    );
  }

  /** The hold on a hold key, while it is in force. */
  hold(holdKey: string, now: EpochMs): Remembered | undefined {
    const until = this.holds.get(holdKey);
    return until !== undefined && until > now ? { code: 'upstream_throttled', until } : undefined;
  }

  /** Hold a hold key until `until`, or longer if it is held longer already. */
  setHold(holdKey: string, until: EpochMs): void {
    const held = this.holds.get(holdKey) ?? epochMs(-Infinity);
    this.holds.delete(holdKey);
    this.holds.set(holdKey, until > held ? until : held);
    evictOldest(this.holds, this.maxEntries);
  }

  /** What this instance knows about a key, as a request sees it. A token another instance asked for is that instance's to refresh, early on. */
  view(slot: Slot | undefined, hold: Remembered | undefined, now: EpochMs): KeyView {
    const failure = slot && inForce(slot.failure, now) ? slot.failure : undefined;
    const kept = slot?.kept;
    return {
      // An expired token is in no phase that answers: the plan passes it by.
      entry: kept,
      failure: failure && !isHold(failure) ? failure : undefined,
      hold: longer(hold, failure && isHold(failure) ? failure : undefined),
      busy: slot?.pending !== undefined,
      refreshing:
        slot?.pending !== undefined ||
        now - (slot?.refreshTriedAt ?? -Infinity) < REFRESH_RETRY_MS ||
        (kept?.fleet === true && !openToFleet(kept, now)),
    };
  }

  /**
   * Keep what a fetch learnt: a newer keepable token, a remembered failure (a rejection voids every
   * token received before it), the key's rejection, and a hold (for the client, or the key alone).
   */
  store(key: string, slot: Slot, holdKey: string, outcome: Outcome, refresh: boolean, now: EpochMs): void {
    if (outcome.kind === 'token') {
      if (keepable(outcome.entry.token)) slot.kept = newest(slot.kept, outcome.entry);
      slot.failure = undefined;
    } else if (outcome.cause !== 'deadline') {
      const rejectedAt = outcome.failure.code === 'unauthorized' ? now : outcome.rejectedAt;
      if (rejectedAt !== UNKNOWN_REJECTION && rejectedAt > slot.rejectedAt) slot.rejectedAt = rejectedAt;
      slot.kept = [slot.kept, outcome.kept].filter((entry) => entry && outlivesRejection(entry, slot.rejectedAt)).reduce(newest, undefined);
      const { failure } = outcome;
      // A hold this request's own exchange earned covers whom its scope says; one seen elsewhere, this key alone.
      if (isHold(failure) && outcome.scope === 'client' && outcome.cause === 'exchange') this.setHold(holdKey, failure.until);
      else
        slot.failure = isHold(failure)
          ? longer(inForce(slot.failure, now) && isHold(slot.failure) ? slot.failure : undefined, failure)
          : failure;
    }
    // A refresh that brought a new token leaves nothing to refresh for far longer than the second.
    if (refresh) slot.refreshTriedAt = now;
    this.place(key, slot);
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
