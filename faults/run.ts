// `npm run faults`: the shared cache under trouble, on a fleet of K processes (each its own instance, taking one request at a
// time as a Lambda execution environment does), beside the same fleet with TOKEN_CACHE=off, in the same run. Everything it
// reaches is on 127.0.0.1: the scripted IdP, dynalite behind a proxy that makes the table slow, hang or fail, and the pepper's
// stand-in. It prints a markdown table; docs/TOKEN-CACHE.md keeps the last one.
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { startTokenServer } from '../bench/fleet';
import { tokenEvent } from '../bench/report';
import { clientHoldKey } from '../lambda/cache/request-key';
import { holdItemKeys } from '../lambda/cache/sealed-item';
import { localAwsEnvironment, startLocalDynamoDb } from '../local/dynamodb-local';
import { type HandlerProcess, startHandlerProcess } from '../local/handler-process';
import { startLocalSecretsManager } from '../local/secrets-manager-local';
import { type ProxyMode, startTableProxy } from '../local/table-proxy';

if (process.argv.includes('--help') || process.argv.includes('-h')) {
  process.stdout.write(`npm run faults

Runs the shared token cache under trouble (a slow, hanging or failing table, a slow IdP, overload) on
a fleet of 8 processes, each its own function instance, beside the same fleet with TOKEN_CACHE=off,
all on 127.0.0.1, and prints a markdown table of what each trouble cost against off. No settings;
takes a few minutes.
`);
  process.exit(0);
}

const [K, DEADLINE_MS, SPAN_MS] = [8, 5000, 10_000];
// An `expires_in` under 30 s is never kept: every burst goes through the claim, the wait and the exchange again.
const UNKEPT_S = 20;
const [TABLE, PEPPER_SECRET, PEPPER] = ['faults', 'faults-pepper', randomBytes(32).toString('base64url')];

interface Trouble {
  readonly name: string;
  readonly idpMs: number;
  /** The table's trouble, given the scenario's hold item key (the proxy sees only item keys). */
  readonly table: (holdItemKey: string) => ProxyMode;
  /** Requests each instance has in flight: 1 as in Lambda, 50 for the overload shape. */
  readonly inFlight: number;
}

const TROUBLES: Trouble[] = [
  { name: 'IdP 4.0 s', idpMs: 4000, table: () => ({ kind: 'pass' }), inFlight: 1 },
  { name: 'IdP 4.6 s', idpMs: 4600, table: () => ({ kind: 'pass' }), inFlight: 1 },
  { name: 'table hangs, IdP 4.7 s', idpMs: 4700, table: () => ({ kind: 'hang' }), inFlight: 1 },
  { name: "the client's hold item answers in 3 s", idpMs: 50, table: (hold) => ({ kind: 'delay', ms: 3000, matching: hold }), inFlight: 1 },
  {
    name: "the client's hold item throttled",
    idpMs: 50,
    table: (hold) => ({ kind: 'error', status: 400, type: 'ProvisionedThroughputExceededException', matching: hold }),
    inFlight: 1,
  },
  { name: 'overload: 50 in flight per instance, IdP 4.0 s', idpMs: 4000, table: () => ({ kind: 'pass' }), inFlight: 50 },
];

interface Tally {
  ok: number;
  statuses: Map<number, number>;
  late: number;
  idpRequests: number;
  latenciesMs: number[];
}

