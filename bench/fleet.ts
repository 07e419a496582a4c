// The fleet scenario: K function instances, each its own module instance of the deployed bundle (its
// own memory tier, agents and DynamoDB client), in front of one scripted IdP and one DynamoDB table
// (dynalite, in a child process), with TOKEN_CACHE off, memory and shared. Self-contained: it builds
// what it measures, starts what it needs on 127.0.0.1, and stops everything it started.
// `npm run bench:fleet` prints its markdown section; `fleetScenario()` returns it.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { gzipSync } from 'node:zlib';
import { CreateTableCommand, DynamoDBClient, GetItemCommand, ScanCommand } from '@aws-sdk/client-dynamodb';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { build, type Metafile } from 'esbuild';
import { lambdaBuildOptions } from '../infra/bundling';
import { createTableInput, TOKEN_CACHE_TABLE } from '../lambda/token-cache-table';

const ROOT = join(__dirname, '..');
const TABLE = 'fleet-bench';
const SECRET = 'fleet-bench-secret';
const KEYS = 4;
const MODES = ['off', 'memory', 'shared'] as const;
type Mode = (typeof MODES)[number];
// FLEET_SIZES=32 FLEET_MODES=shared FLEET_PARTS=fleet narrow a run down while investigating.
const FLEET_SIZES = listFromEnv('FLEET_SIZES', ['1', '8', '32']).map(Number);
const RUN_MODES = listFromEnv('FLEET_MODES', [...MODES]) as Mode[];
const PARTS = listFromEnv('FLEET_PARTS', ['fleet', 'latency', 'cold']);
// A token the IdP says lives 34 s is handed out for 4 s: expires_in less the 30 s minimum margin.
// That is the lifetime that matters to the cache (how often it must fetch), and short enough that
// every configuration runs through three of them in 12 s.
const EXPIRES_IN_S = 34;
const LIFETIME_MS = (EXPIRES_IN_S - 30) * 1000;
const LIFETIMES = 3;
// Stop a little before the fourth lifetime would start.
const RUN_MS = LIFETIMES * LIFETIME_MS - 300;
// Each instance takes one request at a time (as a Lambda instance does), then waits this long.
const THINK_MS = 20;
// A real IdP takes tens to hundreds of milliseconds: the window in which a burst of misses piles up.
const IDP_DELAY_MS = 50;
const LATENCY_WARMUP = 200;
const LATENCY_ROUNDS = 1000;
const COLD_ROUNDS = 15;

type Handler = (event: APIGatewayProxyEventV2, context?: { awsRequestId: string }) => Promise<APIGatewayProxyStructuredResultV2>;

