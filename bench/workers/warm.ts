// One warm Lambda instance: code loaded once, then many invocations, timed one by one.
import * as https from 'node:https';
import { type BundleHandler, type Call, fetchFloor, handlerCall, httpsFloor } from '../requests';
import { measure } from './measure';
import { fail, finish, setting } from './worker-io';

/**
 * `floors`: the two library-free clients alone (their memory without a bundle). `interleaved`: both
 * floors and the handler. `handler`: the handler alone (for its memory). `cache`: cache hits with TOKEN_CACHE=on.
 */
export type WarmMode = 'floors' | 'interleaved' | 'handler' | 'cache';

export interface WarmResult {
  /** Milliseconds per call, by subject. */
  samples: Record<string, number[]>;
  rssBytes: number;
  heapUsedBytes: number;
}

async function main(): Promise<void> {
  const tokenUrl = setting('BENCH_TOKEN_URL');
  const mode = setting('BENCH_MODE') as WarmMode;
  const handler = (): BundleHandler => (require(setting('BENCH_BUNDLE')) as { handler: BundleHandler }).handler;

  let subjects: Record<string, Call>;
  if (mode === 'floors') {
    subjects = { floorHttps: httpsFloor(https, tokenUrl), floorFetch: fetchFloor(tokenUrl) };
  } else if (mode === 'interleaved') {
    subjects = { floorFetch: fetchFloor(tokenUrl), floorHttps: httpsFloor(https, tokenUrl), handler: handlerCall(handler(), tokenUrl) };
  } else if (mode === 'cache') {
    const cached = handler();
    await handlerCall(cached, tokenUrl, 'miss')();
    subjects = { cacheHit: handlerCall(cached, tokenUrl, 'hit') };
  } else {
    subjects = { handler: handlerCall(handler(), tokenUrl) };
  }

  await measure(subjects, Number(setting('BENCH_WARMUP')));
  const samples = await measure(subjects, Number(setting('BENCH_ITERATIONS')));
  const { rss, heapUsed } = process.memoryUsage();
  const result: WarmResult = { samples, rssBytes: rss, heapUsedBytes: heapUsed };
  finish(result);
}

main().catch(fail);
