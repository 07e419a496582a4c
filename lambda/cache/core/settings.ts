/**
 * The token cache's tunables for one deployment, in one place, derived from its deadline. The
 * contract's own numbers (the 5 s and 1 s a failure is remembered, the 30 s and 10% of a token's
 * margin, the 5 s of clocks...) live with the rules that apply them; these are the cache's choices.
 */
export interface CacheSettings {
  /** UPSTREAM_TIMEOUT_MS: everything a request does ends within it. */
  readonly upstreamTimeoutMs: number;
  /** The longest one table call may take (a fifth of the deadline, at most 1 s). */
  readonly callLimitMs: number;
  /**
   * How long a request waits on the table before it asks the IdP anyway: at least a twenty-fifth
   * of the deadline, more where the table has been slower and the IdP leaves room, at most half.
   */
  readonly hedge: { readonly minMs: number; readonly maxMs: number };
  /** How often a holder renews its claim while its exchange runs. */
  readonly renewEveryMs: number;
  /** How long a claim may go unrenewed, on a waiter's own clock, before the waiter takes over. */
  readonly silenceMs: number;
  /** How long a waiter watches a claim before it asks the holder to echo it back (a replayed claim cannot). */
  readonly echoAfterMs: number;
  /** A waiter reads the item every twentieth of what is left of its deadline, within these bounds. */
  readonly poll: { readonly minMs: number; readonly maxMs: number };
  /** How much later a waiter's deadline must end than a holder's before it asks the IdP itself (the contract's fifth of the deadline, at most 1 s). */
  readonly dominanceMs: number;
  /** Conditional writes of one kind a visit may have refused before it goes on without the table. */
  readonly maxRefusals: number;
  /** Rewrites of one renewal or publication over an item someone else changed. */
  readonly maxRewrites: number;
  /** A refresh ahead that failed may be tried again this much later. */
  readonly refreshRetryMs: number;
  /** Keys each instance keeps in memory (those that keep a token and those that do not, apart). */
  readonly memoryEntries: number;
  /** A token larger than this is kept in memory only: a table item holds 400 KB, and one token must fit with the rest. */
  readonly maxSharedTokenBytes: number;
  /** The room in an item for tokens, its kept one and those that cannot be kept but go to a holder's waiters together. */
  readonly itemTokenBytes: number;
  /** How long a key whose token was too large to share is taken to stay so: nobody waits on its claims meanwhile. */
  readonly oversizeKnownMs: number;
  /** How long a rejection stays in the table at least, for tokens some instance keeps that the table never saw. */
  readonly rejectionFloorMs: number;
  /** How much of an item's history its writes carry: takeovers named, outcomes for waiters, revisions in a condition, echoes. */
  readonly kept: { readonly lineage: number; readonly ended: number; readonly revs: number; readonly echoes: number };
  /** The pepper is read again after `refreshAfterMs`, and not used past `maxAgeMs` without a new read. */
  readonly pepper: {
    readonly refreshAfterMs: number;
    readonly maxAgeMs: number;
    readonly retryAfterMs: number;
    readonly loadLimitMs: number;
  };
}

/** The settings for a deadline of `upstreamTimeoutMs`. */
export function cacheSettings(upstreamTimeoutMs: number): CacheSettings {
  const fifth = Math.max(1, Math.min(1000, Math.floor(upstreamTimeoutMs / 5)));
  const minHedge = Math.min(1000, Math.max(20, Math.floor(upstreamTimeoutMs / 25)));
  return {
    upstreamTimeoutMs,
    callLimitMs: fifth,
    hedge: { minMs: minHedge, maxMs: Math.max(minHedge, Math.floor(upstreamTimeoutMs / 2)) },
    renewEveryMs: 250,
    silenceMs: 750,
    echoAfterMs: 250,
    poll: { minMs: 20, maxMs: 100 },
    dominanceMs: Math.min(1000, upstreamTimeoutMs / 5),
    maxRefusals: 3,
    maxRewrites: 2,
    refreshRetryMs: 1000,
    memoryEntries: 1000,
    maxSharedTokenBytes: 300_000,
    itemTokenBytes: 360_000,
    oversizeKnownMs: 3600_000,
    rejectionFloorMs: 24 * 3600_000,
    kept: { lineage: 8, ended: 4, revs: 8, echoes: 32 },
    // The contract: a rotated pepper is in use everywhere within 60 s.
    pepper: { refreshAfterMs: 30_000, maxAgeMs: 60_000, retryAfterMs: 1000, loadLimitMs: 2000 },
  };
}

/** How long a visit waits on the table before it asks the IdP anyway: at first, and at most once the table answers. */
export interface Hedge {
  readonly ms: number;
  readonly capMs: number;
}

/**
 * This visit's hedge: long enough for the table's recent calls (a read and a write, each as slow as
 * the slowest lately), capped where the IdP's recent answers leave room in the deadline, never past
 * half of it; the minimum while the table has not answered lately or the IdP leaves no room.
 */
export function hedgeFor(settings: CacheSettings, tableMs: number | undefined, idpMs: number | undefined): Hedge {
  const { minMs, maxMs } = settings.hedge;
  if (tableMs === undefined || idpMs === undefined) return { ms: minMs, capMs: minMs };
  const room = settings.upstreamTimeoutMs - idpMs * 1.25;
  const capMs = Math.floor(Math.min(maxMs, Math.max(minMs, room)));
  return { ms: Math.floor(Math.min(capMs, Math.max(minMs, 2.5 * tableMs))), capMs };
}

/** How long a waiter with `leftMs` of its deadline sleeps before it reads again. */
export function pollPauseMs(settings: CacheSettings, leftMs: number): number {
  return Math.min(leftMs, Math.min(settings.poll.maxMs, Math.max(settings.poll.minMs, leftMs / 20)));
}

/** How a pepper read at `loadedAt` stands at `now`: in use, in use while it is read again, or no longer to be used (a clock set back counts as old). */
export function pepperFreshness(loadedAt: number, now: number, pepper: CacheSettings['pepper']): 'fresh' | 'refresh' | 'stale' {
  const age = now - loadedAt;
  if (age < 0 || age >= pepper.maxAgeMs) return 'stale';
  return age >= pepper.refreshAfterMs ? 'refresh' : 'fresh';
}
