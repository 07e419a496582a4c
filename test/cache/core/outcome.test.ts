import { ownEntry } from '../../../lambda/cache/core/lifetime';
import { epochMs } from '../../../lambda/clock';
import { tokenOutcome } from '../../../lambda/cache/core/outcome';

describe('tokenOutcome', () => {
  const entry = ownEntry({ access_token: 'at', expires_in: 3600 }, epochMs(1_800_000_000_000), 'i');

  it.each(['idp', 'table', 'memory'] as const)('brings a token from %s, known to have been under way until its receipt', (from) => {
    expect(tokenOutcome(entry, from)).toEqual({ kind: 'token', entry, from, runningAt: entry.receivedAt });
  });
});
