import { ExchangeError } from '../errors';
import type { IdpToken } from '../upstream/exchange';
import type { Entry } from './lifetime';
import { cutShort, type HoldScope, isRemembered, type Remembered, remember } from './rules';
import { type EpochMs, epochMs } from './time';

/**
 * How fetching a key's token ended, for the request that fetched it and every request that shared the
 * fetch: a token (from the IdP, or one the table or memory keeps), or a failure with the newest token
 * that may still stand in for it.
 */
export type Outcome =
  | { readonly kind: 'token'; readonly entry: Entry; readonly from: 'idp' | 'table' | 'memory' }
  | {
      readonly kind: 'failure';
      readonly failure: Remembered;
      readonly kept: Entry | undefined;
      /** The key's latest rejection known; {@link UNKNOWN_REJECTION} when the fetch could not learn it. */
      readonly rejectedAt: EpochMs;
      /** Whom a hold covers: the client (the key was proven by a kept token) or the key alone. */
      readonly scope: HoldScope;
      /** `exchange`: the exchange this fetch ran or waited for; `failure`, `hold`: remembered; `deadline`: it waited in vain. */
      readonly cause: 'exchange' | 'failure' | 'hold' | 'deadline';
    };

export type FailureOutcome = Extract<Outcome, { kind: 'failure' }>;

/**
 * A rejection time after every token: with the shared tier, a fetch that could not read the key's item
 * cannot know whether the IdP rejected the key elsewhere, so no kept token may stand in for a failure.
 */
export const UNKNOWN_REJECTION = epochMs(Number.MAX_SAFE_INTEGER);

/** The IdP exchange of one request, given what is left of its deadline. */
export type Exchange = (timeoutMs: number) => Promise<IdpToken>;

/** What the IdP gave one exchange: a token, or a failure the cache remembers. */
export type ExchangeResult = { readonly token: Entry } | { readonly failure: Remembered };

/** Ask the IdP with `leftMs` of the deadline: its token, or the failure it remembers. Anything else is a bug, and is thrown. */
export async function exchangeResult(exchange: Exchange, leftMs: number, epoch: () => EpochMs): Promise<ExchangeResult> {
  try {
    // With nothing left, the exchange's own deadline ends it at once, as a 504.
    const token = await exchange(Math.max(1, leftMs));
    return { token: { token, receivedAt: epoch() } };
  } catch (error) {
    if (!(error instanceof ExchangeError) || !isRemembered(error)) throw error;
    return { failure: remember(error, epoch()) };
  }
}

/**
 * An exchange's result as the outcome of a fetch that asked the IdP without the table: a rejection voids
 * the kept token; a timeout the cache's waiting cut short (rules.ts, cutShort) is the fetch's deadline.
 */
export function outcomeOf(
  result: ExchangeResult,
  stand: Pick<FailureOutcome, 'kept' | 'rejectedAt' | 'scope'>,
  budget: { readonly budgetMs: number; readonly upstreamTimeoutMs: number },
): Outcome {
  if ('token' in result) return { kind: 'token', entry: result.token, from: 'idp' };
  const kept = result.failure.code === 'unauthorized' ? undefined : stand.kept;
  const cause = cutShort(result.failure, budget.budgetMs, budget.upstreamTimeoutMs) ? 'deadline' : 'exchange';
  return { kind: 'failure', failure: result.failure, ...stand, kept, cause };
}
