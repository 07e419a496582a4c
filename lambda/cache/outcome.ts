import { ExchangeError } from '../errors';
import type { IdpToken } from '../upstream/exchange';
import type { Entry } from './lifetime';
import { isRemembered, type Remembered, remember } from './plan';

/**
 * How fetching a key's token ended, for the request that fetched it and every request that shared the
 * fetch: a token (from the IdP, or one the table keeps), or a failure with the newest token still kept.
 */
export type Outcome =
  | { readonly kind: 'token'; readonly entry: Entry; readonly from: 'idp' | 'table' | 'memory' }
  | {
      readonly kind: 'failure';
      readonly failure: Remembered;
      readonly kept: Entry | undefined;
      /** `exchange`: the exchange this fetch ran or waited for; `failure`, `hold`: remembered; `deadline`: it waited in vain. */
      readonly cause: 'exchange' | 'failure' | 'hold' | 'deadline';
    };

/** The IdP exchange of one request, given what is left of its deadline. */
export type Exchange = (timeoutMs: number) => Promise<IdpToken>;

/** The milliseconds left before a `performance.now()` deadline, never less than 0. */
export function remaining(deadline: number): number {
  return Math.max(0, Math.floor(deadline - performance.now()));
}

/**
 * Ask the IdP with what is left of the deadline. Its failures become an outcome to share and remember;
 * anything else is a bug and is thrown, never remembered.
 */
export async function exchangeOutcome(exchange: Exchange, deadline: number, kept: Entry | undefined, now: () => number): Promise<Outcome> {
  try {
    // With nothing left, the exchange's own deadline ends it at once, as a 504.
    const token = await exchange(Math.max(1, remaining(deadline)));
    return { kind: 'token', entry: { token, receivedAt: now() }, from: 'idp' };
  } catch (error) {
    if (!(error instanceof ExchangeError) || !isRemembered(error)) throw error;
    // A rejection means the kept token's key is no longer good: it is never served again.
    const stillKept = error.code === 'unauthorized' ? undefined : kept;
    return { kind: 'failure', failure: remember(error, now()), kept: stillKept, cause: 'exchange' };
  }
}
