// The contract's numbers, each beside the words it comes from (the contract's "Token cache" unless said).
// The judge owes the cache nothing: not one of these is read from lambda/. Times are in ms.

import type { IdpOutcome } from '../record';

/** Lifetime: "A token with a numeric `expires_in` over 30 s is kept". */
export const KEPT_OVER_MS = 30_000;
/** Lifetime: "it goes stale at `expires_in` less the larger of 30 s and 10%". */
export const STALE_MARGIN_MIN_MS = 30_000;
export const STALE_MARGIN_SHARE = 0.1;
/** Refresh ahead: "From the later of (received + `expires_in`/2) and (stale - 30 s) until it goes stale". */
export const REFRESH_FROM_LIFE_SHARE = 1 / 2;
export const REFRESH_LEAD_MS = 30_000;
/**
 * Clocks: "Clocks may differ by up to 5 s ... no `401` is outlived". An instance cannot tell how far apart
 * two clocks are, so a token another clock dated less than this after a 401 may have come before it: the
 * team's reading is that such a token may be denied standing in for a failure.
 */
export const CLOCKS_APART_MS = 5000;
/** Clocks: "no answer carries a token within 5 s of its expiry by the clock of the instance that received it". */
export const EXPIRY_GUARD_MS = 5000;
/** Clocks: "a copy from the table may say up to 5 s less". */
export const COPY_SAYS_LESS_MS = 5000;
/** Lifetime: "lowers `expires_in` ... by the seconds elapsed": whole seconds, so a copy's rounding may cost one more. */
export const ROUNDING_S = 1;
/** Remembered failures: "A rejection (`401`) is remembered for 5 s for that key". */
export const REJECTION_REMEMBERED_MS = 5000;
/** Remembered failures: "any other failure for 1 s". */
export const FAILURE_REMEMBERED_MS = 1000;
/**
 * Remembered failures: "except a `504` cut short by the request's own deadline ..., which is not remembered".
 * The team's reading: an exchange given less than the deadline less a 25th of it was cut short by the cache's own waiting.
 */
export const WHOLE_DEADLINE_SHORTFALL_SHARE = 1 / 25;
/** `cache-control: no-cache`: "it gets no token received more than 5 s before it arrived". */
export const NO_CACHE_MAX_AGE_MS = 5000;
/** `cache-control: no-cache`: "with `shared` every other instance answers with it (or a newer token) within 30 s". */
export const NO_CACHE_REACH_MS = 30_000;
/** A dead holder: "delays the other requests for that key by at most 1 s". */
export const DEAD_HOLDER_DELAY_MS = 1000;
/** Bursts: "its deadline ends more than a fifth of the deadline after theirs". */
export const TAKE_OVER_SHARE = 1 / 5;
/**
 * The judge's reading: an instance knows another's deadline only from what that one last wrote ("whether a holder
 * is alive never compares two clocks"), so the margin is owed, as an obligation, only beyond a twentieth more.
 */
export const TAKE_OVER_RESOLUTION_SHARE = 1 / 20;
/** Bursts: "reach the IdP at most twice across the fleet". */
export const BURST_CALLS_SHARED = 2;
/** Bursts, with `memory` (the team's reading: the same promise per instance, where no race for a table exists): at most once. */
export const BURST_CALLS_MEMORY = 1;
/** The IdP asks to wait: "`Retry-After` is ... held between 1 and 60 s"; Responses: "or 1 when it gave none". */
export const HOLD_MIN_S = 1;
export const HOLD_MAX_S = 60;
export const HOLD_UNSAID_S = 1;
/** The IdP asks to wait: "a kept token (fresh, stale or expired less than one lifetime ago)": proof for two lifetimes. */
export const PROOF_LIFETIMES = 2;
/** The pepper: "After the pepper secret is rotated every instance uses the new one within 60 s". */
export const PEPPER_SWITCH_MS = 60_000;
/**
 * The contract is silent on tokens too large for the table (DynamoDB's items hold 400 KB); the team's
 * choice, in TOKEN-CACHE.md "Large tokens": "A kept token over 300 KB is kept in memory only".
 */
export const SHARED_TOKEN_LIMIT_BYTES = 300_000;
/** Likewise: "An item carries 360 KB of tokens: its kept one ... and those that cannot be kept riding along for waiters". */
export const ITEM_TOKEN_BYTES = 360_000;
/** Likewise: "a token the item cannot carry ... reaches none of its waiters: they ask for their own at once, and for an hour nobody waits on that key's claims". */
export const OVERSIZE_KNOWN_MS = 3_600_000;
/** A unit, not a rule: `expires_in` and `retry-after` count seconds (RFC 6749 5.1; RFC 9110 10.2.3). */
export const SECOND_MS = 1000;

/** Responses: the error table, status to `code`. */
export const ERROR_CODES: ReadonlyMap<number, string> = new Map([
  [401, 'unauthorized'],
  [502, 'upstream_error'],
  [503, 'upstream_throttled'],
  [504, 'upstream_timeout'],
]);

/** Responses: what status the caller gets for what the IdP did (a token is a 200). */
export const STATUS_OF: Readonly<Record<IdpOutcome, number>> = {
  token: 200,
  unauthorized: 401,
  error: 502,
  throttled: 503,
  timeout: 504,
};
