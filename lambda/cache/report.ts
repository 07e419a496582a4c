/** Which tier answered a request: this instance's memory, the table every instance shares, the IdP (`miss`), or a stale kept token. */
export type CacheTier = 'memory' | 'shared' | 'miss' | 'stale';

/** What the cache did for one request, for its log line and metrics: never a key, a value or a message. */
export interface CacheReport {
  tier?: CacheTier;
  /** A remembered failure or a hold answered instead of the IdP (with its error, or with a kept token). */
  remembered?: 'failure' | 'hold';
  /** This request refreshed a kept token ahead of its going stale. */
  refresh?: 'ahead';
  /** Milliseconds spent in table calls, waits between reads excluded. */
  tableLatencyMs?: number;
  /** The failed table (or pepper) call's error name: the request went on without the table. */
  tableError?: string;
}
