// The figures' arithmetic and markdown, shared by the runner and the fleet scenario.

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
