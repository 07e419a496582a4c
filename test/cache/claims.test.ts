import { dominanceMs, EMPTY_WATCH, judge, lineageAfter, pollPauseMs, SILENCE_MS, waitedFor, type Watch } from '../../lambda/cache/claims';
import type { ClaimFacts } from '../../lambda/cache/item-state';
import { CLOCK_TOLERANCE_MS, epochMs, monoMs } from '../../lambda/cache/time';

describe('pollPauseMs', () => {
  it.each([
    // A twentieth of what is left, within 20 to 100 ms, at the middle of its spread
    [1000, 0.5, 50],
    [100_000, 0.5, 100],
    [200, 0.5, 20],
    // Spread ±20% by the random number
    [1000, 0, 40],
    [1000, 0.999, 59.98],
    // Never past what is left
    [10, 0.5, 10],
    [0, 0.5, 0],
  ])('sleeps a waiter with %p ms left and random %p for %p ms', (left, random, pause) => {
    expect(pollPauseMs(left, random)).toBeCloseTo(pause, 6);
  });
});

describe('judge', () => {
  const NOW = epochMs(1_800_000_000_000);
  const BOUNDS = { upstreamTimeoutMs: 5000, settleMs: 1000 };
  const claim = (parts: Partial<ClaimFacts> = {}): ClaimFacts => ({
    holder: 'holder-a',
    beat: 0,
    leftMs: 4900,
    runMs: 0,
    claimedAt: NOW,
    lineage: [],
    ...parts,
  });
  /** A read that ran from `at` to `at + 2` on the waiter's own clock. */
  const read = (at: number) => ({ startedAt: monoMs(at), endedAt: monoMs(at + 2) });
  const see = (watch: Watch, facts: ClaimFacts, at: number, leftMs = 4000) => judge(watch, facts, read(at), NOW, leftMs, BOUNDS);

  it('waits for a claim it sees for the first time, and remembers its holder', () => {
    const { watch, verdict } = see(EMPTY_WATCH, claim(), 0);

    expect(verdict).toBe('alive');
    expect(waitedFor(watch, 'holder-a', [])).toBe(true);
  });

  it('counts a holder as gone once no higher beat has come for 750 ms of its own clock, from the end of the read that saw the last', () => {
    const first = see(EMPTY_WATCH, claim(), 0).watch;

    expect(see(first, claim(), 2 + SILENCE_MS - 1).verdict).toBe('alive');
    expect(see(first, claim(), 2 + SILENCE_MS).verdict).toBe('silent');
  });

  it('counts a higher beat as a renewal, from the read that saw it', () => {
    const first = see(EMPTY_WATCH, claim(), 0).watch;
    const renewed = see(first, claim({ beat: 1 }), 600);

    expect(renewed.verdict).toBe('alive');
    expect(see(renewed.watch, claim({ beat: 1 }), 602 + SILENCE_MS - 1).verdict).toBe('alive');
    expect(see(renewed.watch, claim({ beat: 1 }), 602 + SILENCE_MS).verdict).toBe('silent');
  });

  it('never counts an older copy of the claim put back as a renewal', () => {
    const later = see(see(EMPTY_WATCH, claim(), 0).watch, claim({ beat: 3 }), 100).watch;

    expect(see(later, claim({ beat: 2 }), 102 + SILENCE_MS).verdict).toBe('silent');
  });

  it('counts a holder it saw before another as gone: only an older copy brings it back', () => {
    const a = see(EMPTY_WATCH, claim(), 0).watch;
    const b = see(a, claim({ holder: 'holder-b' }), 100).watch;

    expect(see(b, claim({ beat: 0 }), 200).verdict).toBe('silent');
  });

  it('counts a holder seen before at no lower beat as gone, though the watch names no last claim', () => {
    const seenOnly: Watch = { beats: [['holder-a', 2]], last: undefined };

    expect(see(seenOnly, claim({ beat: 2 }), 0)).toEqual({ watch: seenOnly, verdict: 'silent' });
  });

  it('waits for a holder whose clock is 4 s behind: liveness never compares clocks', () => {
    expect(see(EMPTY_WATCH, claim({ claimedAt: epochMs(NOW - 4000) }), 0).verdict).toBe('alive');
  });

  it.each([
    ['dated further ahead than the clocks tolerate', NOW + CLOCK_TOLERANCE_MS + 1, 'implausible'],
    ['dated as far ahead as they tolerate', NOW + CLOCK_TOLERANCE_MS, 'alive'],
    ['made longer ago than any honest holder holds one', NOW - 5000 - 1000 - CLOCK_TOLERANCE_MS - 1, 'implausible'],
    ['made as long ago as an honest holder may hold one', NOW - 5000 - 1000 - CLOCK_TOLERANCE_MS, 'alive'],
  ])('judges a claim %s: %s', (_case, claimedAt, verdict) => {
    expect(see(EMPTY_WATCH, claim({ claimedAt: epochMs(claimedAt) }), 0).verdict).toBe(verdict);
  });

  it("takes over from a holder whose exchange has a fifth of the deadline (at most 1 s) less in all than the waiter's own would", () => {
    const late = claim({ leftMs: 1500, runMs: 500 });

    expect(see(EMPTY_WATCH, late, 0, 3000).verdict).toBe('alive');
    expect(see(EMPTY_WATCH, late, 0, 3001).verdict).toBe('dominated');
    expect(
      judge(EMPTY_WATCH, claim({ leftMs: 300, runMs: 200 }), read(0), NOW, 700, { upstreamTimeoutMs: 1000, settleMs: 200 }).verdict,
    ).toBe('alive');
    expect(
      judge(EMPTY_WATCH, claim({ leftMs: 300, runMs: 200 }), read(0), NOW, 701, { upstreamTimeoutMs: 1000, settleMs: 200 }).verdict,
    ).toBe('dominated');
  });

  it.each([
    [1000, 200],
    [5000, 1000],
    [29_000, 1000],
  ])('lets a holder of a %p ms deadline fall %p ms behind before it is taken over', (timeout, margin) => {
    expect(dominanceMs(timeout)).toBe(margin);
  });
});

describe('waitedFor and lineageAfter', () => {
  const watch = { beats: [['holder-a', 2] as const], last: undefined };

  it('shares the outcome of the holder waited for, or of any that took over from it', () => {
    expect(waitedFor(watch, 'holder-a', [])).toBe(true);
    expect(waitedFor(watch, 'holder-b', ['holder-c', 'holder-a'])).toBe(true);
    expect(waitedFor(watch, 'holder-b', ['holder-c'])).toBe(false);
  });

  it('names the holders taken over from, oldest first, the last eight', () => {
    const facts = {
      holder: 'h9',
      beat: 0,
      leftMs: 1,
      runMs: 0,
      claimedAt: epochMs(0),
      lineage: ['h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'h7', 'h8'],
    };

    expect(lineageAfter(facts)).toEqual(['h2', 'h3', 'h4', 'h5', 'h6', 'h7', 'h8', 'h9']);
    expect(lineageAfter({ ...facts, lineage: [] })).toEqual(['h9']);
  });
});
