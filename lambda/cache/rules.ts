import { type ExchangeError, MAX_RETRY_AFTER_SECONDS, type UpstreamFailureCode, UpstreamThrottled, upstreamFailure } from '../errors';
import { type Entry, phaseOf, provesUntil } from './lifetime';
import { CLOCK_TOLERANCE_MS, type EpochMs, epochMs } from './time';

/** A failure, or a hold (`upstream_throttled`), that answers for a key until `until`. */
export interface Remembered {
  readonly code: UpstreamFailureCode;
  readonly until: EpochMs;
}

/** What a request asks of the cache besides its key: RFC 9111 `no-cache`, and when it arrived. */
export interface Freshness {
  readonly noCache: boolean;
  readonly arrivedAt: EpochMs;
}

/** What one tier (this instance's memory, or the table) knows about a key at a moment. */
export interface KeyView {
  /** The newest kept token (one that has expired answers nothing). */
  readonly entry: Entry | undefined;
  /** A remembered failure still in force (not a hold). */
  readonly failure: Remembered | undefined;
  /** The longest hold in force on the key, or on a scope that covers it. */
  readonly hold: Remembered | undefined;
  /** An exchange for the key is under way, here or in the fleet. */
  readonly busy: boolean;
  /** Someone is refreshing the kept token, has just tried, or is the one to (lifetime.ts, openToFleet): no refresh from here now. */
  readonly refreshing: boolean;
}

export type Plan =
  | { readonly act: 'answer'; readonly entry: Entry }
  | { readonly act: 'fail'; readonly failure: Remembered; readonly cause: 'failure' | 'hold' }
  | { readonly act: 'wait' }
  | { readonly act: 'exchange'; readonly refresh: boolean };

/** A `no-cache` request takes a token received at most this long before it arrived. */
const NO_CACHE_WINDOW_MS = 5000;

const REMEMBERED_MS: Record<Exclude<UpstreamFailureCode, 'upstream_throttled'>, number> = {
  unauthorized: 5000,
  token_url_not_allowed: 1000,
  upstream_error: 1000,
  upstream_timeout: 1000,
};

/** A fresh failure as it is remembered: a rejection for 5 s, any other failure for 1 s, a hold as long as the IdP asked. */
export function remember(error: ExchangeError & { readonly code: UpstreamFailureCode }, now: EpochMs): Remembered {
  const forMs =
    error instanceof UpstreamThrottled ? error.retryAfterSeconds * 1000 : REMEMBERED_MS[error.code as keyof typeof REMEMBERED_MS];
  return { code: error.code, until: epochMs(now + forMs) };
}

/** Whether an exchange's error is one the cache remembers (a bug is not). */
export function isRemembered(error: ExchangeError): error is ExchangeError & { readonly code: UpstreamFailureCode } {
  return error.code in REMEMBERED_MS || error.code === 'upstream_throttled';
}

export const isHold = (remembered: Remembered): boolean => remembered.code === 'upstream_throttled';

/**
 * How long table work may hold a request up before it asks the IdP anyway: a twenty-fifth of the
 * deadline (200 ms of 5 s), between 20 ms and 1 s. DynamoDB answers in milliseconds in region; an
 * IdP that takes up to 96% of the deadline still answers in time.
 */
export function hedgeFor(upstreamTimeoutMs: number): number {
  return Math.min(1000, Math.max(20, Math.floor(upstreamTimeoutMs / 25)));
}

/**
 * Whether a timeout is the cache's own doing rather than the IdP's: the exchange had less than the
 * whole deadline but the hedge (the cache waited first). Such a timeout is never remembered: a
 * request with time left asks again, and nothing else learns from it.
 */
export function cutShort(failure: Remembered, budgetMs: number, upstreamTimeoutMs: number): boolean {
  return failure.code === 'upstream_timeout' && budgetMs < upstreamTimeoutMs - hedgeFor(upstreamTimeoutMs);
}

/** Whether a remembered failure or hold is still in force. */
export function inForce(remembered: Remembered | undefined, now: EpochMs): remembered is Remembered {
  return remembered !== undefined && remembered.until > now;
}

/**
 * A failure or hold another instance wrote, as this one honours it, or undefined when it is over or
 * dated further ahead than any honest instance would remember it (someone else's writing). A hold
 * counts `CLOCK_TOLERANCE_MS` longer, so that a writer whose clock is behind never makes a hold
 * shorter than the IdP asked; a failure does not, so that it is never remembered much past its time.
 */
export function fromFleet(remembered: Remembered | undefined, now: EpochMs): Remembered | undefined {
  if (!remembered) return undefined;
  const hold = isHold(remembered);
  const longest = hold ? MAX_RETRY_AFTER_SECONDS * 1000 : REMEMBERED_MS[remembered.code as keyof typeof REMEMBERED_MS];
  if (remembered.until > now + longest + CLOCK_TOLERANCE_MS) return undefined;
  const honoured = hold ? { ...remembered, until: epochMs(remembered.until + CLOCK_TOLERANCE_MS) } : remembered;
  return inForce(honoured, now) ? honoured : undefined;
}

