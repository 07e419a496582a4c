// One warm Lambda instance: everything loaded once, then many calls timed one by one. The subjects
// named in BENCH_SUBJECTS share this process and are interleaved, so they are compared fairly.
import * as https from 'node:https';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { type Call, fail, fetchCall, handlerCall, httpsCall, report, setting } from './calls';

export interface WarmResult {
  /** Milliseconds per call, by subject. */
  samples: Record<string, number[]>;
  rssBytes: number;
  heapUsedBytes: number;
}

const SUBJECTS: Record<string, () => Promise<Call>> = {
  fetch: async () => fetchCall(),
  https: async () => httpsCall(https),
  handler: async () => handlerCall(),
  // With TOKEN_CACHE=on: one miss fills the cache, then every call is a hit.
  cache: async () => {
    await handlerCall('miss')();
    return handlerCall('hit');
  },
};

/**
 * Each round calls every subject once, in an order shuffled afresh (seeded, so runs are alike): drift,
 * GC and whichever call came before fall on all alike. One untimed turn of the event loop between
 * calls keeps work a call leaves behind out of the next call's time, as the Lambda runtime sends a
 * response before that work runs.
 */
async function measure(subjects: Record<string, Call>, rounds: number): Promise<Record<string, number[]>> {
  const names = Object.keys(subjects);
  const samples: Record<string, number[]> = Object.fromEntries(names.map((name) => [name, []]));
  let seed = 0x5eed; // Park-Miller: small, exact in doubles, and the same order on every run
  const random = (): number => (seed = (seed * 16807) % 2147483647);
  for (let round = 0; round < rounds; round++) {
    const order = names.map((name) => ({ name, key: random() })).sort((a, b) => a.key - b.key);
    for (const { name } of order) {
      const call = subjects[name] as Call;
      const started = performance.now();
      await call();
      samples[name]?.push(performance.now() - started);
      await nextTurn();
    }
  }
  return samples;
}

async function main(): Promise<void> {
  const subjects: Record<string, Call> = {};
  for (const name of setting('BENCH_SUBJECTS').split(',')) {
    const make = SUBJECTS[name];
    if (!make) throw new Error(`unknown subject ${name}`);
    subjects[name] = await make();
  }
  await measure(subjects, Number(setting('BENCH_WARMUP')));
  const samples = await measure(subjects, Number(setting('BENCH_ROUNDS')));
  const { rss, heapUsed } = process.memoryUsage();
  report({ samples, rssBytes: rss, heapUsedBytes: heapUsed } satisfies WarmResult);
}

main().catch(fail);
