// A measured process, bundled to plain JavaScript: BENCH_MODE=warm times BENCH_SUBJECTS call by call, cold one first call.
import { once } from 'node:events';
import { writeSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import type * as Https from 'node:https';
import { localLambdaContext } from '../local/lambda-context';

// performance.now() counts from the start of this process: this is Node's own start-up.
const bootMs = performance.now();
export type WarmResult = { samples: Record<string, number[]>; rssBytes: number; heapUsedBytes: number };
/** Milliseconds since process start, or of one phase. */
export type ColdResult = Record<'bootMs' | 'loadMs' | 'firstMs' | 'totalMs', number>;
/** One call of a subject; one that resolves to `false` took another path than the one it stands for, and is left out. */
type Call = () => Promise<unknown>;
const env = (name: string): string => process.env[name] ?? '';

// A timing of a failed call would be worthless: every call must have produced the token, from the cache expected.
function expectAnswer(body = 'null', status?: number, cache?: unknown, expected = cache): void {
  const token = (JSON.parse(body) as { access_token?: unknown } | null)?.access_token;
  if (status !== 200 || token !== env('BENCH_TOKEN') || cache !== expected) throw new Error(`answered ${status}, cache ${String(cache)}`);
}
// A subject made ready: its code loaded; for `cache` (TOKEN_CACHE=on) a miss made, so that every call is a hit.
async function subject(name: string): Promise<Call> {
  const event = JSON.parse(env('BENCH_EVENT')) as { body: string };
  if (name === 'handler' || name === 'cache') {
    type Answer = { statusCode?: number; headers?: Record<string, unknown>; body?: string };
    const { handler } = require(env('BENCH_BUNDLE')) as { handler: (event: unknown, context: unknown) => Promise<Answer> };
    const context = localLambdaContext('bench-invocation', 'token-exchange');
    const call = (cache?: string) => async () => {
      const answer = await handler(event, context);
      expectAnswer(answer.body, answer.statusCode, cache && answer.headers?.['x-token-cache'], cache);
    };
    return name === 'handler' ? call(env('BENCH_EXPECT_CACHE')) : call('miss')().then(() => call('hit'));
  }
  // The baselines: the request simple-oauth2 sends, with `fetch` (the target's) or node:https with a keep-alive Agent.
  const { client_id: id, client_secret: secret, access_token_url: url = '' } = JSON.parse(event.body) as Record<string, string>;
  const [body, authorization] = ['grant_type=client_credentials', `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`];
  const [accept, type, agent] = ['application/json', 'application/x-www-form-urlencoded', 'token-exchange-service'];
  const headers = { authorization, accept, 'content-type': type, 'user-agent': agent };
  if (name === 'fetch') return async () => expectAnswer(await fetch(url, { method: 'POST', headers, body }).then((r) => r.text()), 200);
  const https = require('node:https') as typeof Https;
  const options = { method: 'POST', agent: new https.Agent({ keepAlive: true }), headers };
  return async () => {
    const [response] = (await once(https.request(url, options).end(body), 'response')) as [IncomingMessage];
    expectAnswer(Buffer.concat(await response.toArray()).toString('utf8'), response.statusCode);
  };
}
/** Rounds of one call of each subject, in a seeded shuffle so that drift and GC fall on all alike and runs are alike. */
export async function measure(subjects: Record<string, Call>, rounds: number): Promise<Record<string, number[]>> {
  const samples: Record<string, number[]> = Object.fromEntries(Object.keys(subjects).map((name) => [name, []]));
  let seed = 0x5eed; // Park-Miller: small, exact in doubles, and the same order on every run
  for (let round = 0; round < rounds; round++) {
    const order = Object.keys(subjects).map((name) => ({ name, key: (seed = (seed * 16807) % 2147483647) }));
    for (const { name } of order.sort((a, b) => a.key - b.key)) {
      const started = performance.now();
      if ((await subjects[name]?.()) !== false) samples[name]?.push(performance.now() - started);
      // Work a call leaves behind runs untimed, as the Lambda runtime answers before it runs.
      await new Promise((resolve) => setImmediate(resolve));
    }
  }
  return samples;
}
async function warm(): Promise<WarmResult> {
  const subjects: Record<string, Call> = {};
  for (const name of env('BENCH_SUBJECTS').split(',')) subjects[name] = await subject(name);
  await measure(subjects, Number(env('BENCH_WARMUP')));
  const samples = await measure(subjects, Number(env('BENCH_ROUNDS')));
  return { samples, rssBytes: process.memoryUsage().rss, heapUsedBytes: process.memoryUsage().heapUsed };
}
async function cold(): Promise<ColdResult> {
  const loadStarted = performance.now();
  const [call, loaded] = [await subject(env('BENCH_SUBJECT')), performance.now()];
  const done = await call().then(() => performance.now());
  return { bootMs, loadMs: loaded - loadStarted, firstMs: done - loaded, totalMs: done };
}
// The result goes to fd 3 (stdout carries the handler's logs); the process ends at once, as kept-alive sockets would hold it
// open. A failure says why, never with a response body: it could hold a token.
if (require.main === module) {
  const done = (result: unknown) => (writeSync(3, JSON.stringify(result)), process.exit(0));
  (env('BENCH_MODE') === 'cold' ? cold() : warm()).then(done, (error: unknown) => {
    process.stderr.write(`bench worker failed: ${String((error as Error)?.message ?? error)}\n`);
    process.exit(1);
  });
}
