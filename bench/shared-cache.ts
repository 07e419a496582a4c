// The shared token cache on a fleet (bench/fleet.ts): each scenario's comment says what it shows and why.
import { type AttributeValue, DynamoDBClient, GetItemCommand, ScanCommand } from '@aws-sdk/client-dynamodb';
import { epochMs } from '../lambda/clock';
import { ownEntry, type Phase, phaseOf } from '../lambda/cache/core/lifetime';
import { TABLE_SCHEMA } from '../lambda/cache/table-schema';
import { type Answer, type Fleet, type Instance, TABLE } from './fleet';
import { BENCH_TOKEN, ms, progress, ratio, row, section, summarize, tally } from './report';
import { measure } from './worker';

// `expires_in` 39 s: fresh 9 s, 4 s in the rest of the fleet (a copy from the table is 5 s older). A caller every 7.5 ms whatever
// K: at 60/K ms, K=32's 530 a second saturate this 2-core machine, and dynalite's answers pass the hedge.
const LIFE = { sizes: [1, 8, 32], modes: ['off', 'memory', 'shared'] as const, keys: 4, expiresIn: 39, lifetimes: 3, everyMs: 7.5 };
const LIFE_HEAD = ['K', 'mode', 'requests', 'IdP requests', 'per key per lifetime', 'answered by', 'CacheErrors'];
const [LATENCY_WARMUP, LATENCY_ROUNDS] = [200, 1000];
// Hits: 1.5 s of callers from 0.5 s (every instance has read the table); the span: as long from 2.5 s, the token turning at 3 s.
// One length, pooled over eight rounds: this process's GC pauses (tens of ms) fall at random into either. Only 3600 refreshes ahead.
const HOT = { size: 8, idpDelayMs: 300, everyMs: 1 as const, hitsFromMs: 500, spanFromMs: 2500, windowMs: 1500, turnMs: 3000, rounds: 8 };
// Stale as the outage begins, expired 30 s in (`expires_in` 300). A caller every 10 ms: at 2 ms this one process saturates.
const OUTAGE = { size: 32, keys: 4, everyMs: 10, forMs: 60_000, expiresIn: 300 };
const TARGETS = { perKeyPerLifetime: 1.1, hitOverGetItem: 1.5, hotOverHit: 1.5, outagePerKeyPerS: 1 } as const;
const keyNames = (prefix: string, count: number): string[] => Array.from({ length: count }, (_, i) => `${prefix}-${i}`);
const sum = (values: number[]): number => values.reduce((total, value) => total + value, 0);
/** The first age (to 100 ms) at which a token of `expiresIn` seconds is in one of `phases`, as lambda/cache/lifetime.ts has it. */
function ageAt(expiresIn: number, phases: Phase[]): { ms: number; phase: Phase } {
  const entry = ownEntry({ access_token: BENCH_TOKEN, expires_in: expiresIn }, epochMs(0), 'bench');
  for (let age = 0; ; age += 100) {
    const phase = phaseOf(entry, epochMs(age));
    if (phases.includes(phase)) return { ms: age, phase };
  }
}
/** Each scenario judges its targets; the first two also have a table, the others' lines of the targets table say it all. */
export async function sharedCache(fleet: Fleet): Promise<string> {
  progress("the fleet: a token's lifetimes at K = 1, 8, 32, each cache mode");
  const life = await lifetimes(fleet);
  progress('the fleet: hit latency, memory and table');
  const latency = await hitLatency(fleet);
  progress('the fleet: a hot key as its token turns');
  await hotKey(fleet);
  progress('the fleet: a 60 s IdP outage');
  await idpOutage(fleet);
  return ['## Fleet: the shared token cache', life, latency].join('\n\n');
}

