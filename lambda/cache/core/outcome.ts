import type { EpochMs } from '../../clock';
import type { Entry } from './lifetime';
import type { HoldScope, Rejection, Remembered } from './rules';

/**
 * How fetching a key's token ended, for the request that fetched it and every request that shared the
 * fetch: a token (from the IdP, or one the table or memory keeps), or a failure with the newest token
 * that may still stand in for it.
 */
export type Outcome =
  | {
      readonly kind: 'token';
      readonly entry: Entry;
      readonly from: 'idp' | 'table' | 'memory';
      /**
       * The latest moment, on this instance's clock, the exchange that brought the token was known not to
       * have been published: a request that arrived by then waited for it, so even a token that cannot be
       * kept is its answer. Its receipt, unless the fetch saw the exchange under way later than that.
       */
      readonly runningAt: EpochMs;
    }
  | {
      readonly kind: 'failure';
      readonly failure: Remembered;
      readonly kept: Entry | undefined;
      /** The key's latest rejection known; `unknown` when the fetch could not read the key's item (no kept token may then stand in). */
      readonly rejection: Rejection | 'unknown';
      /** Whom a hold covers: the client (the key was proven by a kept token) or the key alone. */
      readonly scope: HoldScope;
      /** `exchange`: the exchange this fetch ran or waited for; `failure`, `hold`: remembered; `deadline`: the request's own deadline cut it short. */
      readonly cause: 'exchange' | 'failure' | 'hold' | 'deadline';
      /** When it was met: a request whose own exchange met a 429 tells the IdP's `retry-after` as of then, the others the seconds left. */
      readonly metAt: EpochMs;
    };

export type FailureOutcome = Extract<Outcome, { kind: 'failure' }>;

/** What the IdP gave one exchange: a token, or a failure the cache remembers. */
export type ExchangeResult = { readonly token: Entry } | { readonly failure: Remembered };

/** A token outcome, known to have been running until its receipt. */
export function tokenOutcome(entry: Entry, from: 'idp' | 'table' | 'memory'): Outcome {
  return { kind: 'token', entry, from, runningAt: entry.receivedAt };
}
