import { existsSync, readFileSync } from 'node:fs';
import { availableParallelism, cpus, release, type } from 'node:os';
import { join } from 'node:path';
import type { BundleFacts } from './bundle';
import { ms, type Summary } from './stats';
import { PHASE_PARTS, PHASE_STEPS } from './workers/phase-names';

export interface ColdSeries {
  /** spawn() to exit, seen from the bench. */
  wall: Summary;
  boot: Summary;
  require: Summary;
  firstExchange: Summary;
  total: Summary;
}

interface Memory {
  rssBytes: number;
  heapUsedBytes: number;
}

export interface BenchResults {
  date: string;
  machine: { node: string; cpu: string; cores: number; os: string };
  loadAverage: { start: number[]; end: number[] };
  settings: { warmupRounds: number; warmRounds: number; coldRounds: number; loadRounds: number };
  bundle: BundleFacts;
  floors: { https: Summary; fetch: Summary };
  warm: {
    /** The issue's floor: one keep-alive fetch, no library. */
    floorFetch: Summary;
    /** A stricter reference: node:https with a keep-alive Agent, no library. */
    floorHttps: Summary;
    handler: Summary;
    handlerAlone: Summary;
    cacheHit: Summary;
    handlerMemory: Memory;
    interleavedMemory: Memory;
    floorsMemory: Memory;
  };
  phases: Record<string, Summary>;
  cold: { bareWall: Summary; floor: ColdSeries; bundle: ColdSeries };
  loads: [string, Summary][];
  server: { answered: number; connections: number };
  durationSeconds: number;
}

/** The issue's targets. */
const TARGETS = { warmRatio: 1.3, cacheHitP50Ms: 0.1, coldP50Ms: 75, bundleKiB: 250 } as const;

/** Hand-written reading of the figures, kept beside the code and carried into every report. */
const ANALYSIS_PATH = join(__dirname, 'analysis.md');

export function machine(): BenchResults['machine'] {
  let cpu = cpus()[0]?.model ?? 'unknown';
  try {
    cpu = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? cpu;
  } catch {
    // Not Linux: os.cpus() has the model too.
  }
  return { node: process.version, cpu, cores: availableParallelism(), os: `${type()} ${release()}` };
}

interface Verdict {
  measure: string;
  measured: string;
  target: string;
  /** Undefined for a reference figure that has no target of its own. */
  pass?: boolean;
}

function verdicts(results: BenchResults): Verdict[] {
  const { floorFetch, floorHttps, handler, cacheHit } = results.warm;
  const ratio = handler.p50 / floorFetch.p50;
  const strictRatio = handler.p50 / floorHttps.p50;
  const kib = results.bundle.bytes / 1024;
  return [
    {
      measure: "Warm handler p50 / keep-alive `fetch` floor p50 (the issue's floor)",
      measured: `${ratio.toFixed(2)}x (${ms(handler.p50)} ms / ${ms(floorFetch.p50)} ms)`,
      target: `<= ${TARGETS.warmRatio}x`,
      pass: ratio <= TARGETS.warmRatio,
    },
    {
      measure: 'Warm handler p50 / keep-alive node:https floor p50 (stricter reference)',
      measured: `${strictRatio.toFixed(2)}x (${ms(handler.p50)} ms / ${ms(floorHttps.p50)} ms; ${ms(handler.p50 - floorHttps.p50)} ms above it)`,
      target: 'none: a reference',
    },
    {
      measure: 'Cache hit p50 (TOKEN_CACHE=on)',
      measured: `${ms(cacheHit.p50)} ms`,
      target: `< ${TARGETS.cacheHitP50Ms} ms`,
      pass: cacheHit.p50 < TARGETS.cacheHitP50Ms,
    },
    {
      measure: 'Cold: process start to first exchange done, p50',
      measured: `${ms(results.cold.bundle.total.p50)} ms`,
      target: `<= ${TARGETS.coldP50Ms} ms`,
      pass: results.cold.bundle.total.p50 <= TARGETS.coldP50Ms,
    },
    {
      measure: 'Minified bundle',
      measured: `${kib.toFixed(1)} KiB`,
      target: `<= ${TARGETS.bundleKiB} KiB`,
      pass: kib <= TARGETS.bundleKiB,
    },
  ];
}

/** One line per target, for the console. */
export function verdictLines(results: BenchResults): string[] {
  return verdicts(results).map(
    (v) => `${v.pass === undefined ? 'INFO' : v.pass ? 'PASS' : 'FAIL'} ${v.measure}: ${v.measured} (target ${v.target})`,
  );
}

const row = (...cells: (string | number)[]): string => `| ${cells.join(' | ')} |`;
const mib = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
const kib = (bytes: number): string => (bytes / 1024).toFixed(1);
const timing = (label: string, s: Summary): string => row(label, ms(s.p50), ms(s.p99), ms(s.min), ms(s.max), s.n);
const TIMING_HEAD = `${row('Subject', 'p50', 'p99', 'min', 'max', 'n')}\n${row('---', '---:', '---:', '---:', '---:', '---:')}`;

