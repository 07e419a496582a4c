import { keepable, newest, phaseOf } from './lifetime';
import type { Entry } from './lifetime';
import type { Outcome } from './outcome';
import type { Freshness, KeyView, Remembered } from './plan';

/** A fetch under way for a key on this instance, which other requests for the key share. */
export interface Pending {
  readonly outcome: Promise<Outcome>;
  /** Started for a `no-cache` request: its outcome is new, so `no-cache` requests may share it too. */
  readonly fresh: boolean;
}

/** What this instance knows about one key. */
export interface Slot {
  kept: Entry | undefined;
  failure: Remembered | undefined;
  pending: Pending | undefined;
  /** When a refresh ahead last ended without a new token (epoch ms): the next may start a second later. */
  refreshTriedAt: number;
}

const REFRESH_RETRY_MS = 1000;

/**
 * One function instance's memory: per key, the newest kept token, a remembered failure and the fetch
 * under way; per client id and token URL, a hold. Bounded, least recently used first out.
 */
export class MemoryTier {
  private readonly slots = new Map<string, Slot>();
  private readonly holds = new Map<string, number>();

  constructor(private readonly maxEntries: number) {}

  /** The key's slot, made most recently used. */
  slot(key: string): Slot {
    const slot = this.slots.get(key) ?? {
      kept: undefined,
      failure: undefined,
      pending: undefined,
      refreshTriedAt: Number.NEGATIVE_INFINITY,
    };
    this.slots.delete(key);
    this.slots.set(key, slot);
    evictOldest(this.slots, this.maxEntries);
    return slot;
  }

  /** The hold on a client id and token URL, while it is in force. */
  hold(holdKey: string, now: number): Remembered | undefined {
    const until = this.holds.get(holdKey);
    return until !== undefined && until > now ? { code: 'upstream_throttled', until } : undefined;
  }

  setHold(holdKey: string, until: number): void {
    this.holds.delete(holdKey);
    this.holds.set(holdKey, until);
    evictOldest(this.holds, this.maxEntries);
  }

  /** What this instance knows about a key, as a request sees it (a `no-cache` request shares only a fresh fetch). */
  view(slot: Slot, hold: Remembered | undefined, freshness: Freshness, now: number): KeyView {
    const busy = freshness.noCache ? slot.pending?.fresh === true : slot.pending !== undefined;
    return {
      // An expired token is in no phase that answers: the plan passes it by.
      entry: slot.kept,
      failure: slot.failure && slot.failure.until > now ? slot.failure : undefined,
      hold,
      busy,
      refreshing: slot.pending !== undefined || now - slot.refreshTriedAt < REFRESH_RETRY_MS,
    };
  }

  /**
   * Keep what a fetch learnt: a new token replaces the kept one (one that cannot be kept removes it),
   * a failure is remembered (a rejection also removes the kept token), a hold holds the client.
   */
  store(slot: Slot, holdKey: string, outcome: Outcome, refresh: boolean, now: number): void {
    if (outcome.kind === 'token') {
      slot.kept = keepable(outcome.entry.token) ? newest(slot.kept, outcome.entry) : undefined;
      slot.failure = undefined;
    } else if (outcome.cause !== 'deadline') {
      slot.failure = outcome.failure;
      slot.kept = outcome.failure.code === 'unauthorized' ? undefined : newest(slot.kept, outcome.kept);
      if (outcome.failure.code === 'upstream_throttled') this.setHold(holdKey, outcome.failure.until);
    }
    if (refresh && !(slot.kept && phaseOf(slot.kept, now) === 'fresh')) slot.refreshTriedAt = now;
  }
}

function evictOldest(map: Map<string, unknown>, max: number): void {
  while (map.size > max) map.delete(map.keys().next().value as string);
}
