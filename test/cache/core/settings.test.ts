import { cacheSettings, hedgeFor, pepperFreshness, pollPauseMs } from '../../../lambda/cache/core/settings';

// The cache's own choices, derived from the deadline (UPSTREAM_TIMEOUT_MS).

describe('cacheSettings', () => {
  it('for the default 5 s deadline', () => {
    expect(cacheSettings(5000)).toEqual({
      upstreamTimeoutMs: 5000,
      callLimitMs: 1000,
      hedge: { minMs: 200, maxMs: 2500 },
      renewEveryMs: 250,
      silenceMs: 750,
      echoAfterMs: 250,
      poll: { minMs: 20, maxMs: 100 },
      dominanceMs: 1000,
      maxRefusals: 3,
      maxRewrites: 2,
      refreshRetryMs: 1000,
      memoryEntries: 1000,
      maxSharedTokenBytes: 300_000,
      itemTokenBytes: 360_000,
      oversizeKnownMs: 3_600_000,
      rejectionFloorMs: 86_400_000,
      kept: { lineage: 8, ended: 4, revs: 8, echoes: 32 },
      pepper: { refreshAfterMs: 30_000, maxAgeMs: 60_000, retryAfterMs: 1000, loadLimitMs: 2000 },
    });
  });

  // A table call: a fifth of the deadline, at least 1 ms, at most 1 s. The hedge: from a twenty-fifth (at least 20 ms,
  // at most 1 s) to a half (never below the minimum). A holder is taken over a fifth of the deadline behind, at most 1 s.
  it.each([
    [3, 1, 20, 20, 0.6],
    [103, 20, 20, 51, 20.6],
    [1234, 246, 49, 617, 246.8],
    [7777, 1000, 311, 3888, 1000],
    [30_000, 1000, 1000, 15_000, 1000],
  ])(
    'for a deadline of %p ms: a call limit of %p ms, a hedge of %p to %p ms, a dominance of %p ms',
    (deadline, call, min, max, dominance) => {
      const settings = cacheSettings(deadline);

      expect([settings.upstreamTimeoutMs, settings.callLimitMs, settings.hedge, settings.dominanceMs]).toEqual([
        deadline,
        call,
        { minMs: min, maxMs: max },
        dominance,
      ]);
    },
  );
});

describe('hedgeFor', () => {
  const settings = cacheSettings(5000); // a hedge of 200 to 2500 ms

  it.each([
    ['no table call timed yet', undefined, 1000, 200, 200],
    ['no IdP answer timed yet', 100, undefined, 200, 200],
    ['a table that answers in 100 ms: a read and a write of it, and half again', 100, 1000, 250, 2500],
    ['whole milliseconds', 100.3, 1000, 250, 2500],
    ['a fast table: the minimum', 60, 1000, 200, 2500],
    ['a slow table: half the deadline at most', 1200, 1000, 2500, 2500],
    ['an IdP that leaves 1000 ms of the deadline once its time and a quarter more are counted', 500, 3200, 1000, 1000],
    ['an IdP that leaves 250 ms', 1000, 3800, 250, 250],
    ['an IdP that leaves 999.5 ms', 100, 3200.4, 250, 999],
    ['an IdP that leaves less than the minimum: the minimum', 1000, 3900, 200, 200],
    ['an IdP slower than the deadline: the minimum', 1000, 6000, 200, 200],
  ])('waits on the table, with %s: %p ms table, %p ms IdP -> %p ms, at most %p ms', (_case, tableMs, idpMs, ms, capMs) => {
    expect(hedgeFor(settings, tableMs, idpMs)).toEqual({ ms, capMs });
  });
});

describe('pollPauseMs', () => {
  it.each([
    [1000, 50],
    [1234, 61.7],
    [100_000, 100],
    [200, 20],
    [10, 10],
    [0, 0],
  ])('sleeps a waiter with %p ms left for %p ms: a twentieth, within 20 to 100 ms, never past its deadline', (left, pause) => {
    expect(pollPauseMs(cacheSettings(5000), left)).toBeCloseTo(pause, 9);
  });
});

describe('pepperFreshness', () => {
  const pepper = cacheSettings(5000).pepper;

  it.each([
    [0, 'fresh'],
    [29_999, 'fresh'],
    [30_000, 'refresh'],
    [59_999, 'refresh'],
    [60_000, 'stale'],
    [-1, 'stale'],
  ])('counts a pepper read %p ms ago as %s (a clock set back makes it old)', (age, freshness) => {
    expect(pepperFreshness(1_800_000_000_000, 1_800_000_000_000 + age, pepper)).toBe(freshness);
  });
});
