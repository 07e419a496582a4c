import { LeaseWatch, pollPauseMs } from '../../lambda/cache/lease';
import type { Read } from '../../lambda/cache/table-calls';

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

describe('LeaseWatch', () => {
  /** A read of a claim at revision `rev` that took 5 ms from `startedAt` (performance.now()). */
  const read = (rev: string, startedAt: number): Read => ({
    item: { rev, expiresSeconds: undefined, sealed: undefined },
    startedAt,
    endedAt: startedAt + 5,
  });
  // Wall-clock now and the furthest an honest holder dates its claim
  const [NOW, MAX_LEASE_MS] = [1_000_000, 4_000];

  it.each([
    [NOW, false],
    [NOW + 1, true],
    [NOW + MAX_LEASE_MS, true],
    [NOW + MAX_LEASE_MS + 1, false],
  ])(`counts a claim dated %p, now being ${NOW}, as alive: %p`, (until, alive) => {
    expect(new LeaseWatch(MAX_LEASE_MS).alive('holder', until, read('r1', 0), NOW)).toBe(alive);
  });

  it.each([
    // The revision first seen when the read ending at 5 ms did; 750 ms from then without a new one is silence
    [754, true],
    [755, false],
  ])('counts a claim still at its revision in a read starting at %p ms as alive: %p', (startedAt, alive) => {
    const watch = new LeaseWatch(MAX_LEASE_MS);
    watch.alive('holder', NOW + 1000, read('r1', 0), NOW);

    expect(watch.alive('holder', NOW + 1000, read('r1', startedAt), NOW)).toBe(alive);
  });

  it('counts a claim renewed under a new revision as alive again, from the read that saw it', () => {
    const watch = new LeaseWatch(MAX_LEASE_MS);
    watch.alive('holder', NOW + 1000, read('r1', 0), NOW);

    const renewed = watch.alive('holder', NOW + 1000, read('r2', 2000), NOW);
    const silent = watch.alive('holder', NOW + 1000, read('r2', 2754), NOW);
    const gone = watch.alive('holder', NOW + 1000, read('r2', 2755), NOW);

    expect([renewed, silent, gone]).toEqual([true, true, false]);
  });

  it('remembers the holders it saw alive, and no other', () => {
    const watch = new LeaseWatch(MAX_LEASE_MS);
    watch.alive('seen', NOW + 1000, read('r1', 0), NOW);
    watch.alive('too-far-ahead', NOW + MAX_LEASE_MS + 1, read('r2', 10), NOW);

    expect(['seen', 'too-far-ahead', 'never'].map((holder) => watch.waitedFor(holder))).toEqual([true, false, false]);
  });
});
