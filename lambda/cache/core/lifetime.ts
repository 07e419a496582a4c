import { type EpochMs, epochMs } from '../../clock';
import type { IdpToken } from '../../upstream/exchange';

/**
 * How far apart two instances' clocks may be (the contract's Clocks rule). A fact another instance
 * dated takes effect as dated: with clocks in step, exactly when it would on that instance. Where the
 * rule allows no lateness at all, this much is given up on the side of safety.
 */
export const CLOCK_TOLERANCE_MS = 5000;

/**
 * A token the cache keeps: the IdP's answer as received, when it arrived, which instance received it,
 * and whether that was another one (a copy, from the table: dated by that instance's clock). A copy is
 * reckoned older by the clocks' tolerance for its `expires_in` and its end, never for its phases.
 */
export interface Entry {
  readonly token: IdpToken;
  readonly receivedAt: EpochMs;
  readonly receivedBy: string;
  readonly copy: boolean;
  /** The latest rejection its exchange knew of when it was sent (0: none): the token surely came after it, whatever the clocks. */
  readonly after: EpochMs;
}

/** A token as the instance that received it keeps it, dated by its clock, after the rejection its exchange knew (0: none). */
export function ownEntry(token: IdpToken, receivedAt: EpochMs, receivedBy: string, after: EpochMs = epochMs(0)): Entry {
  return { token, receivedAt, receivedBy, copy: false, after };
}

/** Where a kept token is in its life, which decides how a request for it is answered. */
export type Phase = 'fresh' | 'refresh' | 'stale' | 'expired';

const MIN_MARGIN_MS = 30_000;
const MARGIN_FRACTION = 0.1;
const REFRESH_LEAD_MS = 30_000;
/** The contract: no answer carries a token within 5 s of its expiry. */
const LAST_SERVED_MS = 5000;

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

/** Whether a token may be kept at all: a numeric `expires_in` over 30 s. */
export function keepable(token: IdpToken): boolean {
  return lifetimeMs(token) > MIN_MARGIN_MS;
}

/** The phase of a kept token at `now`, by its age as dated: stale at `expires_in` less the margin, refreshed ahead from the later of half its life and 30 s before that. */
export function phaseOf(entry: Entry, now: EpochMs): Phase {
  const lifetime = lifetimeMs(entry.token);
  const age = now - entry.receivedAt;
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
 * Whether an instance that did not receive the kept token may refresh it at `now`: from the middle
 * of its refresh window, in case the instance that received it has gone.
 */
export function openToFleet(entry: Entry, now: EpochMs): boolean {
  const { opens, staleAfter } = refreshWindow(lifetimeMs(entry.token));
  return now - entry.receivedAt >= (opens + staleAfter) / 2;
}

/** A copy's age counts the clocks' tolerance: its receiver's clock may be that far ahead. */
function reckonedAge(entry: Entry, now: EpochMs): number {
  return now - entry.receivedAt + (entry.copy ? CLOCK_TOLERANCE_MS : 0);
}

/** Whether a kept token may still answer at `now`: more than 5 s of its life left, a copy's reckoned with the clocks' tolerance. */
export function served(entry: Entry, now: EpochMs): boolean {
  return reckonedAge(entry, now) < lifetimeMs(entry.token) - LAST_SERVED_MS;
}

/** When a kept token expires, as dated. */
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
 * whole seconds since the IdP answered (a copy's with the clocks' tolerance, so none overstates its
 * life), each in the type the IdP used.
 */
export function answerFrom(entry: Entry, now: EpochMs): IdpToken {
  const elapsed = Math.ceil(Math.max(0, reckonedAge(entry, now)) / 1000);
  const token = { ...entry.token, expires_in: lowered(entry.token.expires_in, elapsed) };
  if ('ext_expires_in' in token) token.ext_expires_in = lowered(token.ext_expires_in, elapsed);
  return token;
}

function lowered(value: unknown, seconds: number): unknown {
  if (typeof value === 'number' && Number.isFinite(value)) return Math.max(0, value - seconds);
  if (typeof value === 'string' && /^\d+$/.test(value)) return String(Math.max(0, Number(value) - seconds));
  return value;
}

/**
 * Of two tokens of a key (either may be missing), the one that stands: the one received last as dated,
 * whoever asked for it. With clocks in step the fleet keeps what one instance would; apart, a token may
 * stand for one received up to their spread later, as the Clocks rule lets a fact take effect.
 */
export function newest(a: Entry | undefined, b: Entry | undefined): Entry | undefined {
  if (!a || !b) return a ?? b;
  return b.receivedAt > a.receivedAt ? b : a;
}

/** The token answer's size as the table would hold it. */
export function tokenBytes(token: IdpToken): number {
  return Buffer.byteLength(JSON.stringify(token));
}
