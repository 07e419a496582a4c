import { Deadline, systemClock } from '../lambda/clock';
import { manualClock } from './support/manual-clock';

// The one clock everything reads: the system's in the function, a manual one in tests.

describe('systemClock', () => {
  it('reads the wall clock it is given', () => {
    expect(systemClock(() => 1_800_000_000_123).epoch()).toBe(1_800_000_000_123);
  });

  it('reads a monotonic clock that never goes back', () => {
    const clock = systemClock();

    const [first, second] = [clock.mono(), clock.mono()];

    expect(second).toBeGreaterThanOrEqual(first);
  });

  it('ends a sleep its signal aborts, with a rejection', async () => {
    const abort = new AbortController();

    const sleeping = systemClock().sleep(60_000, abort.signal);
    abort.abort();

    await expect(sleeping).rejects.toMatchObject({ name: 'AbortError' });
  });

  it('sleeps no time at all for 0 ms or less', async () => {
    await expect(systemClock().sleep(-5)).resolves.toBeUndefined();
  });
});

describe('Deadline', () => {
  it('says how many whole milliseconds are left, never below 0, and when it has passed', () => {
    const clock = manualClock();
    const deadline = Deadline.after(clock, 1000.5);

    clock.advance(999);
    expect([deadline.leftMs(), deadline.passed()]).toEqual([1, false]);
    clock.advance(1.5);
    expect([deadline.leftMs(), deadline.passed()]).toEqual([0, true]);
    clock.advance(10);
    expect(deadline.leftMs()).toBe(0);
  });

  it('bounds one call within it by the earlier of the two', () => {
    const clock = manualClock();
    const deadline = Deadline.after(clock, 1000);

    expect([deadline.within(200).leftMs(), deadline.within(5000).leftMs()]).toEqual([200, 1000]);
  });

  it('runs work once it passes, unless cancelled first', async () => {
    const clock = manualClock();
    const deadline = Deadline.after(clock, 1000);
    const ran: string[] = [];
    deadline.whenPassed(() => ran.push('kept'));
    const cancel = deadline.whenPassed(() => ran.push('cancelled'));

    cancel();
    clock.advance(1000);
    await Promise.resolve();

    expect(ran).toEqual(['kept']);
  });

  it('races work against it: the work’s result in time, its error once it passes', async () => {
    const clock = manualClock();
    const deadline = Deadline.after(clock, 1000);

    await expect(deadline.race(Promise.resolve('done'))).resolves.toBe('done');
    const late = deadline.race(new Promise(() => undefined));
    clock.advance(1000);
    await expect(late).rejects.toMatchObject({ name: 'TimeoutError' });
    await expect(deadline.race(new Promise(() => undefined), () => new Error('own'))).rejects.toThrow('own');
    expect(clock.sleeping).toBe(0);
  });

  it('aborts a signal once it passes, and leaves no timer once released', async () => {
    const clock = manualClock();
    const deadline = Deadline.after(clock, 1000);
    const passing = deadline.signal();
    const released = deadline.signal();

    released.release();
    clock.advance(1000);
    await Promise.resolve();

    expect([passing.signal.aborted, (passing.signal.reason as Error).name, released.signal.aborted, clock.sleeping]).toEqual([
      true,
      'TimeoutError',
      false,
      0,
    ]);
  });
});
