// Shared by the runner and the fleet scenario: running a measured process, the figures' arithmetic
// and their markdown.
import { spawn } from 'node:child_process';

/** Run `node args` in a fresh process with exactly `env`; its result comes back as JSON on fd 3. */
export function runNode(node: string, args: string[], env: Record<string, string>): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const child = spawn(node, args, { env, stdio: ['ignore', 'ignore', 'pipe', 'pipe'], timeout: 120_000 });
    let result = '';
    let errors = '';
    child.stdio[3]?.on('data', (chunk: Buffer) => (result += chunk.toString('utf8')));
    child.stderr?.on('data', (chunk: Buffer) => (errors += chunk.toString('utf8')));
    child.on('error', reject);
    child.on('close', (code, signal) =>
      code === 0
        ? resolve(JSON.parse(result))
        : reject(new Error(`${args.join(' ').slice(0, 80)} ended with ${code ?? signal}: ${errors.trim()}`)),
    );
  });
}

export interface Summary {
  n: number;
  p50: number;
  p95: number;
  p99: number;
}

/** Nearest-rank percentiles: each figure is a time really observed. */
export function summarize(samples: readonly number[] = []): Summary {
  if (samples.length === 0) throw new Error('no samples');
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = (p: number): number => sorted[Math.ceil(p * sorted.length) - 1] as number;
  return { n: sorted.length, p50: rank(0.5), p95: rank(0.95), p99: rank(0.99) };
}

export const ms = (value: number): string => value.toFixed(value < 1 ? 3 : value < 10 ? 2 : 1);
export const row = (...cells: (string | number)[]): string => `| ${cells.join(' | ')} |`;
/** A markdown table; every column after the first right-aligned when `numeric`. */
export const table = (head: string[], rows: string[], numeric = true): string =>
  [row(...head), row(...head.map((_, i) => (i > 0 && numeric ? '---:' : '---'))), ...rows].join('\n');
