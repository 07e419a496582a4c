// What the runner and the fleet share: measured processes, the request they send, the figures' markdown.
import { spawn } from 'node:child_process';
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { toApiGatewayEvent } from '../local/api-gateway-event';
import type { ColdResult } from './worker';

/** What every token server of the bench answers; every measured call must come back with it. */
export const BENCH_TOKEN = 'bench-access-token';
/**
 * What a scenario is given: the measured processes' Node; the run's directory (under node_modules, so that the
 * bundle's external `@aws-sdk/*` resolves there as in Lambda to the runtime's copy) and what is built in it; the
 * workers' environment and token URL (the HTTPS token server); the targets table (`pass` undefined: reported).
 */
export type Bench = Record<'node' | 'dir' | 'bundlePath' | 'workerPath' | 'tokenUrl', string> & {
  readonly env: Record<string, string>;
  readonly verdict: (measure: string, measured: string, target: string, pass?: boolean) => void;
};

/** Run `node args` in a fresh process with exactly `env`; its result comes back as JSON on fd 3. */
export function runNode(node: string, args: string[], env: Record<string, string>): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const child = spawn(node, args, { env, stdio: ['ignore', 'ignore', 'pipe', 'pipe'], timeout: 120_000 });
    let [result, errors] = ['', ''];
    child.stdio[3]?.on('data', (chunk: Buffer) => (result += chunk.toString('utf8')));
    child.stderr?.on('data', (chunk: Buffer) => (errors += chunk.toString('utf8')));
    child.on('error', reject);
    child.on('close', (code, signal) =>
      code === 0 ? resolve(JSON.parse(result)) : reject(new Error(`worker: ${code ?? signal} ${errors}`)),
    );
  });
}

/** `rounds` cold starts of each variant (a round's worker environment) in rotating order, after an unrecorded round that fills the file cache. */
export async function coldStarts(bench: Bench, variants: ((round: number) => Record<string, string>)[], rounds: number) {
  const results = variants.map(() => [] as ColdResult[]);
  for (let round = -1; round < rounds; round++) {
    for (let offset = 0; offset < variants.length; offset++) {
      const index = (round + 1 + offset) % variants.length;
      const result = (await runNode(bench.node, [bench.workerPath], { ...variants[index]?.(round), BENCH_MODE: 'cold' })) as ColdResult;
      if (round >= 0) results[index]?.push(result);
    }
  }
  return results;
}

/** A token request with a JSON body as API Gateway hands it to the function (payload 2.0), built as `npm start` builds one. */
export const tokenEvent = (body: Record<string, string>): APIGatewayProxyEventV2 =>
  toApiGatewayEvent(
    {
      method: 'POST',
      target: '/v1/oauth/token',
      rawHeaders: ['content-type', 'application/json'],
      body: Buffer.from(JSON.stringify(body)),
    },
    { routeKey: 'POST /v1/oauth/token', requestId: 'bench' },
  );

/** Nearest-rank percentiles: each figure is a time really observed. */
export function summarize(samples: readonly number[] = []) {
  if (samples.length === 0) throw new Error('no samples');
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = (p: number): number => sorted[Math.ceil(p * sorted.length) - 1] as number;
  return { n: sorted.length, p50: rank(0.5), p95: rank(0.95), p99: rank(0.99), max: rank(1) };
}

export const ms = (value: number): string => value.toFixed(value < 1 ? 3 : value < 10 ? 2 : 1);
/** `a / b`, with both in milliseconds. */
export const ratio = (a: number, b: number): string => `${(a / b).toFixed(2)}x (${ms(a)} / ${ms(b)} ms)`;
export const row = (...cells: (string | number)[]): string => `| ${cells.join(' | ')} |`;
/** A markdown table; every column after the first right-aligned when `numeric`. */
export const table = (head: string[], rows: string[], numeric = true): string =>
  [row(...head), row(...head.map((_, i) => (i > 0 && numeric ? '---:' : '---'))), ...rows].join('\n');
