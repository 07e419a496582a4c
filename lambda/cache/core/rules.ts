import { type EpochMs, epochMs } from '../../clock';
import { type ExchangeError, MAX_RETRY_AFTER_SECONDS, type UpstreamFailureCode, UpstreamThrottled, upstreamFailure } from '../../errors';
import { CLOCK_TOLERANCE_MS, type Entry, phaseOf, provesUntil, served } from './lifetime';

/** A failure, or a hold (`upstream_throttled`), that answers for a key until `until`. */
export interface Remembered {
  readonly code: UpstreamFailureCode;
  readonly until: EpochMs;
}

/**
 * When the IdP last rejected a key (0: never known), and whether this instance dated it: a token
 * and a rejection this instance dated both are compared exactly; any other pair with the clocks'
 * tolerance, on the side of the rejection, so that no 401 is ever outlived.
 */
export interface Rejection {
  readonly at: EpochMs;
  readonly own: boolean;
}

export const NO_REJECTION: Rejection = { at: epochMs(0), own: false };

/** What a request asks of the cache besides its key: RFC 9111 `no-cache`, and when it arrived. */
export interface Freshness {
  readonly noCache: boolean;
  readonly arrivedAt: EpochMs;
}

/** What one tier (this instance's memory, or the table with it) knows about a key at a moment. */
export interface KeyView {
  /** The newest kept token that may still answer. */
  readonly entry: Entry | undefined;
  /** A remembered failure still in force (not a hold). */
  readonly failure: Remembered | undefined;
  /** The longest hold in force on the key, or on a scope that covers it. */
  readonly hold: Remembered | undefined;
  /** An exchange for the key is under way elsewhere, which this request shares. */
  readonly busy: boolean;
  /** Someone is refreshing the kept token, has just tried, or is the one to: no refresh from here now. */
  readonly refreshing: boolean;
}

export type Plan =
  | { readonly act: 'answer'; readonly entry: Entry }
  | { readonly act: 'fail'; readonly failure: Remembered; readonly cause: 'failure' | 'hold' }
  | { readonly act: 'wait' }
  | { readonly act: 'exchange'; readonly refresh: boolean };

/** The contract: a `no-cache` request takes a token received at most 5 s before it arrived. */
const NO_CACHE_WINDOW_MS = 5000;

/** The contract: a rejection is remembered 5 s, any other failure 1 s, a hold as long as the IdP asked. */
const REMEMBERED_MS: Record<Exclude<UpstreamFailureCode, 'upstream_throttled'>, number> = {
  unauthorized: 5000,
  token_url_not_allowed: 1000,
  upstream_error: 1000,
  upstream_timeout: 1000,
};

/** A fresh failure as it is remembered from `now`. */
export function remember(error: ExchangeError & { readonly code: UpstreamFailureCode }, now: EpochMs): Remembered {
  const forMs =
    error instanceof UpstreamThrottled ? error.retryAfterSeconds * 1000 : REMEMBERED_MS[error.code as keyof typeof REMEMBERED_MS];
  return { code: error.code, until: epochMs(now + forMs) };
}

/** A rejection as remembered: its 5 s from when it happened, by the clock that dated it. */
export function rejectionRemembered(rejection: Rejection): Remembered {
  return { code: 'unauthorized', until: epochMs(rejection.at + REMEMBERED_MS.unauthorized) };
}

/** Whether an exchange's error is one the cache remembers (a bug is not). */
export function isRemembered(error: ExchangeError): error is ExchangeError & { readonly code: UpstreamFailureCode } {
  return error.code in REMEMBERED_MS || error.code === 'upstream_throttled';
}

export const isHold = (remembered: Remembered): boolean => remembered.code === 'upstream_throttled';

/**
 * Whether a timeout is the cache's own doing rather than the IdP's: the exchange had less than the
 * whole deadline but a twenty-fifth (it waited on the table first). Such a timeout is never
 * remembered: a request with time left asks again, and nothing else learns from it.
 */
export function cutShort(failure: Remembered, budgetMs: number, upstreamTimeoutMs: number): boolean {
  return failure.code === 'upstream_timeout' && budgetMs < upstreamTimeoutMs - upstreamTimeoutMs / 25;
}

/**
 * Whether a request outlasts a remembered timeout (Bursts): the exchange timed out after the request came, and
 * more than the take-over margin of the request's deadline is left: its own exchange could still answer in time.
 */
export function outlastsTimeout(failure: Remembered, arrivedAt: EpochMs, leftMs: number, marginMs: number): boolean {
  return failure.code === 'upstream_timeout' && happenedAt(failure) > arrivedAt && leftMs > marginMs;
}

/** When a remembered failure (not a hold) happened, by its writer's clock. */
export function happenedAt(failure: Remembered): EpochMs {
  return epochMs(failure.until - (REMEMBERED_MS[failure.code as keyof typeof REMEMBERED_MS] ?? 0));
}

/** Whether a remembered failure or hold is still in force. */
export function inForce(remembered: Remembered | undefined, now: EpochMs): remembered is Remembered {
  return remembered !== undefined && remembered.until > now;
}

/**
 * A failure or hold another instance wrote, in force at `now` as dated (with clocks in step it ends
 * when it does on its writer), or undefined when it is over or dated further ahead than any honest
 * instance remembers one (someone else's writing).
 */
