import type { Clock } from '../../clock';
import { ExchangeError } from '../../errors';
import type { IdpToken } from '../../upstream/exchange';
import type { ExchangeResult } from '../core/outcome';
import { isRemembered, remember } from '../core/rules';

/** The IdP exchange of one request, bounded by the request's own deadline. */
export type Exchange = () => Promise<IdpToken>;

/** Ask the IdP: its token, or the failure the cache remembers; anything else is a bug, and is thrown. */
export async function exchangeResult(exchange: Exchange, clock: Clock): Promise<ExchangeResult> {
  try {
    const token = await exchange();
    return { token: { token, receivedAt: clock.epoch(), copy: false } };
  } catch (error) {
    if (!(error instanceof ExchangeError) || !isRemembered(error)) throw error;
    return { failure: remember(error, clock.epoch()) };
  }
}
