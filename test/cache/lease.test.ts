import { pollPauseMs } from '../../lambda/cache/lease';

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
