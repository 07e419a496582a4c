// A measured process, run as plain JavaScript. BENCH_MODE=warm: the subjects of BENCH_SUBJECTS timed call by call
// after a warm-up; BENCH_MODE=cold: one first call, nothing loaded before the clock reads below. The handler is
// invoked as the Lambda runtime invokes it; the baselines send BENCH_EVENT's request as simple-oauth2 does.
import { writeSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import type * as Https from 'node:https';
import { localLambdaContext } from '../local/lambda-context';

// performance.now() counts from the start of this process: this is Node's own start-up.
const bootMs = performance.now();

/** Milliseconds per call by subject, and the process's memory after its measured rounds. */
export type WarmResult = { samples: Record<string, number[]>; rssBytes: number; heapUsedBytes: number };
/** Milliseconds from process start to this script, to load the code (of which each AWS SDK client), to the first answer, in all. */
export type ColdResult = { bootMs: number; loadMs: number; sdkMs: Record<string, number>; firstMs: number; totalMs: number };
type Call = () => Promise<unknown>;
const env = (name: string): string => process.env[name] ?? '';

// A timing of a failed call would be worthless: every call must have produced the token, from the cache expected.
function expectAnswer(body = 'null', status?: number, cache?: unknown, expected = cache): void {
  const token = (JSON.parse(body) as { access_token?: unknown } | null)?.access_token;
  if (status !== 200 || token !== env('BENCH_TOKEN') || cache !== expected) throw new Error(`answered ${status}, cache ${String(cache)}`);
}

/** A subject's calls, made ready: its code loaded; for `cache` (TOKEN_CACHE=on) a miss made, so that every call is a hit. */
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
  const { client_id: id, client_secret: secret, access_token_url: url = '' } = JSON.parse(event.body) as Record<string, string>;
  const [body, authorization] = ['grant_type=client_credentials', `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`];
  const [accept, type, agent] = ['application/json', 'application/x-www-form-urlencoded', 'token-exchange-service'];
  const headers = { authorization, accept, 'content-type': type, 'user-agent': agent };
  // The target's baseline: `fetch`, whose global dispatcher keeps connections alive.
  if (name === 'fetch') return async () => expectAnswer(await fetch(url, { method: 'POST', headers, body }).then((r) => r.text()), 200);
  // The reference: node:https with one keep-alive Agent, the answer read and parsed.
  const https = require('node:https') as typeof Https;
  const { hostname, port, pathname: path } = new URL(url);
  const options = { hostname, port, path, method: 'POST', agent: new https.Agent({ keepAlive: true }), headers };
  return async () => {
    const response = await new Promise<IncomingMessage>(
      (resolve, reject) => void https.request(options, resolve).on('error', reject).end(body),
    );
    const chunks: Buffer[] = [];
    for await (const chunk of response) chunks.push(chunk as Buffer);
    expectAnswer(Buffer.concat(chunks).toString('utf8'), response.statusCode);
  };
}

/**
 * Each round calls every subject once, in an order shuffled afresh (seeded, so runs are alike): drift, GC and
 * whichever call came before fall on all alike. An untimed turn of the event loop between calls keeps work a
 * call leaves behind out of the next call's time, as the Lambda runtime answers before that work runs.
 */
export async function measure(subjects: Record<string, Call>, rounds: number): Promise<Record<string, number[]>> {
  const samples: Record<string, number[]> = Object.fromEntries(Object.keys(subjects).map((name) => [name, []]));
  let seed = 0x5eed; // Park-Miller: small, exact in doubles, and the same order on every run
  for (let round = 0; round < rounds; round++) {
    const order = Object.keys(subjects).map((name) => ({ name, key: (seed = (seed * 16807) % 2147483647) }));
    for (const { name } of order.sort((a, b) => a.key - b.key)) {
      const started = performance.now();
      await subjects[name]?.();
      samples[name]?.push(performance.now() - started);
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
  // Time the first require() of each SDK client the bundle loads: the shared tier's, and the pepper's.
  const [sdkMs, loader] = [{} as Record<string, number>, require('node:module') as { _load: (...args: unknown[]) => unknown }];
  const load = loader._load;
  loader._load = function (this: unknown, request, ...rest) {
    const started = performance.now();
    const loaded = load.call(this, request, ...rest);
    if (typeof request === 'string' && request.startsWith('@aws-sdk/client-')) sdkMs[request] ??= performance.now() - started;
    return loaded;
  };
  const loadStarted = performance.now();
  const call = await subject(env('BENCH_SUBJECT'));
  const loaded = performance.now();
  await call();
  const done = performance.now();
  return { bootMs, loadMs: loaded - loadStarted, sdkMs, firstMs: done - loaded, totalMs: done };
}

// The result goes to fd 3 (stdout carries the handler's logs); the process ends at once, as kept-alive sockets
// would hold it open. A failure says why, never with a response body: it could hold a token.
if (require.main === module) {
  (env('BENCH_MODE') === 'cold' ? cold() : warm()).then(
    (result) => {
      writeSync(3, JSON.stringify(result));
      process.exit(0);
    },
    (error: unknown) => {
      process.stderr.write(`bench worker failed: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exit(1);
    },
  );
}
