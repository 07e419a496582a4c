import { type EpochMs, epochMs } from '../../lambda/clock';
import type { Entry } from '../../lambda/cache/core/lifetime';
import type { IdpToken } from '../../lambda/upstream/exchange';

/**
 * A token as the instance that received it keeps it, no rejection known before it.
 * A test that wants a copy, or any other field, spreads it and says so; a new Entry field is added here.
 */
export function ownEntry(token: IdpToken, receivedAt: EpochMs, receivedBy: string): Entry {
  return { token, receivedAt, receivedBy, copy: false, after: epochMs(0) };
}
