// `npm run bench`: measures the token exchange against a local HTTPS token server and writes
// docs/BENCHMARKS.md. Only 127.0.0.1 is ever contacted.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildLambdaBundle, buildLoadProbes, buildWorkers } from './bundle';
import { runNode } from './processes';
import { type BenchResults, type ColdSeries, machine, renderReport, verdictLines } from './report';
import { type Summary, summarize } from './stats';
import { createLocalCert } from './tls-cert';
import { startTokenServer } from './token-server';
import type { ColdResult } from './workers/cold';
import type { WarmResult } from './workers/warm';

// Warm timings keep falling for about 4000 rounds (JIT tiering, heap sizing) and are flat after.
const WARMUP_ROUNDS = 5000;
const WARM_ROUNDS = 2000;
const COLD_ROUNDS = 40;
const LOAD_ROUNDS = 20;
const REPORT_PATH = join(__dirname, '..', 'docs', 'BENCHMARKS.md');

// Holds the key and certificate while the bench runs; removed however it ends.
const dir = mkdtempSync(join(tmpdir(), 'token-bench-'));

async function main(): Promise<void> {
  const startedAt = new Date();
  const clock = performance.now();
  const loadAtStart = loadavg();
  try {
    const cert = createLocalCert(dir);
    const [bundle, workers, probes] = await Promise.all([buildLambdaBundle(dir), buildWorkers(dir), buildLoadProbes(dir)]);
    const server = await startTokenServer(cert);
    try {
      const env = {
        PATH: process.env.PATH ?? '',
        NODE_EXTRA_CA_CERTS: cert.certPath,
        TOKEN_URL_ALLOWLIST: server.origin,
        POWERTOOLS_METRICS_NAMESPACE: 'TokenExchange',
        BENCH_BUNDLE: bundle.path,
        BENCH_TOKEN_URL: server.tokenUrl,
        BENCH_WARMUP: String(WARMUP_ROUNDS),
        BENCH_ITERATIONS: String(WARM_ROUNDS),
      };
      const warm = async (mode: string, extra: Record<string, string> = {}): Promise<WarmResult> =>
        (await runNode([workers.warm], { ...env, ...extra, BENCH_MODE: mode })).result as WarmResult;

      log('warm: node:https and fetch floors, interleaved');
      const floors = await warm('floors');
      log('warm: both floors and the handler, interleaved');
      const interleaved = await warm('interleaved');
      log('warm: handler alone');
      const alone = await warm('handler');
      log('warm: cache hits with TOKEN_CACHE=on');
      const cache = await warm('cache', { TOKEN_CACHE: 'on' });
      log('warm: the handler layer by layer');
      const phases = (await runNode([workers.phases], env)).result as Pick<WarmResult, 'samples'>;

      log(`cold: ${COLD_ROUNDS} rounds of node -e 0, a fresh floor, a fresh bundle`);
      const cold = await rotate(COLD_ROUNDS, {
        bare: () => runNode(['-e', '0'], env),
        floor: () => runNode([workers.cold], { ...env, BENCH_MODE: 'floor' }),
        bundle: () => runNode([workers.cold], { ...env, BENCH_MODE: 'bundle' }),
      });
      log(`cold: ${LOAD_ROUNDS} rounds of require() of the bundle's parts`);
      const loadRuns = await rotate(
        LOAD_ROUNDS,
        Object.fromEntries(
          Object.entries({ 'The whole bundle': bundle.path, ...probes }).map(([name, path]) => [
            name,
            () => runNode([workers.cold], { ...env, BENCH_MODE: 'require', BENCH_BUNDLE: path }),
          ]),
        ),
      );

      const results: BenchResults = {
        date: startedAt.toISOString(),
        machine: machine(),
        loadAverage: { start: loadAtStart, end: loadavg() },
        settings: { warmupRounds: WARMUP_ROUNDS, warmRounds: WARM_ROUNDS, coldRounds: COLD_ROUNDS, loadRounds: LOAD_ROUNDS },
        bundle,
        floors: { https: summarize(series(floors, 'floorHttps')), fetch: summarize(series(floors, 'floorFetch')) },
        warm: {
          floorFetch: summarize(series(interleaved, 'floorFetch')),
          floorHttps: summarize(series(interleaved, 'floorHttps')),
          handler: summarize(series(interleaved, 'handler')),
          handlerAlone: summarize(series(alone, 'handler')),
          cacheHit: summarize(series(cache, 'cacheHit')),
          handlerMemory: { rssBytes: alone.rssBytes, heapUsedBytes: alone.heapUsedBytes },
          interleavedMemory: { rssBytes: interleaved.rssBytes, heapUsedBytes: interleaved.heapUsedBytes },
          floorsMemory: { rssBytes: floors.rssBytes, heapUsedBytes: floors.heapUsedBytes },
        },
        phases: Object.fromEntries(Object.entries(phases.samples).map(([name, samples]) => [name, summarize(samples)])),
        cold: {
          bareWall: summarize(cold.bare.map((run) => run.wallMs)),
          floor: coldSeries(cold.floor),
          bundle: coldSeries(cold.bundle),
        },
        loads: Object.entries(loadRuns).map(([name, runs]) => [name, summarize(runs.map((run) => (run.result as ColdResult).requireMs))]),
        server: { answered: server.answered(), connections: server.connections() },
        durationSeconds: (performance.now() - clock) / 1000,
      };
      mkdirSync(join(REPORT_PATH, '..'), { recursive: true });
      writeFileSync(REPORT_PATH, renderReport(results));
      for (const line of verdictLines(results)) log(line);
      log(`wrote ${REPORT_PATH} in ${results.durationSeconds.toFixed(0)} s`);
    } finally {
      await server.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Run every kind once per round, starting one further along each round, so that whatever the
 * machine does meanwhile falls on all kinds alike. One unrecorded round first fills the file cache.
 */
async function rotate<K extends string, T>(rounds: number, kinds: Record<K, () => Promise<T>>): Promise<Record<K, T[]>> {
  const names = Object.keys(kinds) as K[];
  const runs = Object.fromEntries(names.map((name) => [name, []])) as unknown as Record<K, T[]>;
  for (let round = -1; round < rounds; round++) {
    for (let offset = 0; offset < names.length; offset++) {
      const name = names[(round + 1 + offset) % names.length] as K;
      const run = await kinds[name]();
      if (round >= 0) runs[name].push(run);
    }
  }
  return runs;
}

function coldSeries(runs: readonly { result: unknown; wallMs: number }[]): ColdSeries {
  const results = runs.map((run) => run.result as ColdResult);
  const of = (pick: (result: ColdResult) => number): Summary => summarize(results.map(pick));
  return {
    wall: summarize(runs.map((run) => run.wallMs)),
    boot: of((r) => r.bootMs),
    require: of((r) => r.requireMs),
    firstExchange: of((r) => r.firstExchangeMs),
    total: of((r) => r.totalMs),
  };
}

function series(result: Pick<WarmResult, 'samples'>, name: string): number[] {
  const samples = result.samples[name];
  if (!samples) throw new Error(`no samples for ${name}`);
  return samples;
}

function log(line: string): void {
  process.stdout.write(`[bench] ${line}\n`);
}

// Bounded: should anything hang, stop rather than run on (each child also has its own time limit).
setTimeout(() => {
  process.stderr.write('[bench] gave up after 4 minutes\n');
  rmSync(dir, { recursive: true, force: true });
  process.exit(1);
}, 240_000).unref();

main().catch((error: unknown) => {
  process.stderr.write(`[bench] failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
