import { type Clock, type Deadline, type EpochMs, epochMs } from '../../clock';
import { ExchangeError } from '../../errors';
import type { IdpToken } from '../../upstream/exchange';
import type { ExchangeResult } from '../core/outcome';
import { isRemembered, remember } from '../core/rules';
import { ownEntry } from '../core/lifetime';

/** The IdP exchange of one request, bounded by the request's own deadline. */
export type Exchange = () => Promise<IdpToken>;

/**
 * Ask the IdP as instance `instance`: its token, dated after the key's latest rejection this instance knows as
 * it arrives (`rejectedAt`: received once that was known, it was received after it), or the failure the cache
 * remembers; anything else is a bug, and is thrown. A timeout is dated at the deadline that ended it, however
 * late its news is handled (an instance frozen between invocations handles it when it thaws).
 */
export async function exchangeResult(
  exchange: Exchange,
  clock: Clock,
  instance: string,
  deadline: Deadline,
  rejectedAt: () => EpochMs,
): Promise<ExchangeResult> {
  try {
    const token = await exchange();
    return { token: ownEntry(token, clock.epoch(), instance, rejectedAt()) };
  } catch (error) {
    if (!(error instanceof ExchangeError) || !isRemembered(error)) throw error;
    // Handled after the deadline (a Lambda frozen meanwhile), it came by the deadline at the latest: dated no later.
    const late = Math.max(0, clock.mono() - deadline.at);
    return { failure: remember(error, epochMs(clock.epoch() - late)) };
  }
}
