import { type EpochMs, epochMs } from '../../clock';
import type { IdpToken } from '../../upstream/exchange';
import type { ClaimFacts } from './claims';
import { CLOCK_TOLERANCE_MS, type Entry, expiresAt, newest, provesUntil } from './lifetime';
import type { Remembered } from './rules';

/** A token as an item holds it: the IdP's answer, when its receiver got it (that instance's clock), and which instance that was. */
export interface StoredToken {
  readonly token: IdpToken;
  readonly receivedAt: EpochMs;
  readonly by: string;
  readonly after: EpochMs;
}

/**
 * What a key's item remembers whatever it is doing: the newest token it keeps (kept past expiry for
 * one lifetime, as proof that the key's secret is the client's own), when the IdP last rejected the
 * key (0: never), and until when any token it ever kept lives, so that a rejection outlives them all.
 */
export interface KeyMemo {
  readonly kept: StoredToken | null;
  readonly rejectedAt: EpochMs;
  readonly keptUntil: EpochMs;
  /** Until when the key's tokens are known too large for an item: nobody waits on a claim for one. */
  readonly oversizeUntil: EpochMs;
}

/**
 * How a holder's exchange ended, for those who waited for it: a token (the item's kept one, one
 * of its own when it cannot be kept, or none when it was too large to share), or a failure.
 */
export type SharedOutcome =
  | {
      readonly kind: 'answered';
      readonly receivedAt: EpochMs;
      readonly until: EpochMs;
      /** When its holder answers its own caller at the latest (its clock): a waiter that finds it by then came before the fleet could know. */
      readonly answerBy: EpochMs;
      readonly token: StoredToken | 'kept' | 'unshared';
    }
  | { readonly kind: 'failure'; readonly failure: Remembered };

/** The outcome of one exchange (or of the exchange it took over), kept in the item while it is of use. */
export interface Ended {
  readonly holder: string;
  readonly lineage: readonly string[];
  readonly outcome: SharedOutcome;
}

/** Whether an exchange for the key is under way: a claim on it, or none. */
export type Activity = { readonly kind: 'idle' } | { readonly kind: 'claim'; readonly claim: ClaimFacts };

/**
 * Every state a table item can hold, sealed: a request key's item, or a hold item of a scope. A key's
 * item carries the outcomes of its recent exchanges across the claims that follow, so that a waiter
 * whose poll came after the next claim still finds the outcome it waited for; the last failure among
 * them is the key's remembered failure.
 */
export type ItemState =
  | { readonly kind: 'key'; readonly memo: KeyMemo; readonly activity: Activity; readonly ended: readonly Ended[] }
  | { readonly kind: 'hold'; readonly hold: Remembered };

export type KeyItem = Extract<ItemState, { kind: 'key' }>;

export const EMPTY_MEMO: KeyMemo = {
  kept: null,
  rejectedAt: epochMs(0),
  keptUntil: epochMs(0),
  oversizeUntil: epochMs(0),
};

/** An item's token as instance `self` holds it: a copy, dated by its receiver's clock, unless `self` received it. */
export function entryOf(stored: StoredToken, self: string): Entry {
  return {
    token: stored.token,
    receivedAt: stored.receivedAt,
    receivedBy: stored.by,
    copy: stored.by !== self,
    after: stored.after,
  };
}

/** A token as an item holds it. */
export function storedOf(entry: Entry): StoredToken {
  return { token: entry.token, receivedAt: entry.receivedAt, by: entry.receivedBy, after: entry.after };
}

/**
 * When everything in a state is of no more use, to any reader: its TTL (dated by the writer's clock,
 * so a reader's may be the clocks' tolerance ahead). A rejection lives as long as any token the item
 * ever kept, and at least `floorMs`, so that no instance's older copy escapes it.
 */
export function usefulUntil(state: ItemState, floorMs: number): EpochMs {
  if (state.kind === 'hold') return epochMs(state.hold.until + CLOCK_TOLERANCE_MS);
  const { memo, activity, ended } = state;
  return epochMs(
    CLOCK_TOLERANCE_MS +
      Math.max(
        memo.kept ? provesUntil(entryOf(memo.kept, '')) : 0,
        memo.rejectedAt === 0 ? 0 : Math.max(memo.rejectedAt + floorMs, memo.keptUntil),
        memo.oversizeUntil,
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

/** The memo once `entry` is kept in it: the token that stands of the two, and the later expiry of all it kept. */
export function keeping(memo: KeyMemo, entry: Entry): KeyMemo {
  const kept = !memo.kept || newest(entryOf(memo.kept, ''), entry) === entry ? storedOf(entry) : memo.kept;
  return { ...memo, kept, keptUntil: epochMs(Math.max(memo.keptUntil, expiresAt(entry))) };
}

/** Past its expiry a kept token only proves its key's secret (no clock serves it): its body goes, leaving the room to tokens riding along. */
export function provingOnly(memo: KeyMemo, now: EpochMs): KeyMemo {
  const { kept } = memo;
  if (!kept || now < expiresAt(entryOf(kept, ''))) return memo;
  return { ...memo, kept: { ...kept, token: { access_token: '', expires_in: kept.token.expires_in } } };
}