async function main(): Promise<void> {
  setTimeout(() => (console.error('faults: gave up after 15 minutes'), process.exit(1)), 900_000).unref();
  const dynamodb = await startLocalDynamoDb({ tableName: TABLE });
  const secrets = await startLocalSecretsManager({ [PEPPER_SECRET]: PEPPER });
  const proxy = await startTableProxy(dynamodb.endpoint);
  const idp = await startTokenServer({ delayMs: 0, expiresIn: UNKEPT_S, failing: false });
  const tokenUrl = new URL(`${idp.origin}/token`).href;
  const env = (mode: 'off' | 'shared') => ({
    ...localAwsEnvironment({ dynamoDb: proxy.endpoint, secretsManager: secrets.endpoint }),
    TOKEN_CACHE: mode,
    TOKEN_CACHE_TABLE: TABLE,
    TOKEN_CACHE_PEPPER_SECRET: PEPPER_SECRET,
    UPSTREAM_TIMEOUT_MS: String(DEADLINE_MS),
    TOKEN_URL_ALLOWLIST: idp.origin,
    POWERTOOLS_METRICS_NAMESPACE: 'TokenExchange',
  });
  const fleets = {
    off: await Promise.all(Array.from({ length: K }, () => startHandlerProcess(env('off')))),
    shared: await Promise.all(Array.from({ length: K }, () => startHandlerProcess(env('shared')))),
  };
  const ask = (instance: HandlerProcess, clientId: string) =>
    instance.invoke(tokenEvent({ client_id: clientId, client_secret: 'faults-secret', access_token_url: tokenUrl }));
  // Warm: each instance has loaded its pepper and connected its SDK, as a warm Lambda instance has.
  await Promise.all([...fleets.off, ...fleets.shared].map((instance) => ask(instance, 'faults-warm')));

  const rows: string[] = [];
  for (const [index, trouble] of TROUBLES.entries()) {
    const tallies: Record<string, Tally> = {};
    for (const mode of ['off', 'shared'] as const) {
      // A fresh client per run: nothing kept, remembered or held from another.
      const clientId = `faults-${index}-${mode}`;
      Object.assign(idp.script, { delayMs: trouble.idpMs });
      proxy.set(trouble.table(holdItemKeys(Buffer.from(PEPPER, 'utf8'), clientHoldKey(clientId, tokenUrl)).itemKey));
      tallies[mode] = await drive(fleets[mode], (instance) => ask(instance, clientId), trouble.inFlight);
      tallies[mode].idpRequests = idp.requests.get(clientId)?.length ?? 0;
      proxy.set({ kind: 'pass' });
      // Calls the proxy held end at their call limit: let them, before the next run.
      await new Promise((resolve) => setTimeout(resolve, 1500));
    }
    const { off, shared } = tallies as Record<'off' | 'shared', Tally>;
    // Callers are back to back, so a slower answer means fewer answers: the share of answers that are 200s compares the modes.
    const share = (tally: Tally) => `${((tally.ok / Math.max(1, tally.latenciesMs.length)) * 100).toFixed(1)}%`;
    rows.push(`| ${trouble.name} | ${cells(off)} | ${cells(shared)} | ${share(shared)} / ${share(off)} |`);
    console.error(`faults: ${trouble.name} done`);
  }
  console.log(
    `K=${K} processes, ${DEADLINE_MS / 1000} s deadline, callers back to back for ${SPAN_MS / 1000} s, tokens never kept (\`expires_in\` ${UNKEPT_S}):\n`,
  );
  console.log('| Trouble | `off`: 200 / answered, IdP requests, p50 / p99 ms | `shared`: the same | answered `200`: `shared` / `off` |');
  console.log('|---|---:|---:|---:|');
  for (const row of rows) console.log(row);
  await Promise.all([...fleets.off, ...fleets.shared].map((instance) => instance.stop()));
  await Promise.all([proxy.close(), secrets.close(), dynamodb.close()]);
  process.exit(0);
}

/** Each instance's callers back to back for SPAN_MS (`inFlight` of them per instance); every answer counted, and how late. */
async function drive(instances: HandlerProcess[], ask: (instance: HandlerProcess) => Promise<{ statusCode?: number }>, inFlight: number) {
  const tally: Tally = { ok: 0, statuses: new Map(), late: 0, idpRequests: 0, latenciesMs: [] };
  const until = performance.now() + SPAN_MS;
  const caller = async (instance: HandlerProcess) => {
    while (performance.now() < until) {
      const sent = performance.now();
      const { statusCode = 0 } = await ask(instance);
      const tookMs = performance.now() - sent;
      tally.latenciesMs.push(tookMs);
      if (tookMs > DEADLINE_MS + 100) tally.late++;
      tally.statuses.set(statusCode, (tally.statuses.get(statusCode) ?? 0) + 1);
      if (statusCode === 200) tally.ok++;
    }
  };
  await Promise.all(instances.flatMap((instance) => Array.from({ length: inFlight }, () => caller(instance))));
  return tally;
}

function cells(tally: Tally): string {
  const answered = [...tally.statuses.values()].reduce((a, b) => a + b, 0);
  const others = [...tally.statuses].filter(([status]) => status !== 200).map(([status, count]) => `${count} ${status}`);
  const late = tally.late > 0 ? `, ${tally.late} past the deadline` : '';
  const sorted = [...tally.latenciesMs].sort((a, b) => a - b);
  const at = (q: number) => Math.round(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0);
  return `${tally.ok} / ${answered}${others.length > 0 ? ` (${others.join(', ')})` : ''}, ${tally.idpRequests}, ${at(0.5)} / ${at(0.99)}${late}`;
}

main().catch((error: unknown) => {
  console.error(`faults failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exit(1);
});
