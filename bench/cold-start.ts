// Cold starts of the deployed bundle with each cache, and of the node:https baseline; `shared` uses the fleet's services.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tokenEvent } from '../local/api-gateway-event';
import { type Bench, ms, progress, ratio, row, runWorker, section, summarize } from './report';
import type { ColdResult } from './worker';

const [ROUNDS, TARGET_MS, SHARED_TARGET] = [30, 75, 1.5];
// A large platform's file: each credential with a secret or a key of its own, none of which the first request uses.
const STORED_CREDENTIALS = 300;
// One column each: TOKEN_CACHE, a new key each round or the one kept in the table, the `x-token-cache` expected.
const KINDS = [
  { name: 'Bundle', mode: 'off', fresh: false, cache: '' },
  { name: 'Baseline', mode: 'off', fresh: false, cache: '', subject: 'https' },
  { name: '`memory`', mode: 'memory', fresh: true, cache: '' },
  { name: '`shared`, not in the table', mode: 'shared', fresh: true, cache: 'miss' },
  { name: '`shared`, table hit', mode: 'shared', fresh: false, cache: 'hit' },
  { name: '300 stored credentials', mode: 'off', fresh: false, cache: '', credentials: STORED_CREDENTIALS },
];
const PHASES: [string, keyof ColdResult][] = [
  ["Node's start-up: process start to the script", 'bootMs'],
  ['`require()` of the bundle (baseline: of `node:https`)', 'loadMs'],
  ['First exchange (`shared`: the pepper awaited, then the table)', 'firstMs'],
  ['**Process start to first answer**', 'totalMs'],
];

/** A credentials file of `count` entries, half with a secret and half with a key, as the stack packages one. */
function credentialsFile(bench: Bench, count: number): string {
  const path = join(bench.dir, `credentials-${count}.json`);
  const entries = Array.from({ length: count }, (_, i) => ({
    name: `credential-${i}`,
    clientId: `client-${i}`,
    tokenUrl: bench.tokenUrl,
    ...(i % 2 === 0
      ? { method: 'client_secret_post', secretId: `bench/secret-${i}` }
      : { method: 'private_key_jwt', keyId: `alias/bench-${i}` }),
    scopes: ['read', 'write'],
    callers: [`arn:aws:iam::000000000000:role/service-${i}`, 'arn:aws:iam::000000000000:role/platform-*'],
  }));
  writeFileSync(path, JSON.stringify(entries));
  return path;
}

export async function coldStart(bench: Bench, servicesEnv: Record<string, string>): Promise<string> {
  progress(`cold starts: ${ROUNDS} fresh processes of each of ${KINDS.length} kinds`);
  const credentials = credentialsFile(bench, STORED_CREDENTIALS);
  const runs = KINDS.map(() => [] as ColdResult[]);
  const start = async (index: number, round: number) => {
    const kind = KINDS[index] as (typeof KINDS)[number];
    const [key, expect] = [kind.fresh ? `cold-${round}` : 'cold-kept', round < 0 ? '' : kind.cache];
    const event = JSON.stringify(tokenEvent({ client_id: key, client_secret: 's', access_token_url: bench.tokenUrl }));
    const subject = { BENCH_MODE: 'cold', BENCH_SUBJECT: kind.subject ?? 'handler', BENCH_EXPECT_CACHE: expect, BENCH_EVENT: event };
    const stored: Record<string, string> = kind.credentials ? { STORED_CREDENTIALS_FILE: credentials } : {};
    const result = (await runWorker(bench, { ...servicesEnv, ...subject, ...stored, TOKEN_CACHE: kind.mode })) as ColdResult;
    if (round >= 0) runs[index]?.push(result);
  };
  // The kinds take turns in rotating order, after an unrecorded round that fills the file cache and the table.
  for (let round = -1; round < ROUNDS; round++)
    for (let turn = 0; turn < KINDS.length; turn++) await start((round + 1 + turn) % KINDS.length, round);
  const summaries = (phase: keyof ColdResult) => runs.map((results) => summarize(results.map((result) => result[phase])));
  const [bundle, https, memory, , hit, stored] = summaries('totalMs');
  if (!bundle || !https || !memory || !hit || !stored) throw new Error('missing cold starts');
  const measured = (s: typeof bundle) => `${ms(s.p50)} ms (p95 ${ms(s.p95)} ms)`;
  bench.atMost('Cold start: process start to first exchange done, p50', measured(bundle), bundle.p50, TARGET_MS, ' ms');
  // The machine's own floor for the absolute target: no code can start faster than this.
  bench.verdict('Cold start of the baseline (`node:https` only), p50', measured(https), 'reported');
  const shared = `${ratio(hit.p50, memory.p50)}; p95 ${ms(hit.p95)} / ${ms(memory.p95)} ms`;
  bench.atMost('Cold start with `shared` (the pepper, a table hit) / with `memory`, p50', shared, hit.p50 / memory.p50, SHARED_TARGET, 'x');
  const withFile = `${ratio(stored.p50, bundle.p50)}; p95 ${ms(stored.p95)} / ${ms(bundle.p95)} ms`;
  bench.verdict(`Cold start with a file of ${STORED_CREDENTIALS} stored credentials / without, p50`, withFile, 'reported');
  const what = `${ROUNDS} fresh processes of each kind, rotating, each first exchange on a new TLS connection. Milliseconds`;
  const rows = PHASES.map(([label, phase]) => row(label, ...summaries(phase).flatMap((s) => [ms(s.p50), ms(s.p95)])));
  return section('## Cold start', what, ['Phase', ...KINDS.flatMap(({ name }) => [`${name} p50`, 'p95'])], rows);
}