/** Run the whole scenario and return its markdown section. */
export async function fleetScenario(): Promise<string> {
  // What the stack sets for the function; the instances run in this process.
  process.env.POWERTOOLS_METRICS_NAMESPACE ??= 'TokenExchange';
  const cacheDir = join(ROOT, 'node_modules', '.cache');
  mkdirSync(cacheDir, { recursive: true });
  // Under the repository, so the bundle's external `@aws-sdk/*` resolves to node_modules as it
  // resolves to the runtime's own copy in Lambda.
  const dir = mkdtempSync(join(cacheDir, 'fleet-bench-'));
  const started = performance.now();
  const savedEnv = { ...process.env };
  // Before the first client: the SDK's notice that its 2027 releases need Node.js 22 says nothing here.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
  let dynamo: LocalTable | undefined;
  let idp: ScriptedIdp | undefined;
  try {
    const bundles = await buildBundles(dir);
    dynamo = await startTable();
    idp = await startIdp();
    Object.assign(process.env, awsEnvironment(dynamo.endpoint), { TOKEN_URL_ALLOWLIST: idp.origin, UPSTREAM_TIMEOUT_MS: '5000' });
    for (const name of ['AWS_PROFILE', 'AWS_SESSION_TOKEN', 'AWS_ENDPOINT_URL', 'LOG_LEVEL', 'NODE_DEBUG']) delete process.env[name];

    const fleet: FleetRun[] = [];
    for (const size of PARTS.includes('fleet') ? FLEET_SIZES : []) {
      for (const mode of RUN_MODES) {
        progress(`fleet: K=${size}, TOKEN_CACHE=${mode}, ${RUN_MS / 1000} s`);
        fleet.push(await runFleet(bundles.deployed, idp, mode, size));
      }
    }
    progress(`latency: ${LATENCY_ROUNDS} rounds of a shared hit, a bare GetItem, a memory hit, a miss and a direct IdP call`);
    const latency = PARTS.includes('latency') ? await measureLatency(bundles.deployed, idp, dynamo.endpoint) : undefined;
    progress(`cold start: ${COLD_ROUNDS} rounds of each variant`);
    const cold = PARTS.includes('cold') ? await measureColdStarts(bundles, idp, dynamo.endpoint) : undefined;
    if (!latency || !cold) return fleet.map((run) => JSON.stringify(run)).join('\n');
    return render({ fleet, latency, cold, bundles, durationS: (performance.now() - started) / 1000 });
  } finally {
    process.env = savedEnv;
    await idp?.close();
    await dynamo?.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// What is measured: the bundles, the table, the IdP

interface BundleFacts {
  readonly path: string;
  readonly bytes: number;
  readonly gzipBytes: number;
  /** Bytes of @aws-sdk/* and @smithy/* code in the bundle. */
  readonly sdkBytes: number;
}

interface Bundles {
  /** As the stack deploys it: `@aws-sdk/*` external, taken from the Lambda runtime. */
  readonly deployed: BundleFacts;
  /** The alternative: the DynamoDB client bundled in. */
  readonly sdkBundled: BundleFacts;
}

async function buildBundles(dir: string): Promise<Bundles> {
  const one = async (name: string, external: string[] | undefined): Promise<BundleFacts> => {
    const path = join(dir, name, 'index.js');
    const options = lambdaBuildOptions(path);
    const { metafile } = await build({ ...options, ...(external ? { external } : {}), metafile: true, logLevel: 'silent' });
    const code = readFileSync(path);
    return { path, bytes: code.length, gzipBytes: gzipSync(code, { level: 9 }).length, sdkBytes: sdkBytesOf(metafile) };
  };
  const [deployed, sdkBundled] = await Promise.all([one('deployed', undefined), one('sdk-bundled', [])]);
  return { deployed, sdkBundled };
}

function sdkBytesOf(metafile: Metafile): number {
  const output = Object.values(metafile.outputs).find((candidate) => candidate.entryPoint !== undefined);
  return Object.entries(output?.inputs ?? {})
    .filter(([input]) => /node_modules\/@(aws-sdk|smithy|aws-crypto)\//.test(input))
    .reduce((sum, [, { bytesInOutput }]) => sum + bytesInOutput, 0);
}

interface LocalTable {
  readonly endpoint: string;
  close(): Promise<void>;
}

/** dynalite in a child process (so it does not share the handlers' event loop), with the cache table. */
async function startTable(): Promise<LocalTable> {
  const script =
    "const d = require('dynalite')({ createTableMs: 0 }); d.listen(0, '127.0.0.1', () => process.stdout.write(d.address().port + '\\n'));";
  const child: ChildProcess = spawn(process.execPath, ['-e', script], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  const [chunk] = (await once(child.stdout as NodeJS.ReadableStream, 'data')) as [Buffer];
  const endpoint = `http://127.0.0.1:${chunk.toString('utf8').trim()}`;
  const client = new DynamoDBClient({ endpoint, region: 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
  await client.send(new CreateTableCommand(createTableInput(TABLE)));
  client.destroy();
  return {
    endpoint,
    async close() {
      child.kill('SIGKILL');
      if (child.exitCode === null) await once(child, 'exit');
    },
  };
}

function awsEnvironment(endpoint: string): Record<string, string> {
  return {
    AWS_ENDPOINT_URL_DYNAMODB: endpoint,
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'local',
    AWS_SECRET_ACCESS_KEY: 'local',
    AWS_EC2_METADATA_DISABLED: 'true',
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
  };
}

interface ScriptedIdp {
  readonly origin: string;
  /** Token requests received, per client id. */
  readonly requests: Map<string, number>;
  delayMs: number;
  expiresIn: number;
  close(): Promise<void>;
}

/** An http IdP on 127.0.0.1 that answers each token request with a new token. */
async function startIdp(): Promise<ScriptedIdp> {
  const sockets = new Set<Socket>();
  let issued = 0;
  const idp: ScriptedIdp = {
    origin: '',
    requests: new Map(),
    delayMs: IDP_DELAY_MS,
    expiresIn: EXPIRES_IN_S,
    close: async () => undefined,
  };
  const server: Server = createServer((request, response) => {
    const clientId = decodeURIComponent(
      Buffer.from((request.headers.authorization ?? '').slice(6), 'base64')
        .toString()
        .split(':')[0] ?? '',
    );
    idp.requests.set(clientId, (idp.requests.get(clientId) ?? 0) + 1);
    request.resume();
    const answer = JSON.stringify({ access_token: `fleet-token-${++issued}`, token_type: 'Bearer', expires_in: idp.expiresIn });
    const respond = () => {
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(answer) });
      response.end(answer);
    };
    if (idp.delayMs > 0) setTimeout(respond, idp.delayMs);
    else respond();
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return Object.assign(idp, {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      for (const socket of sockets) socket.destroy();
      server.close();
      await once(server, 'close');
    },
  });
}

// ---------------------------------------------------------------------------------------------
// The fleet runs

interface FleetRun {
  readonly mode: Mode;
  readonly size: number;
  readonly requests: number;
  readonly idpRequests: number;
  /** IdP token requests per key per lifetime. */
  readonly perKeyPerLifetime: number;
  readonly tiers: Record<string, number>;
  readonly cacheErrors: number;
  readonly statuses: Record<string, number>;
}

let runCounter = 0;

/** A payload 2.0 event for a token request of one client. */
function tokenEvent(clientId: string, tokenUrl: string, requestId: string): APIGatewayProxyEventV2 {
  const path = '/v1/oauth/token';
  return {
    version: '2.0',
    routeKey: `POST ${path}`,
    rawPath: path,
    rawQueryString: '',
    headers: { 'content-type': 'application/json' },
    requestContext: {
      accountId: '123456789012',
      apiId: 'fleet',
      domainName: 'fleet.execute-api.eu-west-1.amazonaws.com',
      domainPrefix: 'fleet',
      http: { method: 'POST', path, protocol: 'HTTP/1.1', sourceIp: '192.0.2.10', userAgent: 'fleet-bench' },
      requestId,
      routeKey: `POST ${path}`,
      stage: '$default',
      time: '01/Jan/2026:00:00:00 +0000',
      timeEpoch: 1767225600000,
    },
    body: JSON.stringify({ client_id: clientId, client_secret: SECRET, access_token_url: tokenUrl, scope: 'read' }),
    isBase64Encoded: false,
  };
}

/**
 * A fresh function instance: the bundle's module loaded anew, its handler configured from
 * process.env at that moment, exactly as the runtime loads it in a new instance.
 */
function freshInstance(bundle: string): Handler {
  const resolved = require.resolve(bundle);
  delete require.cache[resolved];
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- a new module instance each time, on purpose
  return (require(resolved) as { handler: Handler }).handler;
}

/** The handlers' log lines while `act` runs (Lambda takes them from stdout; here they are kept, not printed). */
async function capturingLogs<T>(act: () => Promise<T>): Promise<{ result: T; lines: Record<string, unknown>[] }> {
  const lines: Record<string, unknown>[] = [];
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((chunk: string | Uint8Array) => {
    for (const line of String(chunk).split('\n')) {
      if (line.startsWith('{"level"')) lines.push(JSON.parse(line) as Record<string, unknown>);
    }
    return true;
  }) as typeof process.stdout.write;
  try {
    return { result: await act(), lines };
  } finally {
    process.stdout.write = write;
  }
}

async function runFleet(bundle: BundleFacts, idp: ScriptedIdp, mode: Mode, size: number): Promise<FleetRun> {
  const run = ++runCounter;
  Object.assign(process.env, { TOKEN_CACHE: mode, TOKEN_CACHE_TABLE: TABLE });
  const instances = Array.from({ length: size }, () => freshInstance(bundle.path));
  const keys = Array.from({ length: KEYS }, (_, index) => `fleet-run${run}-${mode}-k${size}-key${index}`);
  Object.assign(idp, { delayMs: IDP_DELAY_MS, expiresIn: EXPIRES_IN_S });
  const statuses: Record<string, number> = {};
  let requests = 0;
  const { lines } = await capturingLogs(async () => {
    const until = performance.now() + RUN_MS;
    await Promise.all(
      instances.map(async (handle, member) => {
        // Spread the instances' first requests over the keys, as independent callers would.
        for (let turn = member; performance.now() < until; turn++) {
          const key = keys[turn % keys.length] as string;
          const answer = await handle(tokenEvent(key, `${idp.origin}/token`, `r${run}-${member}-${turn}`));
          requests++;
          statuses[String(answer.statusCode)] = (statuses[String(answer.statusCode)] ?? 0) + 1;
          await sleep(THINK_MS);
        }
      }),
    );
  });
  const idpRequests = keys.reduce((sum, key) => sum + (idp.requests.get(key) ?? 0), 0);
  const tiers: Record<string, number> = {};
  let cacheErrors = 0;
  for (const line of lines.filter((entry) => entry.message === 'token request')) {
    const tier = typeof line.cache === 'string' ? line.cache : 'none';
    tiers[tier] = (tiers[tier] ?? 0) + 1;
    if (line.cache_error !== undefined) cacheErrors++;
  }
  return { mode, size, requests, idpRequests, perKeyPerLifetime: idpRequests / KEYS / LIFETIMES, tiers, cacheErrors, statuses };
}

// ---------------------------------------------------------------------------------------------
// Hit latency, side by side with a bare GetItem

interface Summary {
  readonly n: number;
  readonly p50: number;
  readonly p99: number;
}

interface Latency {
  readonly getItem: Summary;
  readonly sharedHit: Summary;
  readonly memoryHit: Summary;
  readonly sharedMiss: Summary;
  readonly idpDirect: Summary;
}

/**
 * One instance fills the table; a second instance (memory empty) then asks for each key once: a
 * shared-tier hit each time, interleaved in shuffled order with a bare SDK GetItem of an item of the
 * same table (its floor), a memory hit on that instance, a miss (a key nobody asked for yet: read,
 * lease, IdP, write), and a direct IdP call with TOKEN_CACHE=off. The IdP answers at once here.
 */
async function measureLatency(bundle: BundleFacts, idp: ScriptedIdp, endpoint: string): Promise<Latency> {
  const run = ++runCounter;
  const rounds = LATENCY_WARMUP + LATENCY_ROUNDS;
  const tokenUrl = `${idp.origin}/token`;
  // Tokens that outlive the phase, so every kept key stays a hit to the end.
  Object.assign(idp, { delayMs: 0, expiresIn: 3600 });
  Object.assign(process.env, { TOKEN_CACHE: 'off' });
  const direct = freshInstance(bundle.path);
  Object.assign(process.env, { TOKEN_CACHE: 'shared', TOKEN_CACHE_TABLE: TABLE });
  const filler = freshInstance(bundle.path);
  const reader = freshInstance(bundle.path);
  const bare = new DynamoDBClient({
    maxAttempts: 2,
    requestHandler: { connectionTimeout: 500, requestTimeout: 500, throwOnRequestTimeout: true },
  });
  const kept = (round: number) => `latency${run}-kept-${round}`;
  const fresh = (round: number) => `latency${run}-fresh-${round}`;
  const samples: Record<keyof Latency, number[]> = { getItem: [], sharedHit: [], memoryHit: [], sharedMiss: [], idpDirect: [] };
  let itemKey = '';

  await capturingLogs(async () => {
    for (let start = 0; start < rounds; start += 20) {
      await Promise.all(
        Array.from({ length: Math.min(20, rounds - start) }, (_, offset) => filler(tokenEvent(kept(start + offset), tokenUrl, 'fill'))),
      );
    }
  });
  // Any item the filler wrote: the bare read fetches a real sealed entry of the same size.
  const { lines } = await capturingLogs(() => reader(tokenEvent(kept(0), tokenUrl, 'probe')));
  if (lines[0]?.cache !== 'shared') throw new Error(`the latency table was not filled: ${JSON.stringify(lines[0])}`);
  itemKey = await anyItemKey(endpoint);

  await capturingLogs(async () => {
    for (let round = 0; round < rounds; round++) {
      const calls: [keyof Latency, () => Promise<unknown>][] = [
        ['sharedHit', () => reader(tokenEvent(kept(round), tokenUrl, `hit-${round}`))],
        ['memoryHit', () => reader(tokenEvent(kept(0), tokenUrl, `mem-${round}`))],
        [
          'getItem',
          () =>
            bare.send(
              new GetItemCommand({
                TableName: TABLE,
                Key: { [TOKEN_CACHE_TABLE.partitionKey.name]: { S: itemKey } },
                ConsistentRead: true,
              }),
            ),
        ],
        ['sharedMiss', () => reader(tokenEvent(fresh(round), tokenUrl, `miss-${round}`))],
        ['idpDirect', () => direct(tokenEvent(kept(round), tokenUrl, `off-${round}`))],
      ];
      for (const [name, call] of shuffled(calls)) {
        const before = performance.now();
        await call();
        const elapsed = performance.now() - before;
        if (round >= LATENCY_WARMUP) samples[name].push(elapsed);
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
  });
  bare.destroy();
  return {
    getItem: summarize(samples.getItem),
    sharedHit: summarize(samples.sharedHit),
    memoryHit: summarize(samples.memoryHit),
    sharedMiss: summarize(samples.sharedMiss),
    idpDirect: summarize(samples.idpDirect),
  };
}

async function anyItemKey(endpoint: string): Promise<string> {
  const client = new DynamoDBClient({ endpoint, region: 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
  const { Items } = await client.send(new ScanCommand({ TableName: TABLE, Limit: 20 }));
  client.destroy();
  const item = Items?.find((candidate) => candidate[TOKEN_CACHE_TABLE.attributes.sealed] !== undefined);
  if (!item) throw new Error('no sealed item in the table');
  return item[TOKEN_CACHE_TABLE.partitionKey.name]?.S as string;
}

// ---------------------------------------------------------------------------------------------
// Cold start: a fresh process that loads the bundle and answers one request

interface ColdSample {
  readonly requireMs: number;
  readonly firstMs: number;
  readonly totalMs: number;
  readonly cache?: string;
}

interface ColdVariant {
  readonly name: string;
  readonly samples: ColdSample[];
}

// Runs in the fresh process: times its own require of the bundle and its first request, from the
// process's start (performance.now() counts from it).
const COLD_WORKER = `
const bootMs = performance.now();
const { handler } = require(process.env.FLEET_BUNDLE);
const loadedMs = performance.now();
handler(JSON.parse(process.env.FLEET_EVENT), { awsRequestId: 'cold' }).then((answer) => {
  const doneMs = performance.now();
  if (answer.statusCode !== 200) { process.stderr.write('status ' + answer.statusCode); process.exit(1); }
  process.stderr.write(JSON.stringify({ requireMs: loadedMs - bootMs, firstMs: doneMs - loadedMs, totalMs: doneMs, cache: answer.headers['x-token-cache'] }));
  process.exit(0);
});`;

async function measureColdStarts(bundles: Bundles, idp: ScriptedIdp, endpoint: string): Promise<ColdVariant[]> {
  Object.assign(idp, { delayMs: 0, expiresIn: 3600 });
  const run = ++runCounter;
  const tokenUrl = `${idp.origin}/token`;
  const base = { PATH: process.env.PATH ?? '', TOKEN_URL_ALLOWLIST: idp.origin, ...awsEnvironment(endpoint) };
  const sharedEnv = { TOKEN_CACHE: 'shared', TOKEN_CACHE_TABLE: TABLE };
  // The key of the "token already in the table" variants: one warm request puts it there.
  const keptKey = `cold${run}-kept`;
  const variants: { name: string; bundle: string; env: Record<string, string>; key: (round: number) => string }[] = [
    { name: 'TOKEN_CACHE=off', bundle: bundles.deployed.path, env: { TOKEN_CACHE: 'off' }, key: (round) => `cold${run}-off-${round}` },
    {
      name: 'TOKEN_CACHE=memory',
      bundle: bundles.deployed.path,
      env: { TOKEN_CACHE: 'memory' },
      key: (round) => `cold${run}-mem-${round}`,
    },
    {
      name: 'TOKEN_CACHE=memory, SDK bundled',
      bundle: bundles.sdkBundled.path,
      env: { TOKEN_CACHE: 'memory' },
      key: (round) => `cold${run}-bmem-${round}`,
    },
    {
      name: 'shared, runtime SDK, token not in the table',
      bundle: bundles.deployed.path,
      env: sharedEnv,
      key: (round) => `cold${run}-miss-${round}`,
    },
    { name: 'shared, runtime SDK, token in the table', bundle: bundles.deployed.path, env: sharedEnv, key: () => keptKey },
    {
      name: 'shared, SDK bundled, token not in the table',
      bundle: bundles.sdkBundled.path,
      env: sharedEnv,
      key: (round) => `cold${run}-bmiss-${round}`,
    },
    { name: 'shared, SDK bundled, token in the table', bundle: bundles.sdkBundled.path, env: sharedEnv, key: () => keptKey },
  ];
  const coldStart = (variant: (typeof variants)[number], round: number): Promise<ColdSample> =>
    runWorker({
      ...base,
      ...variant.env,
      FLEET_BUNDLE: variant.bundle,
      FLEET_EVENT: JSON.stringify(tokenEvent(variant.key(round), tokenUrl, 'cold')),
    });
  await coldStart(variants.find((variant) => variant.name.endsWith('runtime SDK, token in the table')) as (typeof variants)[number], -1);
  const samples = variants.map(() => [] as ColdSample[]);
  // Rotating order, one unrecorded round first to fill the file cache.
  for (let round = -1; round < COLD_ROUNDS; round++) {
    for (let offset = 0; offset < variants.length; offset++) {
      const index = (round + 1 + offset) % variants.length;
      const sample = await coldStart(variants[index] as (typeof variants)[number], round);
      if (round >= 0) samples[index]?.push(sample);
    }
  }
  return variants.map((variant, index) => ({ name: variant.name, samples: samples[index] ?? [] }));
}

function runWorker(env: Record<string, string>): Promise<ColdSample> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', COLD_WORKER], { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'pipe'], timeout: 30_000 });
    let output = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
    });
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) reject(new Error(`cold worker ended with ${code}: ${output}`));
      else resolve(JSON.parse(output.slice(output.lastIndexOf('{"requireMs"'))) as ColdSample);
    });
  });
}

// ---------------------------------------------------------------------------------------------
// The report

function summarize(samples: readonly number[]): Summary {
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = (p: number): number => sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)] ?? Number.NaN;
  return { n: sorted.length, p50: rank(0.5), p99: rank(0.99) };
}

