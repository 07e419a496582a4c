import { keepable, newest, openToFleet } from './lifetime';
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
  /** Who asked the IdP for the kept token: this instance, or another that put it in the table. */
  keptFrom: 'idp' | 'table';
  failure: Remembered | undefined;
  pending: Pending | undefined;
  /** When a refresh ahead last ended (epoch ms): the next may start a second later. */
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
      keptFrom: 'idp',
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

  /**
   * What this instance knows about a key, as a request sees it (a `no-cache` request shares only a
   * fresh fetch). A token another instance asked for is that instance's to refresh, early on.
   */
  view(slot: Slot, hold: Remembered | undefined, freshness: Freshness, now: number): KeyView {
    const busy = freshness.noCache ? slot.pending?.fresh === true : slot.pending !== undefined;
    const othersToRefresh = slot.kept !== undefined && slot.keptFrom === 'table' && !openToFleet(slot.kept, now);
    return {
      // An expired token is in no phase that answers: the plan passes it by.
      entry: slot.kept,
      failure: slot.failure && slot.failure.until > now ? slot.failure : undefined,
      hold,
      busy,
      refreshing: slot.pending !== undefined || now - slot.refreshTriedAt < REFRESH_RETRY_MS || othersToRefresh,
    };
  }

  /**
   * Keep what a fetch learnt: a new token replaces the kept one (one that cannot be kept removes it),
   * a failure is remembered (a rejection also removes the kept token), a hold holds the client.
   */
  store(slot: Slot, holdKey: string, outcome: Outcome, refresh: boolean, now: number): void {
    if (outcome.kind === 'token') {
      // `memory` is this instance's own kept token coming back, which keep() leaves as it is.
      if (keepable(outcome.entry.token)) keep(slot, outcome.entry, outcome.from === 'idp' ? 'idp' : 'table');
      else slot.kept = undefined;
      slot.failure = undefined;
    } else if (outcome.cause !== 'deadline') {
      slot.failure = outcome.failure;
      if (outcome.failure.code === 'unauthorized') slot.kept = undefined;
      else keep(slot, outcome.kept, 'table');
      if (outcome.failure.code === 'upstream_throttled') this.setHold(holdKey, outcome.failure.until);
    }
    // A refresh that brought a new token leaves nothing to refresh for far longer than the second.
    if (refresh) slot.refreshTriedAt = now;
  }
}

/** Keep a token if it is newer than the kept one, noting who asked the IdP for it. */
function keep(slot: Slot, entry: Entry | undefined, from: Slot['keptFrom']): void {
  const kept = newest(slot.kept, entry);
  if (kept === slot.kept) return;
  slot.kept = kept;
  slot.keptFrom = from;
}

function evictOldest(map: Map<string, unknown>, max: number): void {
  while (map.size > max) map.delete(map.keys().next().value as string);
}
