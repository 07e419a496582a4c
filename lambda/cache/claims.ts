import type { ClaimFacts } from './item-state';
import { CLOCK_TOLERANCE_MS, type EpochMs, type MonoMs } from './time';

/** How often a holder renews its claim while its exchange runs. */
export const RENEW_EVERY_MS = 250;
/**
 * How long a claim may go unrenewed, on a waiter's own clock, before the waiter counts its holder as
 * gone (it died, or its writes no longer land) and takes over: three renewals missed.
 */
export const SILENCE_MS = 750;
/**
 * How much less time in all a live holder's exchange may have than a waiter's own would have now before
 * the waiter takes over: such a holder (one that took over late) may give up on an IdP the waiter could
 * still wait for. A fifth of the deadline, at most 1 s: far more than a holder that claimed on arrival
 * lost (the hedge at most), so such a holder is never taken over.
 */
export function dominanceMs(upstreamTimeoutMs: number): number {
  return Math.min(1000, upstreamTimeoutMs / 5);
}
// The holders a claim names as taken over from: more than any honest chain of takeovers in one deadline.
const LINEAGE_KEPT = 8;

// Waiters read again every twentieth of what is left of their deadline, between 20 and 100 ms: a dead
// holder is noticed well within a second, and a waiter near its deadline sees an outcome promptly.
const MIN_POLL_MS = 20;
const MAX_POLL_MS = 100;

/** How long a waiter with `leftMs` of its deadline sleeps before it reads again; `random` in [0, 1) spreads the fleet's reads ±20%. */
export function pollPauseMs(leftMs: number, random: number): number {
  const pauseMs = Math.min(MAX_POLL_MS, Math.max(MIN_POLL_MS, leftMs / 20)) * (0.8 + random * 0.4);
  return Math.min(leftMs, pauseMs);
}

/** When a read ran, on this instance's clock: a revision it returns existed from at least its end to the next read's start. */
export interface ReadSpan {
  readonly startedAt: MonoMs;
  readonly endedAt: MonoMs;
}

/** What a request has seen of the claims on its key. */
export interface Watch {
  /** Every holder whose claim it waited on, and the highest beat it saw of each. */
  readonly beats: readonly (readonly [holder: string, beat: number])[];
  /** The claim it saw last, and when (its clock) that claim's beat was first seen. */
  readonly last: { readonly holder: string; readonly beat: number; readonly since: MonoMs } | undefined;
}

export const EMPTY_WATCH: Watch = { beats: [], last: undefined };

/** A waiter's verdict on a claim it read: wait for it, or take it over (it is silent, implausible, or no match for the waiter's own time). */
export type Verdict = 'alive' | 'silent' | 'implausible' | 'dominated';

/** What bounds a claim: the longest an honest holder's exchange runs (the deadline), and the settle after it. */
export interface ClaimBounds {
  readonly upstreamTimeoutMs: number;
  readonly settleMs: number;
}

/**
 * Judge a claim read in `read`, with `leftMs` left of this request's own deadline. Liveness is a beat
 * higher than any seen of that holder, judged on this instance's clock alone: a replayed or rewritten
 * item can neither fake a renewal nor hide one. The holder's clock is used only to refuse claims from
 * long ago (replays), with the clocks' tolerance.
 */
export function judge(
  watch: Watch,
  claim: ClaimFacts,
  read: ReadSpan,
  now: EpochMs,
  leftMs: number,
  bounds: ClaimBounds,
): { readonly watch: Watch; readonly verdict: Verdict } {
  const longest = bounds.upstreamTimeoutMs + bounds.settleMs + CLOCK_TOLERANCE_MS;
  if (claim.claimedAt > now + CLOCK_TOLERANCE_MS || claim.claimedAt < now - longest) return { watch, verdict: 'implausible' };
  const seen = watch.beats.find(([holder]) => holder === claim.holder)?.[1];
  let next = watch;
  if (seen === undefined || claim.beat > seen) {
    next = {
      beats: [...watch.beats.filter(([holder]) => holder !== claim.holder), [claim.holder, claim.beat] as const],
      last: { holder: claim.holder, beat: claim.beat, since: read.endedAt },
    };
  } else if (watch.last?.holder !== claim.holder) {
    // A holder seen before, at no higher beat: a replay, silent since whenever it was last renewed.
    return { watch, verdict: 'silent' };
  }
  const since = (next.last as NonNullable<Watch['last']>).since;
  if (read.startedAt - since >= SILENCE_MS) return { watch: next, verdict: 'silent' };
  if (leftMs > claim.leftMs + claim.runMs + dominanceMs(bounds.upstreamTimeoutMs)) return { watch: next, verdict: 'dominated' };
  return { watch: next, verdict: 'alive' };
}

/** Whether this request waited for the exchange of `holder`, or of one it took over from: its outcome is this request's too. */
export function waitedFor(watch: Watch, holder: string, lineage: readonly string[]): boolean {
  return watch.beats.some(([seen]) => seen === holder || lineage.includes(seen));
}

/** The lineage of a claim that takes over from `claim`: its own, then its holder. */
export function lineageAfter(claim: ClaimFacts): readonly string[] {
  return [...claim.lineage, claim.holder].slice(-LINEAGE_KEPT);
}