function phaseTable(phases: BenchResults['phases']): string {
  let previous: number | undefined;
  const steps = Object.entries(PHASE_STEPS).map(([name, label]) => {
    const s = phases[name];
    if (!s) return row(label, '-', '-', '-');
    const added = previous === undefined ? '' : `${s.p50 >= previous ? '+' : ''}${ms(s.p50 - previous)}`;
    previous = s.p50;
    return row(label, ms(s.p50), ms(s.p99), added);
  });
  const parts = Object.entries(PHASE_PARTS).map(([name, label]) => {
    const s = phases[name];
    return s ? row(label, ms(s.p50), ms(s.p99), '') : row(label, '-', '-', '');
  });
  return [row('Step', 'p50', 'p99', 'p50 added'), row('---', '---:', '---:', '---:'), ...steps, ...parts].join('\n');
}

function coldTable(cold: BenchResults['cold']): string {
  const line = (label: string, pick: (series: ColdSeries) => Summary): string => {
    const b = pick(cold.bundle);
    const f = pick(cold.floor);
    return row(label, ms(b.p50), ms(b.p99), ms(f.p50), ms(f.p99));
  };
  return [
    row('Phase', 'Bundle p50', 'Bundle p99', 'Floor p50', 'Floor p99'),
    row('---', '---:', '---:', '---:', '---:'),
    line('Node startup: process start to the script', (s) => s.boot),
    line('`require()` of the bundle (floor: of node:https)', (s) => s.require),
    line('First exchange (TCP + TLS handshake + token request)', (s) => s.firstExchange),
    line('**Process start to first exchange done**', (s) => s.total),
    line('`spawn()` to exit, seen from the bench', (s) => s.wall),
    row('`node -e 0`, `spawn()` to exit', ms(cold.bareWall.p50), ms(cold.bareWall.p99), '', ''),
  ].join('\n');
}

