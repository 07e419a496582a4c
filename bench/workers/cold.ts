// One cold start: a fresh process loads its code and makes one exchange on a new TLS connection,
// then ends. Nothing loads node:https or the bundle before the clock reads below.
import { type Call, fail, handlerCall, httpsCall, report, setting } from './calls';

// performance.now() counts from performance.timeOrigin, the start of this process.
const bootMs = performance.now();

export interface ColdResult {
  /** Process start to this script's first line: Node's own start-up. */
  bootMs: number;
  /** require() of the bundle (of node:https for the baseline). */
  loadMs: number;
  /** TCP connect, TLS handshake, request, answer. */
  firstExchangeMs: number;
  /** Process start to the first exchange done. */
  totalMs: number;
}

async function main(): Promise<void> {
  const loadStarted = performance.now();
  const exchange: Call = setting('BENCH_SUBJECT') === 'handler' ? handlerCall() : httpsCall(require('node:https'));
  const loaded = performance.now();
  await exchange();
  const done = performance.now();
  report({ bootMs, loadMs: loaded - loadStarted, firstExchangeMs: done - loaded, totalMs: done } satisfies ColdResult);
}

main().catch(fail);
