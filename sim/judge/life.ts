import { KEPT_OVER_MS, REFRESH_FROM_LIFE_SHARE, REFRESH_LEAD_MS, SECOND_MS, STALE_MARGIN_MIN_MS, STALE_MARGIN_SHARE } from './contract';

// A token's life by the contract's "Lifetime" and "Refresh ahead", from its `expires_in` alone.

/** A token's life by "Lifetime", in ms of age: a kept one has its phases; another only its end, if numeric. */
export type Life =
  | {
      readonly kept: true;
      readonly lifeMs: number;
      /** Refresh ahead opens; its middle, from which the fleet refreshes; stale. */
      readonly refreshMs: number;
      readonly middleMs: number;
      readonly staleMs: number;
    }
  | { readonly kept: false; readonly lifeMs: number | undefined };

/** `expires_in` as a number of seconds: a number, or a string of digits ("Lifetime": "a numeric `expires_in`"). */
export function secondsOf(value: unknown): number | undefined {
  if (typeof value === 'number' && Number.isFinite(value)) return value;
  if (typeof value === 'string' && /^\d+$/.test(value)) return Number(value);
  return undefined;
}

/** The phases of a token that lives `expiresIn` seconds, in ms of age. */
export function lifeOf(expiresIn: unknown): Life {
  const seconds = secondsOf(expiresIn);
  if (seconds === undefined) return { kept: false, lifeMs: undefined };
  const lifeMs = seconds * SECOND_MS;
  if (!(lifeMs > KEPT_OVER_MS)) return { kept: false, lifeMs };
  const staleMs = lifeMs - Math.max(STALE_MARGIN_MIN_MS, STALE_MARGIN_SHARE * lifeMs);
  // A window that would open after the token goes stale is empty (35 s tokens: stale at 5 s).
  const refreshMs = Math.min(staleMs, Math.max(lifeMs * REFRESH_FROM_LIFE_SHARE, staleMs - REFRESH_LEAD_MS));
  return { kept: true, lifeMs, refreshMs, middleMs: (refreshMs + staleMs) / 2, staleMs };
}
