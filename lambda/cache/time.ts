import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';

/** Wall-clock milliseconds since the epoch: comparable across instances only within their clocks' skew. */
export type EpochMs = number & { readonly epochMs: unique symbol };
/** Monotonic milliseconds on this instance (`performance.now()`): deadlines, liveness, waits. Never shared. */
export type MonoMs = number & { readonly monoMs: unique symbol };

/** How far apart two instances' clocks may be: what one dated is judged with this much slack by another. */
export const CLOCK_TOLERANCE_MS = 5000;

export const epochMs = (ms: number): EpochMs => ms as EpochMs;
export const monoMs = (ms: number): MonoMs => ms as MonoMs;

/**
 * Everything the cache reads from the world besides its I/O: the two clocks, timers and randomness.
 * The function runs on {@link realRuntime}; the simulator runs the same code on a simulated one.
 */
export interface Runtime {
  epoch(): EpochMs;
  mono(): MonoMs;
  /** Resolves `ms` later (at once for 0 or less); rejects once `signal` aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  /** A number in [0, 1). */
  random(): number;
  /** A random name (12 base64url characters): a claim's holder, an item's revision. */
  id(): string;
}

export function realRuntime(epoch: () => number = Date.now): Runtime {
  return {
    epoch: () => epochMs(epoch()),
    mono: () => monoMs(performance.now()),
    sleep: (ms, signal) => sleep(Math.max(0, ms), undefined, { signal }),
    random: Math.random,
    id: () => randomBytes(9).toString('base64url'),
  };
}

/** The milliseconds left before a deadline, never less than 0. */
export function leftUntil(deadline: MonoMs, now: MonoMs): number {
  return Math.max(0, Math.floor(deadline - now));
}
