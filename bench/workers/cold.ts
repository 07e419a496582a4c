// One cold start: a fresh process that loads its code and does one exchange, then ends. Nothing here
// loads node:https or the bundle before the timers start.
import { type BundleHandler, handlerCall, httpsFloor } from '../requests';
import { fail, finish, setting } from './worker-io';

// performance.now() counts from performance.timeOrigin, the start of this process.
const bootMs = performance.now();

/** `bundle`: require it, one handler call. `floor`: require node:https, one POST. `require`: only load BENCH_BUNDLE. */
export type ColdMode = 'bundle' | 'floor' | 'require';

export interface ColdResult {
  /** Process start to this script's first line: Node's own startup. */
  bootMs: number;
  /** require() of the bundle (or of node:https for the floor). */
  requireMs: number;
  /** The first exchange: TCP connect, TLS handshake, request, answer. */
  firstExchangeMs: number;
  /** Process start to the first exchange done. */
  totalMs: number;
}

async function main(): Promise<void> {
  const mode = setting('BENCH_MODE') as ColdMode;
  const loadStarted = performance.now();
  let exchange = async (): Promise<void> => undefined;
  if (mode === 'floor') {
    exchange = httpsFloor(require('node:https'), setting('BENCH_TOKEN_URL'));
  } else if (mode === 'bundle') {
    const { handler } = require(setting('BENCH_BUNDLE')) as { handler: BundleHandler };
    exchange = handlerCall(handler, setting('BENCH_TOKEN_URL'));
  } else {
    require(setting('BENCH_BUNDLE'));
  }
  const loaded = performance.now();
  await exchange();
  const done = performance.now();
  const result: ColdResult = { bootMs, requireMs: loaded - loadStarted, firstExchangeMs: done - loaded, totalMs: done };
  finish(result);
}

main().catch(fail);
