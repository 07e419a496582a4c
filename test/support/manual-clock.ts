import { type Clock, epochMs, monoMs } from '../../lambda/clock';

/** A clock that moves only when a test moves it: exact boundaries, no sleeping, no tolerances. */
export interface ManualClock extends Clock {
  /** Move both clocks `ms` ahead and wake, in the order they came due, the sleeps due by then. */
  advance(ms: number): void;
  /** Move the wall clock alone (back, when negative), as a time sync may: the monotonic clock and its sleeps stay. */
  shiftWall(ms: number): void;
  /** Sleeps neither due nor aborted yet. */
  readonly sleeping: number;
  /** How far ahead each of those sleeps is due, soonest first. */
  readonly dueIn: number[];
}

interface Sleeper {
  readonly due: number;
  readonly seq: number;
  readonly wake: () => void;
}

/** A {@link ManualClock} whose wall clock starts at `epochStart` and monotonic clock at `monoStart`. */
export function manualClock(epochStart = 1_800_000_000_000, monoStart = 10_000): ManualClock {
  let wall = epochStart;
  let mono = monoStart;
  let seq = 0;
  const sleepers = new Set<Sleeper>();
  return {
    epoch: () => epochMs(wall),
    mono: () => monoMs(mono),
    sleep(ms, signal) {
      return new Promise<void>((resolve, reject) => {
        if (signal?.aborted) return reject(abortError());
        if (ms <= 0) return resolve();
        const onAbort = (): void => {
          sleepers.delete(sleeper);
          reject(abortError());
        };
        const sleeper: Sleeper = {
          due: mono + ms,
          seq: seq++,
          wake: () => {
            signal?.removeEventListener('abort', onAbort);
            resolve();
          },
        };
        sleepers.add(sleeper);
        signal?.addEventListener('abort', onAbort, { once: true });
      });
    },
    advance(ms) {
      mono += ms;
      wall += ms;
      const due = [...sleepers].filter((sleeper) => sleeper.due <= mono).sort((a, b) => a.due - b.due || a.seq - b.seq);
      for (const sleeper of due) {
        sleepers.delete(sleeper);
        sleeper.wake();
      }
    },
    shiftWall(ms) {
      wall += ms;
    },
    get sleeping() {
      return sleepers.size;
    },
    get dueIn() {
      return [...sleepers].map((sleeper) => sleeper.due - mono).sort((a, b) => a - b);
    },
  };
}

function abortError(): Error {
  return Object.assign(new Error('The operation was aborted'), { name: 'AbortError' });
}

/** Let every promise reaction and I/O callback that is ready run: no time passes on any clock. */
export const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
