// The fleet scenario: K function instances, each its own module instance of the deployed bundle (its
// own memory tier, agents and DynamoDB client), in front of one scripted IdP and one DynamoDB table
// (dynalite, in a child process), with TOKEN_CACHE off, memory and shared. It starts what it needs on
// 127.0.0.1 and stops everything it started.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { type AttributeValue, CreateTableCommand, DynamoDBClient, GetItemCommand, ScanCommand } from '@aws-sdk/client-dynamodb';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { createTableInput, TABLE_SCHEMA } from '../lambda/cache/table-schema';
import { tokenEvent } from '../test/support/events';
import { ms, row, runNode, summarize, table } from './report';

const ROOT = join(__dirname, '..');
const TABLE = 'fleet-bench';
const KEYS = 4;
const SIZES = [1, 8, 32];
const MODES = ['off', 'memory', 'shared'] as const;
type Mode = (typeof MODES)[number];
// A token the IdP says lives 34 s is handed out for 4 s: expires_in less the 30 s minimum margin. That
// is the lifetime that matters to the cache (how often it must fetch), and short enough that every
// configuration runs through three of them in 12 s, stopping a little before a fourth would start.
const EXPIRES_IN_S = 34;
const LIFETIMES = 3;
const RUN_MS = LIFETIMES * (EXPIRES_IN_S - 30) * 1000 - 300;
// Each instance takes one request at a time (as a Lambda instance does), then waits this long.
const THINK_MS = 20;
// A real IdP takes tens to hundreds of milliseconds: the window in which a burst of misses piles up.
const IDP_DELAY_MS = 50;
const LATENCY_WARMUP = 200;
const LATENCY_ROUNDS = 1000;
const COLD_ROUNDS = 15;
const TARGETS = { perKeyPerLifetime: 1.1, hitOverGetItem: 1.5 } as const;

type Handler = (event: APIGatewayProxyEventV2) => Promise<APIGatewayProxyStructuredResultV2>;
type Verdict = (measure: string, measured: string, target: string, pass?: boolean) => unknown;
interface Idp {
  origin: string;
  /** Token requests received, per client id. */
  requests: Map<string, number>;
  delayMs: number;
  expiresIn: number;
}

/**
 * Run the scenario on the bundle at `bundlePath` (under the repository, so its external `@aws-sdk/*`
 * resolves to node_modules as it resolves to the runtime's own copy in Lambda), its cold starts on
 * `workerNode`. Its targets go to `verdict`; its markdown section is returned.
 */
export async function fleetScenario(bundlePath: string, workerNode: string, verdict: Verdict): Promise<string> {
  const savedEnv = { ...process.env };
  // Before the first client: the SDK's notice that its 2027 releases need Node.js 22 says nothing here.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
  const dynamo = await startTable();
  const idp: Idp = { origin: '', requests: new Map(), delayMs: IDP_DELAY_MS, expiresIn: EXPIRES_IN_S };
  const server = createServer((request, response) => {
    // The client id of an HTTP Basic header: the key a request counts for.
    const clientId = decodeURIComponent(
      Buffer.from((request.headers.authorization ?? '').slice(6), 'base64')
        .toString()
        .split(':')[0] ?? '',
    );
    idp.requests.set(clientId, (idp.requests.get(clientId) ?? 0) + 1);
    request.resume();
    const answer = JSON.stringify({ access_token: `fleet-token-${Math.random()}`, token_type: 'Bearer', expires_in: idp.expiresIn });
    setTimeout(() => response.writeHead(200, { 'content-type': 'application/json' }).end(answer), idp.delayMs);
  });
  try {
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    idp.origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    // What the stack sets for the function; the instances run in this process.
    Object.assign(process.env, awsEnvironment(dynamo.endpoint), {
      POWERTOOLS_METRICS_NAMESPACE: 'TokenExchange',
      TOKEN_URL_ALLOWLIST: idp.origin,
      TOKEN_CACHE_TABLE: TABLE,
      UPSTREAM_TIMEOUT_MS: '5000',
    });
    for (const name of ['AWS_PROFILE', 'AWS_SESSION_TOKEN', 'AWS_ENDPOINT_URL', 'LOG_LEVEL', 'NODE_DEBUG']) delete process.env[name];
    const runs: FleetRun[] = [];
    for (const size of SIZES) for (const mode of MODES) runs.push(await runFleet(bundlePath, idp, mode, size));
    const latency = await measureLatency(bundlePath, idp, dynamo.endpoint);
    const cold = await measureColdStarts(bundlePath, workerNode, idp, dynamo.endpoint);

    const worst = Math.max(...runs.filter((run) => run.mode === 'shared').map((run) => run.perKeyPerLifetime));
    verdict(
      `Fleet: IdP token requests per key per lifetime, \`shared\`, K up to ${Math.max(...SIZES)}`,
      worst.toFixed(2),
      `at most ${TARGETS.perKeyPerLifetime}`,
      worst <= TARGETS.perKeyPerLifetime,
    );
    const [getItem, sharedHit] = [summarize(latency.getItem), summarize(latency.sharedHit)];
    const ratio = sharedHit.p50 / getItem.p50;
    verdict(
      'Fleet: shared-tier hit / bare SDK `GetItem`, same table, p50',
      `${ratio.toFixed(2)}x (${ms(sharedHit.p50)} / ${ms(getItem.p50)} ms)`,
      `at most ${TARGETS.hitOverGetItem}x`,
      ratio <= TARGETS.hitOverGetItem,
    );
    return render(runs, latency, cold);
  } finally {
    process.env = savedEnv;
    server.closeAllConnections();
    server.close();
    await dynamo.close();
  }
}

