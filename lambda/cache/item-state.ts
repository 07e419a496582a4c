import { type Entry, provesUntil } from './lifetime';
import type { Remembered } from './rules';
import { type ItemKeys, open, seal } from './sealed-item';
import { CLOCK_TOLERANCE_MS, type EpochMs, epochMs } from './time';

/**
 * What a key's item remembers whatever it is doing: the newest token it keeps (kept past expiry for
 * one lifetime, as proof that the key's secret is the client's own; never served expired), and when
 * the IdP last rejected the key (0: never), so that no token received before that stands in for a
 * failure anywhere.
 */
export interface KeyMemo {
  readonly kept: Entry | null;
  readonly rejectedAt: EpochMs;
}

/**
 * A claim on a key's exchange, as its holder writes it and rewrites it every renewal. Waiters judge
 * it from these sealed facts alone, on their own clock: a renewal is a higher `beat`; the holder's
 * exchange has `leftMs + runMs` in all; `claimedAt` (the holder's clock) only bounds replays.
 */
export interface ClaimFacts {
  readonly holder: string;
  readonly beat: number;
  /** What was left of the holder's deadline when it wrote this. */
  readonly leftMs: number;
  /** How long its exchange had run when it wrote this (0 before it started). */
  readonly runMs: number;
  readonly claimedAt: EpochMs;
  /** The holders this claim took over from, oldest first: their waiters take its outcome. */
  readonly lineage: readonly string[];
}

/** How a holder's exchange ended, for those who waited for it: a token they alone may take, or a failure. */
export type SharedOutcome =
  | { readonly kind: 'answered'; readonly entry: Entry; readonly until: EpochMs }
  | { readonly kind: 'failure'; readonly failure: Remembered };

/** The outcome of one holder's exchange (or of the exchange it took over), kept in the item while it is of use. */
export interface Ended {
  readonly holder: string;
  readonly lineage: readonly string[];
  readonly outcome: SharedOutcome;
}

/** Whether an exchange for the key is under way: a claim on it, or none. */
export type Activity = { readonly kind: 'idle' } | { readonly kind: 'claim'; readonly claim: ClaimFacts };

/**
 * Every state a table item can hold, sealed: a request key's item, or the hold item of a scope. A key's
 * item carries the outcomes of its recent exchanges across the claims that follow, so that a waiter
 * whose poll came after the next claim still finds the outcome it waited for; the last failure among
 * them is the key's remembered failure.
 */
export type ItemState =
  | { readonly kind: 'key'; readonly memo: KeyMemo; readonly activity: Activity; readonly ended: readonly Ended[] }
  | { readonly kind: 'hold'; readonly hold: Remembered };

export type KeyItem = Extract<ItemState, { kind: 'key' }>;

/** An item as written: its sealed state and its DynamoDB TTL (epoch seconds, bound into the seal). */
export interface SealedState {
  readonly sealed: Buffer;
  readonly expiresSeconds: number;
}

/**
 * How long a rejection outlives the tokens it voids in the table: a token of the key received before
 * it may live on in some instance's memory for its whole lifetime, and must never stand in for a
 * failure there. A day covers every lifetime up to a day (Auth0's default for M2M tokens).
 */
export const REJECTION_KEPT_MS = 24 * 3600 * 1000;

/**
 * Seal a state for its item, with the TTL at which nothing in it is of use any more, to any reader:
 * dated by this instance's clock, so a reader's may be the clocks' tolerance ahead.
 */
export function sealState(keys: ItemKeys, state: ItemState): SealedState {
  const expiresSeconds = Math.ceil((usefulUntil(state) + CLOCK_TOLERANCE_MS) / 1000);
  return { sealed: seal(keys, expiresSeconds, state), expiresSeconds };
}

/**
 * The state sealed in an item, or undefined for anything that does not open with these keys: what
 * opens was sealed by this service under the same pepper and format, so its shape is the one written.
 */
export function openState(keys: ItemKeys, expiresSeconds: number | undefined, sealed: Uint8Array | undefined): ItemState | undefined {
  if (expiresSeconds === undefined || sealed === undefined) return undefined;
  return open(keys, expiresSeconds, sealed) as ItemState | undefined;
}

/** When everything in a state is of no more use. */
export function usefulUntil(state: ItemState): EpochMs {
  if (state.kind === 'hold') return state.hold.until;
  const { memo, activity, ended } = state;
  return epochMs(
    Math.max(
      memo.kept ? provesUntil(memo.kept) : 0,
      memo.rejectedAt === 0 ? 0 : memo.rejectedAt + REJECTION_KEPT_MS,
      // A claim is judged by renewals, not by date; its item outlives its holder's deadline.
      activity.kind === 'claim' ? activity.claim.claimedAt + activity.claim.runMs + activity.claim.leftMs : 0,
      ...ended.map(endsAt),
    ),
  );
}

/** When an exchange's outcome is of no more use: its token is for waiters who have had their deadline, its failure is over. */
export function endsAt(ended: Ended): EpochMs {
  return ended.outcome.kind === 'failure' ? ended.outcome.failure.until : ended.outcome.until;
}
