import type { Runtime } from '../lambda/cache/shell/shared-tier';
import { epochMs, monoMs } from '../lambda/clock';

/** A seeded generator (mulberry32): one seed, one sequence, on every machine. */
export function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Who an event belongs to: an instance runs its events only while it is neither frozen nor dead. */
export interface Owner {
  readonly name: string;
  frozen: boolean;
  dead: boolean;
  /** Events that came due while it was frozen: they run when it thaws, as Lambda resumes a frozen process. */
  readonly deferred: Scheduled[];
}

interface Scheduled {
  readonly at: number;
  readonly seq: number;
  readonly owner: Owner | undefined;
  readonly run: () => void;
  cancelled: boolean;
}

/** The simulated epoch of true time 0: any fixed day will do. */
const EPOCH_ZERO = 1_900_000_000_000;

/**
 * Simulated time moves in steps of 1/1024 ms: on that grid sums and differences of times are exact, so a
 * deadline 5 s after an arrival ends exactly 5 s after it, not a float's rounding before or after.
 */
export const instant = (ms: number): number => Math.round(ms * 1024) / 1024;

/**
 * Simulated time for many instances in one process. Time moves only from one event to the next, so a
 * minute of traffic takes as long as its events take to run; after each event every promise it
 * settled is given its turn (the microtask queue drains) before the next event runs. Nothing in the code
 * under test may read a real clock or set a real timer: it gets its time, timers and randomness here.
 */
export class World {
  now = 0;
  private readonly heap: Scheduled[] = [];
  private seq = 0;

  /** Run `run` at true time `at`, on `owner`'s behalf (held while it is frozen, dropped once it is dead). */
  schedule(at: number, owner: Owner | undefined, run: () => void): { cancel(): void } {
    const event: Scheduled = { at: Math.max(instant(at), this.now), seq: this.seq++, owner, run, cancelled: false };
    push(this.heap, event);
    return {
      cancel: () => {
        event.cancelled = true;
      },
    };
  }

  /**
   * Let a frozen owner run again: what came due meanwhile runs now, in the order it came due, even if the owner
   * is frozen again at once (a thawed process handles the I/O that waited for it before it can be frozen again).
   */
  thaw(owner: Owner): void {
    owner.frozen = false;
    for (const event of owner.deferred.splice(0)) {
      this.schedule(this.now, undefined, () => {
        if (!event.cancelled && !owner.dead) event.run();
      });
    }
  }

  /** Run events in time order until none is left before `until`, or `stop` says so. */
  async run(until: number, stop: () => boolean = () => false): Promise<void> {
    while (this.heap.length > 0 && !stop()) {
      const event = pop(this.heap) as Scheduled;
      if (event.at > until) {
        push(this.heap, event);
        break;
      }
      if (event.cancelled || event.owner?.dead) continue;
      this.now = event.at;
      if (event.owner?.frozen) {
        event.owner.deferred.push(event);
        continue;
      }
      event.run();
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  /**
   * An instance's view of the world: its wall clock `skewMs` off the true time, its own monotonic
   * clock, timers that are its events, and names from its own seeded randomness.
   */
  runtime(owner: Owner, skewMs: number, random: () => number): Runtime {
    const monoOffset = 1000 + Math.floor(random() * 1e6);
    return {
      epoch: () => epochMs(EPOCH_ZERO + this.now + skewMs),
      mono: () => monoMs(this.now + monoOffset),
      sleep: (ms, signal) =>
        new Promise<void>((resolve, reject) => {
          if (signal?.aborted) return reject(abortError());
          const onAbort = () => {
            timer.cancel();
            reject(abortError());
          };
          const timer = this.schedule(this.now + Math.max(0, ms), owner, () => {
            signal?.removeEventListener('abort', onAbort);
            resolve();
          });
          signal?.addEventListener('abort', onAbort, { once: true });
        }),
      instance: owner.name,
      id: () => Array.from({ length: 12 }, () => ID_CHARACTERS[Math.floor(random() * 64)]).join(''),
    };
  }

  /** True time as an epoch, for what the world itself dates (the table's TTL). */
  epoch(): number {
    return EPOCH_ZERO + this.now;
  }
}

const ID_CHARACTERS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

function abortError(): Error {
  return Object.assign(new Error('aborted'), { name: 'AbortError' });
}

function before(a: Scheduled, b: Scheduled): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}

function push(heap: Scheduled[], event: Scheduled): void {
  heap.push(event);
  let index = heap.length - 1;
  while (index > 0) {
    const parent = (index - 1) >> 1;
    if (!before(heap[index] as Scheduled, heap[parent] as Scheduled)) break;
    [heap[index], heap[parent]] = [heap[parent] as Scheduled, heap[index] as Scheduled];
    index = parent;
  }
}

function pop(heap: Scheduled[]): Scheduled | undefined {
  const top = heap[0];
  const last = heap.pop();
  if (heap.length > 0 && last) {
    heap[0] = last;
    let index = 0;
    for (;;) {
      const [left, right] = [2 * index + 1, 2 * index + 2];
      let smallest = index;
      if (left < heap.length && before(heap[left] as Scheduled, heap[smallest] as Scheduled)) smallest = left;
      if (right < heap.length && before(heap[right] as Scheduled, heap[smallest] as Scheduled)) smallest = right;
      if (smallest === index) break;
      [heap[index], heap[smallest]] = [heap[smallest] as Scheduled, heap[index] as Scheduled];
      index = smallest;
    }
  }
  return top;
}
