import { epochMs } from '../../../lambda/clock';
import type { Entry } from '../../../lambda/cache/core/lifetime';
import { tokenOutcome } from '../../../lambda/cache/core/outcome';

describe('tokenOutcome', () => {
  const entry: Entry = {
    token: { access_token: 'at', expires_in: 3600 },
    receivedAt: epochMs(1_800_000_000_000),
    receivedBy: 'i',
    copy: false,
    after: epochMs(0),
    noCache: false,
  };

  it.each(['idp', 'table', 'memory'] as const)('brings a token from %s, known to have been under way until its receipt', (from) => {
    expect(tokenOutcome(entry, from)).toEqual({ kind: 'token', entry, from, runningAt: entry.receivedAt });
  });
});
