import { realRuntime } from '../../lambda/cache/time';

// The runtime the cache runs on outside the simulator: the clocks, timers and randomness it reads.

describe('realRuntime', () => {
  it('reads the wall clock it is given', () => {
    const runtime = realRuntime(() => 1_800_000_000_123);

    expect(runtime.epoch()).toBe(1_800_000_000_123);
  });

  it('reads a monotonic clock that never goes back', () => {
    const runtime = realRuntime();

    const first = runtime.mono();
    const second = runtime.mono();

    expect(typeof first).toBe('number');
    expect(second).toBeGreaterThanOrEqual(first);
  });

  it('draws random numbers in [0, 1)', () => {
    const runtime = realRuntime();

    const draws = Array.from({ length: 100 }, () => runtime.random());

    expect(draws.every((draw) => draw >= 0 && draw < 1)).toBe(true);
    expect(new Set(draws).size).toBeGreaterThan(1);
  });

  it('names holders and revisions with 12 random base64url characters', () => {
    const runtime = realRuntime();

    const names = [runtime.id(), runtime.id()];

    expect(names[0]).toMatch(/^[A-Za-z0-9_-]{12}$/);
    expect(names[1]).not.toBe(names[0]);
  });

  it('sleeps as long as asked unless its signal ends the sleep, with a rejection', async () => {
    const runtime = realRuntime();
    const abort = new AbortController();

    const sleeping = runtime.sleep(60_000, abort.signal);
    // Timers due sooner run first: a sleep cut to nothing would have ended by then.
    await new Promise((resolve) => setTimeout(resolve, 10));
    abort.abort();

    await expect(sleeping).rejects.toMatchObject({ name: 'AbortError' });
  });

  it('sleeps no time at all for 0 ms or less', async () => {
    const runtime = realRuntime();

    await expect(runtime.sleep(-5)).resolves.toBeUndefined();
  });
});