export function renderReport(results: BenchResults): string {
  const { warm, floors, bundle, settings, machine: m } = results;
  const targetRows = verdicts(results);
  const analysis = existsSync(ANALYSIS_PATH) ? `\n${readFileSync(ANALYSIS_PATH, 'utf8').trim()}\n` : '';
  const load = (values: number[]): string => values.map((value) => value.toFixed(2)).join(' ');
  return `# Benchmarks

Generated by \`npm run bench\` (\`bench/run.ts\`) on ${results.date.slice(0, 10)}; figures are not edited by hand, re-run it.
Times are milliseconds of wall-clock time; p50 and p99 are nearest-rank percentiles (each a time really observed).
All traffic is HTTPS to a token server on 127.0.0.1: no network latency, so every microsecond of the
service's own work shows.

## Targets

${row('Measure', 'Measured', 'Target', 'Result')}
${row('---', '---', '---', '---')}
${targetRows.map((v) => row(v.measure, v.measured, v.target, v.pass === undefined ? '-' : v.pass ? 'pass' : '**FAIL**')).join('\n')}

The issue defines the floor as one keep-alive \`fetch\` of a token with no library; the target is judged
against it. node:https with a keep-alive Agent is faster than fetch on loopback, so the ratio against it
is shown too, as the stricter reference it is: see the analysis below for where the difference goes.

## Warm invocations

Every process runs ${settings.warmupRounds} unrecorded warm-up rounds, then ${settings.warmRounds} measured rounds; each round calls
every subject of that process once, in an order shuffled afresh each round, with one untimed turn of
the event loop between calls.

The target: both floors and the handler interleaved in one process. Then the handler alone, and cache hits.

${TIMING_HEAD}
${timing('Floor: keep-alive fetch (undici), no library', warm.floorFetch)}
${timing('Stricter floor: node:https, keep-alive Agent, no library', warm.floorHttps)}
${timing('Handler, interleaved with both floors', warm.handler)}
${timing('Handler, alone in its process', warm.handlerAlone)}
${timing('Handler, cache hit (TOKEN_CACHE=on)', warm.cacheHit)}

Memory after the warm runs (\`process.memoryUsage()\`, no forced GC):

${row('Process', 'RSS', 'Heap used')}
${row('---', '---:', '---:')}
${row('Handler alone', mib(warm.handlerMemory.rssBytes), mib(warm.handlerMemory.heapUsedBytes))}
${row('Handler interleaved with both floors', mib(warm.interleavedMemory.rssBytes), mib(warm.interleavedMemory.heapUsedBytes))}
${row('For reference: both floors alone, no bundle (fetch loads undici)', mib(warm.floorsMemory.rssBytes), mib(warm.floorsMemory.heapUsedBytes))}

The floors alone in a process without the bundle, for comparison with their figures above:

${TIMING_HEAD}
${timing('node:https, keep-alive Agent', floors.https)}
${timing('fetch (undici)', floors.fetch)}

### Where the warm time goes

One more process calls the handler's parts, built from \`lambda/\` with the deployed bundle's options,
interleaved the same way. Each step adds one layer to the one above; "p50 added" is the difference of
medians, an estimate of that layer's cost.

${phaseTable(results.phases)}

## Cold start

${settings.coldRounds} rounds; each round starts three fresh processes in rotating order: \`node -e 0\`, the floor (one
node:https POST on a new connection) and the bundle (require it, then one handler call on a new connection).

${coldTable(results.cold)}

What each part of the bundle costs to load: \`require()\` alone in a fresh process, each part bundled by
itself with the deployed options, ${settings.loadRounds} rounds in rotating order. Built-in modules count wherever they
are first required, so the parts overlap and do not add up to the whole.

${row('Loaded', 'p50', 'p99')}
${row('---', '---:', '---:')}
${results.loads.map(([name, s]) => row(name, ms(s.p50), ms(s.p99))).join('\n')}

## Bundle

Built by esbuild with \`lambdaBuildOptions()\` from \`infra/bundling.ts\`, the options the CDK stack uses.

${row('File', 'Bytes', 'KiB', 'gzip -9 bytes', 'gzip KiB')}
${row('---', '---:', '---:', '---:', '---:')}
${row('index.js (minified)', bundle.bytes, kib(bundle.bytes), bundle.gzipBytes, kib(bundle.gzipBytes))}
${row('index.js.map (shipped, not loaded)', bundle.mapBytes, kib(bundle.mapBytes), '', '')}

Minified bytes by package (esbuild metafile):

${row('Package', 'Bytes', 'Share')}
${row('---', '---:', '---:')}
${bundle.byPackage.map(([name, bytes]) => row(name, bytes, `${((bytes / bundle.bytes) * 100).toFixed(0)}%`)).join('\n')}
${analysis}
## Machine

- Node ${m.node} on ${m.os} (Lambda runs Node 22; figures there will differ)
- CPU: ${m.cpu}, ${m.cores} cores available
- Load average (1, 5, 15 min) at start: ${load(results.loadAverage.start)}; at end: ${load(results.loadAverage.end)}
- The run took ${results.durationSeconds.toFixed(0)} s; the token server answered ${results.server.answered} requests on
  ${results.server.connections} TLS connections.

## How each figure is measured

- **Token server**: \`bench/token-server.ts\`, node:https on \`127.0.0.1:0\` in the bench's own process (so the measured
  processes never pay for it), reading each body and answering the same token JSON. Its certificate is an ECDSA
  P-256 self-signed one for \`IP:127.0.0.1\`, made at run time with the \`openssl\` CLI in a temporary directory
  (\`bench/tls-cert.ts\`) and deleted afterwards; the measured processes trust it through \`NODE_EXTRA_CA_CERTS\`.
- **Processes**: every measurement runs in a child \`node\` with an explicit environment (nothing inherited):
  \`NODE_EXTRA_CA_CERTS\`, \`TOKEN_URL_ALLOWLIST=https://127.0.0.1:PORT\` (the token URL policy refuses loopback
  unless an entry names it literally), \`POWERTOOLS_METRICS_NAMESPACE\`, and \`TOKEN_CACHE=on\` for the cache run only.
  The log level is the default, INFO, so each call writes its log line and EMF metrics to stdout, which goes to
  \`/dev/null\`. The workers (\`bench/workers/\`) are compiled to plain JavaScript first: no TypeScript loader runs.
- **Floor**: the request the handler makes upstream (\`grant_type=client_credentials\`, HTTP Basic, the same headers),
  with no library, over a kept-alive connection, the answer read and \`JSON.parse\`d.
- **Handler**: the minified bundle is \`require\`d once and \`handler(event, context)\` called with an API Gateway
  payload 2.0 event whose JSON body names the token server, as the Lambda runtime does. Each call is timed with
  \`performance.now()\` and its answer checked (status 200 and the server's token; \`x-token-cache: hit\` for cache
  hits): a failed call stops the bench.
- **Interleaving**: subjects compared with each other share one process, one loop and one server, called in an order
  shuffled each round (fixed seed), so drift, GC, CPU frequency changes and whichever call came before hit them alike.
  One untimed turn of the event loop between calls keeps work a call leaves behind (releasing its socket) out of the
  next call's time, as the Lambda runtime sends a response before that work runs. Cold runs rotate across fresh
  processes the same way.
- **Cold start**: \`performance.now()\` counts from \`performance.timeOrigin\`, the start of the process. The worker notes
  it on its first line (Node's startup), then times \`require()\` and the first call, which opens a new TCP
  connection and does a full TLS handshake. The bench also times \`spawn()\` to exit, and \`node -e 0\` the same way.
- **Memory**: \`process.memoryUsage()\` right after the measured rounds.
- **Bundle**: size of \`index.js\` as esbuild writes it, and of its gzip at level 9 (about what the deployment zip holds).

## Re-run

\`\`\`sh
npm run bench
\`\`\`

It needs the \`openssl\` CLI, takes well under three minutes on two cores, stops by itself, and rewrites this
file. The settings are the constants at the top of \`bench/run.ts\`; the analysis section is \`bench/analysis.md\`.
`;
}