async function lifetimes(fleet: Fleet): Promise<string> {
  const [rows, shared, { keys: count, lifetimes: times }] = [[] as string[], [] as number[], LIFE];
  for (const size of LIFE.sizes)
    for (const mode of LIFE.modes) {
      // A process per instance, each one warm (its pepper loaded), as Lambda's are: a cold start is the cold burst's subject.
      const [{ pool, stop }, keys] = [await fleet.processes(size, mode), keyNames(`life-${mode}-${size}`, count)];
      await Promise.all(pool.map((instance) => fleet.ask(instance, `life-warm-${mode}-${size}`)));
      fleet.reset({ expiresIn: LIFE.expiresIn });
      const answers = await fleet.arrivals(pool, keys, LIFE.everyMs, times * 4000 - 300, '*').finally(stop);
      const [idp, errors] = [sum(fleet.idpRequests(keys)), fleet.state.records.filter((record) => record.cache_error).length];
      if (mode === 'shared') shared.push(idp / count / times);
      const tiers = tally(fleet.state.records.map((record) => record.cache ?? 'none'));
      rows.push(row(size, mode, answers.length, idp, (idp / count / times).toFixed(2), tiers, errors));
    }
  const [most, label] = [Math.max(...shared), 'Fleet: IdP token requests per key per lifetime, `shared`, K up to 32'];
  fleet.bench.atMost(label, most.toFixed(2), most, TARGETS.perKeyPerLifetime);
  const what = `K processes, a caller every ${LIFE.everyMs} ms, ${count} keys, ${times} lifetimes of 4 s`;
  return section('### Token lifetimes', what, LIFE_HEAD, rows);
}
/** A filler fills the table; a reader asks for each key once (a shared hit), interleaved with a bare GetItem (the floor) and others. */
async function hitLatency(fleet: Fleet): Promise<string> {
  fleet.reset({ delayMs: 0 });
  const [off, filler, reader] = [...fleet.instances(1, 'off'), ...fleet.instances(2, 'shared')] as [Instance, Instance, Instance];
  const kept = keyNames('latency-kept', LATENCY_WARMUP + LATENCY_ROUNDS + 1);
  for (let from = 0; from < kept.length; from += 20) await Promise.all(kept.slice(from, from + 20).map((key) => fleet.ask(filler, key)));
  // The bare read fetches an item the filler wrote: a real sealed entry of the same size. The endpoint comes from process.env.
  const [bare, { name: pk }] = [new DynamoDBClient({ maxAttempts: 2 }), TABLE_SCHEMA.partitionKey];
  const { Items } = await bare.send(new ScanCommand({ TableName: TABLE, Limit: 1 }));
  const read = new GetItemCommand({ TableName: TABLE, Key: { [pk]: Items?.[0]?.[pk] as AttributeValue }, ConsistentRead: true });
  await fleet.ask(reader, kept[0] as string); // the memory hit's key
  // A call that did not take the path it stands for (a table call past its limit on a busy machine) is left out of n.
  let [hits, misses, direct] = [0, 0, 0];
  const call = (instance: Instance, key: () => string, cache: string) => () =>
    fleet.ask(instance, key()).then((answer) => answer.status === 200 && (cache === '*' || answer.cache === cache));
  const calls = {
    'Bare SDK `GetItem` (`ConsistentRead`), the floor': () => bare.send(read),
    'Handler, shared-tier hit': call(reader, () => kept[++hits] as string, 'hit'),
    'Handler, memory-tier hit': call(reader, () => kept[0] as string, 'hit'),
    'Handler, miss with `shared` (read, lease, IdP, write)': call(reader, () => `latency-fresh-${misses++}`, 'miss'),
    'Handler, `off` (IdP only)': call(off, () => kept[++direct] as string, '*'),
  };
  await measure(calls, LATENCY_WARMUP);
  const samples = Object.entries(await measure(calls, LATENCY_ROUNDS)).map(([label, times]) => [label, summarize(times)] as const);
  const [getItem = 0, shared = 0] = samples.map(([, s]) => s.p50);
  const label = 'Fleet: shared-tier hit / bare SDK `GetItem`, same table, p50';
  fleet.bench.atMost(label, ratio(shared, getItem), shared / getItem, TARGETS.hitOverGetItem, 'x');
  const rows = samples.map(([label, s]) => row(label, ms(s.p50), ms(s.p99), s.n));
  const what = `Every call once a round, shuffled, after ${LATENCY_WARMUP} unrecorded rounds; milliseconds`;
  return section('### Hit latency', what, ['Call', 'p50', 'p99', 'n'], rows);
}
/** HOT.size instances answer the callers of one key, whose kept token turns HOT.turnMs in (the fleet's clock moves on so that it does). */
async function hotKey(fleet: Fleet): Promise<void> {
  for (const expiresIn of [3600, 35]) {
    fleet.reset({ delayMs: HOT.idpDelayMs, expiresIn });
    const [keys, turn, answers] = [keyNames(`hot-${expiresIn}`, HOT.rounds), ageAt(expiresIn, ['refresh', 'stale']), [] as Answer[][]];
    for (const key of keys) {
      // A new fleet each round, warmed as a busy fleet is (V8 optimising eight fresh instances at once stalled this thread inside the
      // span), then a full GC; its first instance asks the IdP for the key, the others read the table on their first request.
      const [instances, counted] = [fleet.instances(HOT.size, 'shared'), fleet.state.records.length];
      for (let n = 0; n < 2000; n++) for (const instance of instances) await fleet.ask(instance, `${key}-warm`, '*');
      fleet.state.records.length = counted;
      (globalThis as { gc?: () => void }).gc?.(); // `npm run bench` exposes it: no major GC is due during the round
      await fleet.ask(instances[0] as Instance, key);
      fleet.state.shift += turn.ms - HOT.turnMs;
      answers.push(await fleet.arrivals(instances, [key], HOT.everyMs, HOT.spanFromMs + HOT.windowMs, '*'));
    }
    // A caller every `everyMs` (1): an answer's index is when it was due. The requests that called the table: a memory hit never does.
    const at = (from: number) => summarize(answers.flatMap((round) => round.slice(from, from + HOT.windowMs).map((answer) => answer.ms)));
    const [hits, span] = [at(HOT.hitsFromMs), at(HOT.spanFromMs)];
    const tableMs = fleet.state.records.flatMap((record) => record.cache_table_latency_ms ?? []);
    const calls = `${HOT.rounds} rounds: ${sum(fleet.idpRequests(keys))} IdP requests, ${tableMs.length} requests called the table (at most ${ms(Math.max(0, ...tableMs))} ms)`;
    const measured = `${ratio(span.p99, hits.p99)}; p50 ${ms(span.p50)} / ${ms(hits.p50)} ms, max ${ms(span.max)} ms, n ${span.n} / ${hits.n}; ${calls}`;
    const [label, over] = [`K=${HOT.size}, IdP ${HOT.idpDelayMs} ms, \`expires_in\` ${expiresIn}`, span.p99 / hits.p99];
    const { atMost, verdict } = fleet.bench;
    if (turn.phase === 'stale') verdict(`Hot key, no refresh ahead possible (the before), ${label}`, measured, 'reported');
    else atMost(`Hot key across a refresh ahead, ${label}: p99 of the span / of the hits`, measured, over, TARGETS.hotOverHit, 'x');
  }
}
/** The fleet keeps its tokens; then the IdP answers 500 for OUTAGE.forMs while the callers keep coming. */
async function idpOutage(fleet: Fleet): Promise<void> {
  fleet.reset({ expiresIn: OUTAGE.expiresIn });
  const [instances, keys] = [fleet.instances(OUTAGE.size, 'shared'), keyNames('outage', OUTAGE.keys)];
  for (const instance of instances) for (const key of keys) await fleet.ask(instance, key, instance === instances[0] ? 'miss' : 'hit');
  fleet.state.shift += ageAt(OUTAGE.expiresIn, ['stale']).ms;
  fleet.reset({ failing: true });
  const [started, answers] = [performance.now(), await fleet.arrivals(instances, keys, OUTAGE.everyMs, OUTAGE.forMs)];
  const [perKey, s] = [fleet.idpRequests(keys), OUTAGE.forMs / 1000];
  const seconds = keys.flatMap((key) => (fleet.idp.requests.get(key) ?? []).map((time) => `${key} ${Math.floor((time - started) / 1000)}`));
  const busiest = Math.max(0, ...seconds.map((second) => seconds.filter((other) => other === second).length));
  const answered = tally(answers.map((answer) => (answer.status === 200 ? `200 ${answer.cache}` : `${answer.status}`)));
  const label = `IdP outage (500) of ${s} s, K=${OUTAGE.size}, ${OUTAGE.keys} keys: IdP requests per key per second, the busiest key`;
  const details = `per key ${perKey.join(', ')}, at most ${busiest} in one second; answers: ${answered}`;
  const busiestKey = Math.max(...perKey) / s;
  fleet.bench.atMost(label, `${busiestKey.toFixed(2)} (${details})`, busiestKey, TARGETS.outagePerKeyPerS);
}
