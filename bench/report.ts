// What the runner and the scenarios share: the measured processes, the token they get, the figures' markdown.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import type { Readable } from 'node:stream';
import { text } from 'node:stream/consumers';

// Taken at load: the fleet silences the process's own streams while the instances run in it.
const writeStderr = process.stderr.write.bind(process.stderr);
const benchStarted = performance.now();

/** One line on stderr as a scenario starts, with the minutes since the bench began: the run is long. */
export function progress(scenario: string): void {
  writeStderr(`bench: ${((performance.now() - benchStarted) / 60_000).toFixed(1)} min: ${scenario}\n`);
}

/** What every token server of the bench answers; every measured call must come back with it. */
export const BENCH_TOKEN = 'bench-access-token';
/** The workers' Node, directory, code, environment and token URL; the targets table (with no `pass`, a figure has no target). */
export type Bench = Record<'node' | 'dir' | 'bundlePath' | 'workerPath' | 'tokenUrl', string> & {
  readonly env: Record<string, string>;
  readonly verdict: (measure: string, measured: string, target: string, pass?: boolean) => void;
  readonly atMost: (measure: string, measured: string, value: number, limit: number, unit?: string) => void;
};
/** Run the worker in a fresh process with exactly the bench's `env` and `extra`; its result comes back as JSON on fd 3. */
export async function runWorker(bench: Bench, extra: Record<string, string>): Promise<unknown> {
  const env = { ...bench.env, ...extra };
  const child = spawn(bench.node, [bench.workerPath], { env, stdio: ['ignore', 'ignore', 'pipe', 'pipe'], timeout: 120_000 });
  const [out, err] = [text(child.stdio[3] as Readable), text(child.stderr as Readable)];
  const [code, signal] = (await once(child, 'close')) as [number | null, string | null];
  if (code !== 0) throw new Error(`worker: ${code ?? signal} ${await err}`);
  return JSON.parse(await out);
}
/** Nearest-rank percentiles: each figure is a time really observed. */
export function summarize(samples: readonly number[] = []) {
  if (samples.length === 0) throw new Error('no samples');
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = (p: number): number => sorted[Math.ceil(p * sorted.length) - 1] as number;
  return { n: sorted.length, p50: rank(0.5), p95: rank(0.95), p99: rank(0.99), max: rank(1) };
}

export const ms = (value: number): string => value.toFixed(value < 1 ? 3 : value < 10 ? 2 : 1);
export const ratio = (a: number, b: number): string => `${(a / b).toFixed(2)}x (${ms(a)} / ${ms(b)} ms)`;
export const row = (...cells: (string | number)[]): string => `| ${cells.join(' | ')} |`;
export const table = (head: string[], rows: string[], numeric = true): string =>
  [row(...head), row(...head.map((_, i) => (i > 0 && numeric ? '---:' : '---'))), ...rows].join('\n');
export const section = (heading: string, what: string, head: string[], rows: string[]) => `${heading}\n\n${what}:\n\n${table(head, rows)}`;
export const tally = (values: string[]): string =>
  [...new Set(values)].map((name) => `${values.filter((value) => value === name).length} ${name}`).join(', ') || 'none';
