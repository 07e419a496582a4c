/** Order statistics of one series of timings, in milliseconds. */
export interface Summary {
  readonly n: number;
  readonly p50: number;
  readonly p99: number;
  readonly min: number;
  readonly max: number;
}

/** Nearest-rank percentiles: every figure reported is a time that was really observed. */
export function summarize(samples: readonly number[]): Summary {
  if (samples.length === 0) throw new Error('no samples to summarize');
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = (p: number): number => sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)] as number;
  return { n: sorted.length, p50: rank(0.5), p99: rank(0.99), min: sorted[0] as number, max: sorted[sorted.length - 1] as number };
}

/** Milliseconds with a precision that suits their size: 0.042, 0.61, 12.3, 145. */
export function ms(value: number): string {
  if (value < 1) return value.toFixed(3);
  if (value < 10) return value.toFixed(2);
  if (value < 100) return value.toFixed(1);
  return value.toFixed(0);
}
