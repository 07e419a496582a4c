import type { IdpToken } from '../upstream/exchange';
import { CLOCK_TOLERANCE_MS, type EpochMs, epochMs } from './time';

/**
 * A token the cache keeps: the IdP's answer as received, and when it arrived. One another instance
 * received (`fleet`) was dated by that instance's clock, so its phases are judged as if it were older
 * by the clocks' tolerance: it is never served past its life because of a clock that ran ahead.
 */
export interface Entry {
  readonly token: IdpToken;
  readonly receivedAt: EpochMs;
  readonly fleet?: true;
}

/** Where a kept token is in its life, which decides how a request for it is answered. */
export type Phase = 'fresh' | 'refresh' | 'stale' | 'expired';

const MIN_MARGIN_MS = 30_000;
const MARGIN_FRACTION = 0.1;
const REFRESH_LEAD_MS = 30_000;

/** The token's `expires_in` in milliseconds, or NaN when it has none usable (RFC 6749 5.1: seconds). */
function lifetimeMs(token: IdpToken): number {
  // Some IdPs send expires_in as a numeric string.
  const value = token.expires_in;
  const seconds = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
  return typeof seconds === 'number' && Number.isFinite(seconds) ? seconds * 1000 : Number.NaN;
}

/** The margin before expiry in which a token is no longer handed out as fresh: the larger of 30 s and 10%. */
function marginMs(lifetime: number): number {
  return Math.max(MIN_MARGIN_MS, lifetime * MARGIN_FRACTION);
}

/** Whether a token may be kept at all: a numeric `expires_in` longer than its margin. */
export function keepable(token: IdpToken): boolean {
  const lifetime = lifetimeMs(token);
  return lifetime > marginMs(lifetime);
}

/**
 * The phase of a kept token at `now`. Stale at `expires_in` less the margin; refreshed ahead from the
 * later of half its life and 30 s before it goes stale; expired at `expires_in`.
 */
export function phaseOf(entry: Entry, now: EpochMs): Phase {
  const lifetime = lifetimeMs(entry.token);
  const age = ageOf(entry, now);
  if (!(age < lifetime)) return 'expired';
  const { opens, staleAfter } = refreshWindow(lifetime);
  if (age >= staleAfter) return 'stale';
  return age >= opens ? 'refresh' : 'fresh';
}

/** The ages (ms) at which a token of `lifetime` ms is due for refresh and goes stale. */
function refreshWindow(lifetime: number): { opens: number; staleAfter: number } {
  const staleAfter = lifetime - marginMs(lifetime);
  return { opens: Math.max(lifetime / 2, staleAfter - REFRESH_LEAD_MS), staleAfter };
}

/**
 * Whether an instance that got the kept token from the table (another instance asked the IdP) may
 * refresh it at `now`: from the middle of its refresh window, in case the instance that asked has gone.
 * Before that, the fleet leaves the refresh to that instance and does not race for the table.
 */
export function openToFleet(entry: Entry, now: EpochMs): boolean {
  const { opens, staleAfter } = refreshWindow(lifetimeMs(entry.token));
  return ageOf(entry, now) >= (opens + staleAfter) / 2;
}

function ageOf(entry: Entry, now: EpochMs): number {
  return now - entry.receivedAt + (entry.fleet ? CLOCK_TOLERANCE_MS : 0);
}

/** When a kept token expires. */
export function expiresAt(entry: Entry): EpochMs {
  return epochMs(entry.receivedAt + lifetimeMs(entry.token));
}

/**
 * Until when a kept token proves its key (the secret got a token, so it is the client's own): while
 * it lives and for one lifetime after it expired. A hold earned by a proven key holds the whole client.
 */
export function provesUntil(entry: Entry): EpochMs {
  return epochMs(entry.receivedAt + 2 * lifetimeMs(entry.token));
}

/**
 * The kept token as a caller receives it: `expires_in` and `ext_expires_in` (Entra ID) lowered by the
 * whole seconds elapsed since the IdP answered, each in the type the IdP used.
 */
export function answerFrom(entry: Entry, now: EpochMs): IdpToken {
  const elapsed = Math.ceil(Math.max(0, now - entry.receivedAt) / 1000);
  const token = { ...entry.token, expires_in: lowered(entry.token.expires_in, elapsed) };
  if ('ext_expires_in' in token) token.ext_expires_in = lowered(token.ext_expires_in, elapsed);
  return token;
}

function lowered(value: unknown, seconds: number): unknown {
  if (typeof value === 'number' && Number.isFinite(value)) return Math.max(0, value - seconds);
  if (typeof value === 'string' && /^\d+$/.test(value)) return String(Math.max(0, Number(value) - seconds));
  return value;
}

/** The entry received last; either may be missing. */
export function newest(a: Entry | undefined, b: Entry | undefined): Entry | undefined {
  if (!a || !b) return a ?? b;
  return b.receivedAt > a.receivedAt ? b : a;
}
