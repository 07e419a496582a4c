import { type Entry, expiresAt } from './lifetime';
import type { Remembered } from './plan';
import { type ItemKeys, open, seal } from './sealed-item';

/**
 * What one table item holds, sealed: every state a key's item can be in. A request item is a kept
 * token, a claim on the key's exchange (keeping the token it will replace), a remembered failure, or
 * a token that could not be kept, for those who waited for it. A hold item holds a hold.
 */
export type ItemState =
  | { readonly kind: 'entry'; readonly entry: Entry }
  | { readonly kind: 'lease'; readonly holder: string; readonly until: number; readonly kept: Entry | undefined }
  | { readonly kind: 'failure'; readonly holder: string; readonly failure: Remembered; readonly kept: Entry | undefined }
  | { readonly kind: 'answered'; readonly holder: string; readonly entry: Entry; readonly until: number }
  | { readonly kind: 'hold'; readonly hold: Remembered };

/** An item as written: its sealed state and its DynamoDB TTL (epoch seconds, bound into the seal). */
export interface SealedState {
  readonly sealed: Buffer;
  readonly expiresSeconds: number;
}

/** Seal a state for its item, with the TTL at which nothing in it is of use any more. */
export function sealState(keys: ItemKeys, state: ItemState): SealedState {
  const expiresSeconds = Math.ceil(usefulUntil(state) / 1000);
  return { sealed: seal(keys, expiresSeconds, state), expiresSeconds };
}

/**
 * The state sealed in an item, or undefined for anything that does not open with these keys: what
 * opens was sealed by this service under the same pepper, so its shape is the one written.
 */
export function openState(keys: ItemKeys, expiresSeconds: number | undefined, sealed: Uint8Array | undefined): ItemState | undefined {
  if (expiresSeconds === undefined || sealed === undefined) return undefined;
  return open(keys, expiresSeconds, sealed) as ItemState | undefined;
}

function usefulUntil(state: ItemState): number {
  switch (state.kind) {
    case 'entry':
      return expiresAt(state.entry);
    case 'lease':
      return Math.max(state.until, state.kept ? expiresAt(state.kept) : 0);
    case 'failure':
      return Math.max(state.failure.until, state.kept ? expiresAt(state.kept) : 0);
    case 'answered':
      return state.until;
    case 'hold':
      return state.hold.until;
  }
}