/** The hold that ends last: a hold is never shortened by a later, shorter one. */
export function longer(a: Remembered | undefined, b: Remembered | undefined): Remembered | undefined {
  if (!a || !b) return a ?? b;
  return b.until > a.until ? b : a;
}

/**
 * What to do for a request, from what a tier knows. One decision for both tiers, so memory and the
 * table never disagree on the order: a fresh token first, then a refresh ahead by one request, then a
 * hold, a remembered failure, an exchange under way, and only then the IdP.
 */
export function decide(view: KeyView, freshness: Freshness, now: EpochMs): Plan {
  const { entry, failure, hold, busy } = view;
  if (freshness.noCache) {
    if (entry && answersNoCache(entry, freshness)) return { act: 'answer', entry };
    if (hold) return { act: 'fail', failure: hold, cause: 'hold' };
    return busy ? { act: 'wait' } : { act: 'exchange', refresh: false };
  }
  const phase = entry && phaseOf(entry, now);
  if (entry && phase === 'fresh') return { act: 'answer', entry };
  if (entry && phase === 'refresh') {
    return hold || failure || view.refreshing ? { act: 'answer', entry } : { act: 'exchange', refresh: true };
  }
  if (hold) return { act: 'fail', failure: hold, cause: 'hold' };
  if (failure) return { act: 'fail', failure, cause: 'failure' };
  return busy ? { act: 'wait' } : { act: 'exchange', refresh: false };
}

/** Whether a token is new enough for a `no-cache` request: received at most 5 s before it arrived. */
export function answersNoCache(entry: Entry, freshness: Freshness): boolean {
  return entry.receivedAt >= freshness.arrivedAt - NO_CACHE_WINDOW_MS;
}

/**
 * Whether a kept token may stand in for an IdP failure, given the key's last rejection (`rejectedAt`,
 * 0 for none): never a token received before it. A rejection written by another instance is judged
 * with the clocks' tolerance, on the side of never serving such a token.
 */
export function outlivesRejection(entry: Entry, rejectedAt: EpochMs): boolean {
  return rejectedAt === 0 || entry.receivedAt > rejectedAt + CLOCK_TOLERANCE_MS;
}

/** Whether a kept token still proves that its key's secret is the client's own (lifetime.ts, provesUntil). */
export function proves(entry: Entry | undefined, rejectedAt: EpochMs, now: EpochMs): boolean {
  return entry !== undefined && outlivesRejection(entry, rejectedAt) && now < provesUntil(entry);
}

/** Whom a hold earned by a key covers: every key of its client id at that token URL (or its stored credential), or that key alone. */
export type HoldScope = 'client' | 'key';

/**
 * Whom a hold a request earns covers: its client when its key is proven by a kept token, or vouched for
 * (a stored credential: the broker holds the secret); else its key alone, so a wrong secret locks out nobody else.
 */
export function holdScope(vouched: boolean, kept: Entry | undefined, rejectedAt: EpochMs, now: EpochMs): HoldScope {
  return vouched || proves(kept, rejectedAt, now) ? 'client' : 'key';
}

/** What the cache answers in place of a failure: a kept token (`hit` or `stale`), or the failure's error. */
export type FailureAnswer =
  { readonly served: 'hit' | 'stale'; readonly entry: Entry } | { readonly served: 'error'; readonly error: ExchangeError };

// RFC 5861 stale-if-error: only when the IdP gave no token, never after it refused the client.
const SERVED_STALE: readonly UpstreamFailureCode[] = ['upstream_error', 'upstream_throttled', 'upstream_timeout'];

/**
 * The answer to a request whose exchange failed, or whose key has a failure or a hold in force: a
 * kept token not yet stale is a hit as usual; a stale one answers a 502, 503 or 504 until it expires,
 * unless the IdP rejected the key since it was received; a `no-cache` request gets the error.
 */
export function answerFailure(
  failure: Remembered,
  kept: Entry | undefined,
  rejectedAt: EpochMs,
  freshness: Freshness,
  now: EpochMs,
): FailureAnswer {
  if (kept && !freshness.noCache) {
    const phase = phaseOf(kept, now);
    if (phase === 'fresh' || phase === 'refresh') return { served: 'hit', entry: kept };
    if (phase === 'stale' && SERVED_STALE.includes(failure.code) && outlivesRejection(kept, rejectedAt)) {
      return { served: 'stale', entry: kept };
    }
  }
  return { served: 'error', error: upstreamFailure(failure.code, Math.ceil((failure.until - now) / 1000)) };
}