function ms(value: number): string {
  if (value < 1) return value.toFixed(3);
  if (value < 10) return value.toFixed(2);
  if (value < 100) return value.toFixed(1);
  return value.toFixed(0);
}

const kib = (bytes: number): string => (bytes / 1024).toFixed(1);

function shuffled<T>(items: readonly T[]): T[] {
  const copy = [...items];
  for (let index = copy.length - 1; index > 0; index--) {
    const other = Math.floor(Math.random() * (index + 1));
    [copy[index], copy[other]] = [copy[other] as T, copy[index] as T];
  }
  return copy;
}

function render(results: { fleet: FleetRun[]; latency: Latency; cold: ColdVariant[]; bundles: Bundles; durationS: number }): string {
  const { fleet, latency, cold, bundles } = results;
  const at = (mode: Mode, size: number) => fleet.find((run) => run.mode === mode && run.size === size) as FleetRun;
  const largest = Math.max(...FLEET_SIZES);
  const sharedLargest = at('shared', largest).perKeyPerLifetime;
  const hitRatio = latency.sharedHit.p50 / latency.getItem.p50;
  const verdict = (ok: boolean) => (ok ? 'pass' : 'FAIL');
  const coldOf = (name: string) => cold.find((variant) => variant.name === name) as ColdVariant;
  const coldSummary = (variant: ColdVariant, pick: (sample: ColdSample) => number) => summarize(variant.samples.map(pick));
  const runtimeHit = coldSummary(coldOf('shared, runtime SDK, token in the table'), (sample) => sample.totalMs).p50;
  const bundledHit = coldSummary(coldOf('shared, SDK bundled, token in the table'), (sample) => sample.totalMs).p50;
  const memoryCold = coldSummary(coldOf('TOKEN_CACHE=memory'), (sample) => sample.totalMs).p50;
  const memoryBundled = coldSummary(coldOf('TOKEN_CACHE=memory, SDK bundled'), (sample) => sample.totalMs).p50;

  const lines = [
    '## Fleet: the shared token cache',
    '',
    `Generated by \`npm run bench:fleet\` (\`bench/fleet.ts\`) on ${new Date().toISOString().slice(0, 10)}, ${cpus().length} cores, Node ${process.version}, in ${results.durationS.toFixed(0)} s.`,
    'Each function instance is a fresh module instance of the deployed bundle (its own memory tier, agents and DynamoDB',
    'client), taking one request at a time as a Lambda instance does. All instances share one scripted IdP (http on',
    `127.0.0.1, answering after ${IDP_DELAY_MS} ms) and one table in dynalite (a child process), reached through the real AWS SDK.`,
    `The IdP's tokens say \`expires_in: ${EXPIRES_IN_S}\`: with the 30 s minimum margin each is handed out for ${LIFETIME_MS / 1000} s, its lifetime`,
    `in the cache. Each configuration runs ${KEYS} keys (client ids) through ${LIFETIMES} lifetimes; every instance asks for the keys in turn,`,
    `${THINK_MS} ms apart. The table's counts are IdP requests divided by keys and by ${LIFETIMES}. A lifetime starts when a request`,
    'first finds the token stale, so on a busy machine each starts a little late and the last may fall after the run: a',
    'figure just under 1 means that, not a token used past its margin.',
    '',
    '### Targets',
    '',
    '| Measure | Measured | Target | Result |',
    '| --- | --- | --- | --- |',
    `| IdP token requests per key per lifetime, \`shared\`, K = ${largest} | ${sharedLargest.toFixed(2)} | <= 1.1 | ${verdict(sharedLargest <= 1.1)} |`,
    `| Shared-tier hit p50 / bare SDK GetItem p50, same table | ${hitRatio.toFixed(2)}x (${ms(latency.sharedHit.p50)} ms / ${ms(latency.getItem.p50)} ms) | <= 1.5x | ${verdict(hitRatio <= 1.5)} |`,
    '',
    '### IdP token requests per key per lifetime',
    '',
    '| Instances K | `off` | `memory` | `shared` |',
    '| ---: | ---: | ---: | ---: |',
    ...FLEET_SIZES.map((size) => `| ${size} | ${MODES.map((mode) => at(mode, size).perKeyPerLifetime.toFixed(2)).join(' | ')} |`),
    '',
    'Requests answered, by the tier that answered (from the log lines), and table errors:',
    '',
    '| K | mode | requests | IdP requests | `memory` | `shared` | `miss` | CacheErrors | statuses |',
    '| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |',
    ...fleet.map(
      (run) =>
        `| ${run.size} | ${run.mode} | ${run.requests} | ${run.idpRequests} | ${run.tiers.memory ?? 0} | ${run.tiers.shared ?? 0} | ${run.tiers.miss ?? 0} | ${run.cacheErrors} | ${Object.entries(
          run.statuses,
        )
          .map(([status, count]) => `${status}: ${count}`)
          .join(', ')} |`,
    ),
    '',
    '### Hit latency of each tier, side by side',
    '',
    `${LATENCY_ROUNDS} measured rounds after ${LATENCY_WARMUP} unrecorded ones; each round makes every call below once, in a`,
    'shuffled order. A shared-tier hit is a whole handler call on an instance whose memory does not hold the key (parse,',
    'policy, key derivation, one GetItem, AES-GCM open, response, log line and metrics); its floor is one bare GetItem of',
    'an item of the same table with an SDK client configured alike. The IdP answers at once here, so a miss shows the table',
    "calls' own cost.",
    '',
    '| Call | p50 | p99 | n |',
    '| --- | ---: | ---: | ---: |',
    `| Bare SDK GetItem (ConsistentRead), the floor | ${ms(latency.getItem.p50)} | ${ms(latency.getItem.p99)} | ${latency.getItem.n} |`,
    `| Handler, shared-tier hit | ${ms(latency.sharedHit.p50)} | ${ms(latency.sharedHit.p99)} | ${latency.sharedHit.n} |`,
    `| Handler, memory-tier hit | ${ms(latency.memoryHit.p50)} | ${ms(latency.memoryHit.p99)} | ${latency.memoryHit.n} |`,
    `| Handler, miss with \`shared\` (read, lease, IdP, write) | ${ms(latency.sharedMiss.p50)} | ${ms(latency.sharedMiss.p99)} | ${latency.sharedMiss.n} |`,
    `| Handler, \`off\` (IdP only) | ${ms(latency.idpDirect.p50)} | ${ms(latency.idpDirect.p99)} | ${latency.idpDirect.n} |`,
    '',
    '### Cost of the option: bundle and cold start',
    '',
    '| Bundle | minified | gzip -9 | of which AWS SDK |',
    '| --- | ---: | ---: | ---: |',
    `| As deployed: \`@aws-sdk/*\` from the Lambda runtime (one file for off, memory and shared) | ${kib(bundles.deployed.bytes)} KiB | ${kib(bundles.deployed.gzipBytes)} KiB | ${kib(bundles.deployed.sdkBytes)} KiB |`,
    `| Alternative: the DynamoDB client bundled in | ${kib(bundles.sdkBundled.bytes)} KiB | ${kib(bundles.sdkBundled.gzipBytes)} KiB | ${kib(bundles.sdkBundled.sdkBytes)} KiB |`,
    '',
    `Cold start: a fresh \`node\` process loads the bundle and answers one request, ${COLD_ROUNDS} rounds in rotating order. The`,
    "runtime's SDK is stood in for by the same package loaded from node_modules, as Lambda loads it from its own.",
    '',
    '| Variant | require p50 | first request p50 | process start to answer p50 | p99 |',
    '| --- | ---: | ---: | ---: | ---: |',
    ...cold.map((variant) => {
      const total = coldSummary(variant, (sample) => sample.totalMs);
      return `| ${variant.name} | ${ms(coldSummary(variant, (sample) => sample.requireMs).p50)} | ${ms(coldSummary(variant, (sample) => sample.firstMs).p50)} | ${ms(total.p50)} | ${ms(total.p99)} |`;
    }),
    '',
    `A cold instance with \`shared\` answers a token the fleet already holds in ${ms(runtimeHit)} ms with the runtime's SDK and ${ms(bundledHit)} ms`,
    `with the SDK bundled (\`memory\` on the deployed bundle, which must ask the IdP: ${ms(memoryCold)} ms; on the SDK-bundled one: ${ms(memoryBundled)} ms).`,
    'Bundling the SDK would tax every cold start of `off` and `memory`, which never use it, for no gain with `shared`: the deployed',
    `bundle leaves the SDK to the Lambda runtime and stays ${kib(bundles.deployed.bytes)} KiB instead of ${kib(bundles.sdkBundled.bytes)} KiB. These are`,
    "local figures: a Lambda instance's CPU share (256 MiB is a fraction of a core) stretches every one of them.",
    '',
  ];
  return lines.join('\n');
}

function listFromEnv(name: string, all: string[]): string[] {
  const value = process.env[name]?.trim();
  return value ? value.split(',').map((item) => item.trim()) : all;
}

function progress(line: string): void {
  process.stderr.write(`[fleet] ${line}\n`);
}

if (require.main === module) {
  // Bounded: should anything hang, stop rather than run on.
  setTimeout(() => {
    process.stderr.write('[fleet] gave up after 10 minutes\n');
    process.exit(1);
  }, 600_000).unref();
  fleetScenario()
    .then((section) => {
      process.stdout.write(section);
      // Keep-alive sockets of the instances' agents would hold the process open; everything is closed.
      process.exit(0);
    })
    .catch((error: unknown) => {
      process.stderr.write(`[fleet] failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exit(1);
    });
}