/** dynalite in a child process (so it does not share the handlers' event loop), with the cache table. */
async function startTable(): Promise<{ endpoint: string; close(): Promise<void> }> {
  const script =
    "const d = require('dynalite')({ createTableMs: 0 }); d.listen(0, '127.0.0.1', () => process.stdout.write(d.address().port + '\\n'));";
  const child = spawn(process.execPath, ['-e', script], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  const [chunk] = (await once(child.stdout, 'data')) as [Buffer];
  const endpoint = `http://127.0.0.1:${chunk.toString('utf8').trim()}`;
  const client = tableClient(endpoint);
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

const tableClient = (endpoint: string) =>
  new DynamoDBClient({ endpoint, region: 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' }, maxAttempts: 2 });

const request = (clientId: string, idp: Idp) =>
  tokenEvent({ client_id: clientId, client_secret: 'fleet-bench-secret', access_token_url: `${idp.origin}/token`, scope: 'read' });

/** A new function instance: the bundle's module loaded anew, configured from process.env as it is now. */
function freshInstance(bundlePath: string, mode: Mode): Handler {
  process.env.TOKEN_CACHE = mode;
  delete require.cache[require.resolve(bundlePath)];
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- a new module instance each time, on purpose
  return (require(bundlePath) as { handler: Handler }).handler;
}

/** The handlers' log lines while `act` runs (Lambda takes them from stdout; here they are kept, not printed). */
async function capturingLogs(act: () => Promise<unknown>): Promise<Record<string, unknown>[]> {
  const lines: Record<string, unknown>[] = [];
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((chunk: string | Uint8Array) => {
    for (const line of String(chunk).split('\n')) if (line.startsWith('{"level"')) lines.push(JSON.parse(line) as Record<string, unknown>);
    return true;
  }) as typeof process.stdout.write;
  try {
    await act();
    return lines;
  } finally {
    process.stdout.write = write;
  }
}

interface FleetRun {
  mode: Mode;
  size: number;
  requests: number;
  idpRequests: number;
  perKeyPerLifetime: number;
  /** Requests by the tier that answered, from the log lines. */
  tiers: Record<string, number>;
  cacheErrors: number;
}

async function runFleet(bundlePath: string, idp: Idp, mode: Mode, size: number): Promise<FleetRun> {
  Object.assign(idp, { delayMs: IDP_DELAY_MS, expiresIn: EXPIRES_IN_S });
  const instances = Array.from({ length: size }, () => freshInstance(bundlePath, mode));
  const keys = Array.from({ length: KEYS }, (_, index) => `fleet-${mode}-${size}-key${index}`);
  let requests = 0;
  const until = performance.now() + RUN_MS;
  const lines = await capturingLogs(() =>
    Promise.all(
      instances.map(async (handle, member) => {
        // Spread the instances' first requests over the keys, as independent callers would.
        for (let turn = member; performance.now() < until; turn++) {
          const answer = await handle(request(keys[turn % KEYS] as string, idp));
          requests++;
          // A count of IdP requests is worthless if some callers got no token: one failure stops the bench.
          if (answer.statusCode !== 200) throw new Error(`K=${size}, TOKEN_CACHE=${mode}: answered ${answer.statusCode}`);
          await sleep(THINK_MS);
        }
      }),
    ),
  );
  const idpRequests = keys.reduce((sum, key) => sum + (idp.requests.get(key) ?? 0), 0);
  const tiers: Record<string, number> = {};
  let cacheErrors = 0;
  for (const line of lines.filter((entry) => entry.message === 'token request')) {
    const tier = String(line.cache ?? 'none');
    tiers[tier] = (tiers[tier] ?? 0) + 1;
    if (line.cache_error !== undefined) cacheErrors++;
  }
  return { mode, size, requests, idpRequests, perKeyPerLifetime: idpRequests / KEYS / LIFETIMES, tiers, cacheErrors };
}

/**
 * One instance fills the table; a second, whose memory is empty, then asks for each key once: a
 * shared-tier hit each time, interleaved in a shuffled order with a bare SDK GetItem of an item of
 * the same table (its floor), a memory hit, a miss (read, lease, IdP, write) and a call with
 * TOKEN_CACHE=off. The IdP answers at once here, so a miss shows the table calls' own cost.
 */
async function measureLatency(bundlePath: string, idp: Idp, endpoint: string) {
  Object.assign(idp, { delayMs: 0, expiresIn: 3600 });
  const rounds = LATENCY_WARMUP + LATENCY_ROUNDS;
  const [direct, filler, reader] = [
    freshInstance(bundlePath, 'off'),
    freshInstance(bundlePath, 'shared'),
    freshInstance(bundlePath, 'shared'),
  ];
  const kept = (round: number) => `latency-kept-${round}`;
  await capturingLogs(async () => {
    for (let start = 0; start < rounds; start += 20) {
      await Promise.all(Array.from({ length: Math.min(20, rounds - start) }, (_, offset) => filler(request(kept(start + offset), idp))));
    }
  });
  // Any item the filler wrote: the bare read fetches a real sealed entry of the same size.
  const bare = tableClient(endpoint);
  const { Items } = await bare.send(new ScanCommand({ TableName: TABLE, Limit: 20 }));
  const item = Items?.find((candidate) => candidate[TABLE_SCHEMA.attributes.state] !== undefined);
  if (!item) throw new Error('no sealed item in the table');
  const getItem = new GetItemCommand({
    TableName: TABLE,
    Key: { [TABLE_SCHEMA.partitionKey.name]: item[TABLE_SCHEMA.partitionKey.name] as AttributeValue },
    ConsistentRead: true,
  });
  const samples = {
    getItem: [] as number[],
    sharedHit: [] as number[],
    memoryHit: [] as number[],
    sharedMiss: [] as number[],
    off: [] as number[],
  };
  await capturingLogs(async () => {
    for (let round = 0; round < rounds; round++) {
      const calls: [keyof typeof samples, () => Promise<unknown>][] = [
        ['getItem', () => bare.send(getItem)],
        ['sharedHit', () => expectCache(reader(request(kept(round), idp)), 'hit')],
        ['memoryHit', () => expectCache(reader(request(kept(0), idp)), 'hit')],
        ['sharedMiss', () => expectCache(reader(request(`latency-fresh-${round}`, idp)), 'miss')],
        ['off', () => direct(request(kept(round), idp))],
      ];
      // Fisher-Yates: every order equally likely.
      for (let i = calls.length - 1; i > 0; i--) {
        const j = Math.floor(Math.random() * (i + 1));
        [calls[i], calls[j]] = [calls[j] as (typeof calls)[number], calls[i] as (typeof calls)[number]];
      }
      for (const [name, call] of calls) {
        const before = performance.now();
        await call();
        if (round >= LATENCY_WARMUP) samples[name].push(performance.now() - before);
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
  });
  bare.destroy();
  return samples;
}

async function expectCache(answer: Promise<APIGatewayProxyStructuredResultV2>, cache: 'hit' | 'miss'): Promise<void> {
  const { statusCode, headers } = await answer;
  if (statusCode !== 200 || headers?.['x-token-cache'] !== cache) throw new Error(`expected a cache ${cache}, got ${statusCode}`);
}

// Runs in a fresh process: its clock counts from the process's start. The result goes to fd 3, as
// the runner's workers send theirs.
const COLD_WORKER = `
const { handler } = require(process.env.FLEET_BUNDLE);
handler(JSON.parse(process.env.FLEET_EVENT)).then((answer) => {
  const ms = performance.now();
  if (answer.statusCode !== 200) { process.stderr.write('answered ' + answer.statusCode); process.exit(1); }
  require('node:fs').writeSync(3, JSON.stringify({ ms, cache: answer.headers['x-token-cache'] }));
  process.exit(0);
});`;

/** Process start to first answer of a fresh process with `memory`, and with `shared` on a miss and on a hit. */
async function measureColdStarts(bundlePath: string, workerNode: string, idp: Idp, endpoint: string) {
  Object.assign(idp, { delayMs: 0, expiresIn: 3600 });
  const variants = [
    { name: '`memory`', mode: 'memory', key: (round: number) => `cold-memory-${round}`, cache: 'miss' },
    { name: '`shared`, token not in the table', mode: 'shared', key: (round: number) => `cold-miss-${round}`, cache: 'miss' },
    { name: '`shared`, token in the table', mode: 'shared', key: () => 'cold-kept', cache: 'hit' },
  ];
  const coldStart = async (variant: (typeof variants)[number], round: number): Promise<number> => {
    const result = (await runNode(workerNode, ['-e', COLD_WORKER], {
      ...awsEnvironment(endpoint),
      PATH: process.env.PATH ?? '',
      POWERTOOLS_METRICS_NAMESPACE: 'TokenExchange',
      TOKEN_URL_ALLOWLIST: idp.origin,
      TOKEN_CACHE: variant.mode,
      TOKEN_CACHE_TABLE: TABLE,
      FLEET_BUNDLE: bundlePath,
      FLEET_EVENT: JSON.stringify(request(variant.key(round), idp)),
    })) as { ms: number; cache: string };
    if (result.cache !== variant.cache) throw new Error(`${variant.name}: expected a cache ${variant.cache}, got ${result.cache}`);
    return result.ms;
  };
  // One start puts the kept token in the table; then one unrecorded round fills the file cache, and
  // the order rotates so no variant always runs first.
  const samples = variants.map(() => [] as number[]);
  await coldStart({ ...(variants[2] as (typeof variants)[number]), cache: 'miss' }, -1);
  for (let round = -1; round < COLD_ROUNDS; round++) {
    for (let offset = 0; offset < variants.length; offset++) {
      const index = (round + 1 + offset) % variants.length;
      const took = await coldStart(variants[index] as (typeof variants)[number], round);
      if (round >= 0) samples[index]?.push(took);
    }
  }
  return variants.map((variant, index) => ({ name: variant.name, ...summarize(samples[index]) }));
}

function render(
  runs: FleetRun[],
  latency: Awaited<ReturnType<typeof measureLatency>>,
  cold: Awaited<ReturnType<typeof measureColdStarts>>,
): string {
  const at = (mode: Mode, size: number) => runs.find((run) => run.mode === mode && run.size === size) as FleetRun;
  const timing = (label: string, samples: number[]) => {
    const s = summarize(samples);
    return row(label, ms(s.p50), ms(s.p99), s.n);
  };
  return `## Fleet: the shared token cache

Each function instance is a fresh module instance of the deployed bundle (its own memory tier, agents and DynamoDB
client), taking one request at a time as a Lambda instance does, ${THINK_MS} ms apart. All share one scripted IdP (http on
127.0.0.1, answering after ${IDP_DELAY_MS} ms) and one table in dynalite (a child process), reached through the real AWS SDK.
The IdP's tokens say \`expires_in: ${EXPIRES_IN_S}\`: with the 30 s minimum margin each is kept for ${EXPIRES_IN_S - 30} s. Each configuration
runs ${KEYS} keys (client ids) through ${LIFETIMES} lifetimes, every instance asking for the keys in turn.

IdP token requests per key per lifetime:

${table(
  ['Instances K', '`off`', '`memory`', '`shared`'],
  SIZES.map((size) => row(size, ...MODES.map((mode) => at(mode, size).perKeyPerLifetime.toFixed(2)))),
)}

Requests (every one answered 200), IdP requests, the tier that answered (from the log lines) and table errors:

${table(
  ['K', 'mode', 'requests', 'IdP requests', '`memory`', '`shared`', '`miss`', 'CacheErrors'],
  runs.map((run) =>
    row(
      run.size,
      run.mode,
      run.requests,
      run.idpRequests,
      run.tiers.memory ?? 0,
      run.tiers.shared ?? 0,
      run.tiers.miss ?? 0,
      run.cacheErrors,
    ),
  ),
)}

Hit latency of each tier: ${LATENCY_ROUNDS} rounds after ${LATENCY_WARMUP} unrecorded ones, each making every call below once in a shuffled
order, on an instance whose memory tier does not hold the shared-tier hit's key. Milliseconds:

${table(
  ['Call', 'p50', 'p99', 'n'],
  [
    timing('Bare SDK `GetItem` (`ConsistentRead`), the floor', latency.getItem),
    timing('Handler, shared-tier hit', latency.sharedHit),
    timing('Handler, memory-tier hit', latency.memoryHit),
    timing('Handler, miss with `shared` (read, lease, IdP, write)', latency.sharedMiss),
    timing('Handler, `off` (IdP only)', latency.off),
  ],
)}

Cold start with each cache: process start to first answer of a fresh process on the workers' Node, ${COLD_ROUNDS} rounds in
rotating order (the runtime's SDK stood in for by the same package from node_modules). Milliseconds:

${table(
  ['Variant', 'p50', 'p95'],
  cold.map((variant) => row(variant.name, ms(variant.p50), ms(variant.p95))),
)}`;
}
