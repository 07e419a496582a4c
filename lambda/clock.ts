import { setTimeout as sleep } from 'node:timers/promises';

/** Wall-clock milliseconds since the epoch: comparable across instances only within their clocks' skew. */
export type EpochMs = number & { readonly epochMs: unique symbol };
/** Monotonic milliseconds on this instance: deadlines, liveness, waits. Never shared. */
export type MonoMs = number & { readonly monoMs: unique symbol };

export const epochMs = (ms: number): EpochMs => ms as EpochMs;
export const monoMs = (ms: number): MonoMs => ms as MonoMs;

/**
 * Where every part of the function reads time and sets its timers: the system's in the deployed
 * function, a test's or the simulator's elsewhere. Nothing reads `Date.now()` or sets a timer of its own.
 */
export interface Clock {
  epoch(): EpochMs;
  mono(): MonoMs;
  /** Resolves `ms` later (at once for 0 or less); rejects once `signal` aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** The system's clocks and timers; `epoch` may be replaced (a test's wall clock). */
export function systemClock(epoch: () => number = Date.now): Clock {
  return {
    epoch: () => epochMs(epoch()),
    mono: () => monoMs(performance.now()),
    sleep: (ms, signal) => sleep(Math.max(0, ms), undefined, { signal }),
  };
}

/** What a request's work throws when its deadline passes first. */
export class DeadlinePassed extends Error {
  override readonly name = 'TimeoutError';
}

/**
 * A moment on one instance's monotonic clock by which some work must end: a request's
 * UPSTREAM_TIMEOUT_MS, made once by the handler and handed down to the socket, or one call's limit.
 */
export class Deadline {
  private constructor(
    readonly clock: Clock,
    readonly at: MonoMs,
  ) {}

  /** The deadline `ms` from now. */
  static after(clock: Clock, ms: number): Deadline {
    return new Deadline(clock, monoMs(clock.mono() + ms));
  }

  /** Whole milliseconds left, never below 0. */
  leftMs(): number {
    return Math.max(0, Math.floor(this.at - this.clock.mono()));
  }

  passed(): boolean {
    return this.clock.mono() >= this.at;
  }

  /** The earlier of this deadline and `ms` from now: one call's limit within the request. */
  within(ms: number): Deadline {
    return new Deadline(this.clock, monoMs(Math.min(this.at, this.clock.mono() + ms)));
  }

  /** Run `then` once the deadline passes (at once if it has); the returned function cancels it. */
  whenPassed(then: () => void): () => void {
    const cancel = new AbortController();
    this.clock.sleep(this.at - this.clock.mono(), cancel.signal).then(then, () => undefined);
    return () => cancel.abort();
  }

  /** What `work` gives, or `passed()`'s error if the deadline passes first. */
  async race<T>(work: Promise<T>, passed: () => Error = () => new DeadlinePassed()): Promise<T> {
    // Assigned at once: a promise's executor runs before the constructor returns.
    let cancel!: () => void;
    const late = new Promise<never>((_resolve, reject) => (cancel = this.whenPassed(() => reject(passed()))));
    try {
      return await Promise.race([work, late]);
    } finally {
      cancel();
    }
  }

  /** A signal that aborts when the deadline passes; `release` once the work is done, so no timer is left behind. */
  signal(): { readonly signal: AbortSignal; release(): void } {
    const controller = new AbortController();
    const release = this.whenPassed(() => controller.abort(new DeadlinePassed()));
    return { signal: controller.signal, release };
  }
}