export function fromFleet(remembered: Remembered | undefined, now: EpochMs): Remembered | undefined {
  if (!inForce(remembered, now)) return undefined;
  const longest = isHold(remembered) ? MAX_RETRY_AFTER_SECONDS * 1000 : REMEMBERED_MS[remembered.code as keyof typeof REMEMBERED_MS];
  return remembered.until <= now + longest + CLOCK_TOLERANCE_MS ? remembered : undefined;
}

/** The one that ends last: a hold is never shortened by a later, shorter one. */
export function longer(a: Remembered | undefined, b: Remembered | undefined): Remembered | undefined {
  if (!a || !b) return a ?? b;
  return b.until > a.until ? b : a;
}

/**
 * What to do for a request, from what a tier knows. One decision for memory and the table, so they
 * never disagree on the order: a fresh token first, then a refresh ahead by one request, then a
 * hold, a remembered failure, an exchange under way, and only then the IdP.
 */
export function decide(view: KeyView, freshness: Freshness, now: EpochMs): Plan {
  const { entry, failure, hold, busy } = view;
  const usable = entry && served(entry, now) ? entry : undefined;
  if (freshness.noCache) {
    if (usable && answersNoCache(usable, freshness)) return { act: 'answer', entry: usable };
    if (hold) return { act: 'fail', failure: hold, cause: 'hold' };
    return busy ? { act: 'wait' } : { act: 'exchange', refresh: false };
  }
  const phase = usable && phaseOf(usable, now);
  if (usable && phase === 'fresh') return { act: 'answer', entry: usable };
  if (usable && phase === 'refresh') {
    return hold || failure || view.refreshing ? { act: 'answer', entry: usable } : { act: 'exchange', refresh: true };
  }
  if (hold) return { act: 'fail', failure: hold, cause: 'hold' };
  if (failure) return { act: 'fail', failure, cause: 'failure' };
  return busy ? { act: 'wait' } : { act: 'exchange', refresh: false };
}

/** Whether a token is new enough for a `no-cache` request: received at most 5 s before it arrived. */
export function answersNoCache(entry: Entry, freshness: Freshness): boolean {
  return entry.receivedAt >= freshness.arrivedAt - NO_CACHE_WINDOW_MS;
}

/** Whether a kept token was received after the key's last rejection, as both were dated: only such a token is kept, answers and proves the key. */
export function receivedSince(entry: Entry, rejection: Rejection): boolean {
  return entry.receivedAt > rejection.at;
}

/**
 * Whether a kept token may stand in for a failure after the key's last rejection: asked for after it
 * was known, or received after it and, unless this instance dated both, by more than the clocks'
 * tolerance, so that no 401 is ever outlived by a token another clock dated a little late.
 */
export function outlivesRejection(entry: Entry, rejection: Rejection): boolean {
  if (entry.after >= rejection.at) return true;
  return entry.receivedAt > rejection.at + (!entry.copy && rejection.own ? 0 : CLOCK_TOLERANCE_MS);
}

/** The later of two rejections. */
export function laterRejection(a: Rejection, b: Rejection): Rejection {
  return b.at > a.at ? b : a;
}

/** Whether a kept token still proves that its key's secret is the client's own. */
export function proves(entry: Entry | undefined, rejection: Rejection, now: EpochMs): entry is Entry {
  return entry !== undefined && receivedSince(entry, rejection) && now < provesUntil(entry);
}

/** Whom a hold earned by a key covers: every key of its client id at that token URL, or that key alone. */
export type HoldScope = 'client' | 'key';

/**
 * Whom a hold a request earns covers: its client when its key is proven by a kept token, or vouched
 * for (a stored credential: the broker holds the secret, and its hold covers the credential); else
 * its key alone, so a wrong secret locks out nobody else.
 */
export function holdScope(vouched: boolean, kept: Entry | undefined, rejection: Rejection, now: EpochMs): HoldScope {
  return vouched || proves(kept, rejection, now) ? 'client' : 'key';
}

/** What the cache answers in place of a failure: a kept token (`hit` or `stale`), or the failure's error. */
export type FailureAnswer =
  { readonly served: 'hit' | 'stale'; readonly entry: Entry } | { readonly served: 'error'; readonly error: ExchangeError };

// RFC 5861 stale-if-error: only when the IdP gave no token, never after it refused the client.
const SERVED_STALE: readonly UpstreamFailureCode[] = ['upstream_error', 'upstream_throttled', 'upstream_timeout'];

/**
 * The answer to a request whose exchange failed, or whose key has a failure or a hold in force: a
 * kept token not yet stale is a hit as usual; a stale one answers a 502, 503 or 504 while it may be
 * served, unless the IdP rejected the key since it was received; a `no-cache` request gets the error.
 */
export function answerFailure(
  failure: Remembered,
  kept: Entry | undefined,
  rejection: Rejection,
  freshness: Freshness,
  now: EpochMs,
  metAt: EpochMs,
): FailureAnswer {
  if (kept && !freshness.noCache && served(kept, now)) {
    const phase = phaseOf(kept, now);
    if (phase === 'fresh' || phase === 'refresh') return { served: 'hit', entry: kept };
    if (SERVED_STALE.includes(failure.code) && outlivesRejection(kept, rejection)) return { served: 'stale', entry: kept };
  }
  // A 429 this request met itself tells the IdP's seconds; one it was told of, the seconds left.
  return { served: 'error', error: upstreamFailure(failure.code, Math.ceil((failure.until - Math.min(now, metAt)) / 1000)) };
}
