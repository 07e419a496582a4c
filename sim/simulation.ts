import { openState } from '../lambda/cache/item-state';
import type { PepperSource } from '../lambda/cache/pepper';
import type { CacheReport } from '../lambda/cache/report';
import { clientHoldKey, requestText } from '../lambda/cache/request-key';
import { holdItemKeys, type ItemKeys, requestItemKeys } from '../lambda/cache/sealed-item';
import { callLimitFor, SharedTier } from '../lambda/cache/shared-tier';
import { monoMs } from '../lambda/cache/time';
import { TokenCache } from '../lambda/cache/token-cache';
import { ExchangeError } from '../lambda/errors';
import type { TokenRequest } from '../lambda/request/token-request';
import { type IdpRequest, SimIdp } from './idp';
import { Judge } from './judge';
import { type Scenario, type SimKey, scenario as scenarioOf, tableBehaviourAt, type Tampering } from './scenario';
import { type Attribute, SimTable } from './table';
import { type Owner, prng, World } from './world';

/** One request the simulation sent, and what its caller got. */
export interface Answered {
  readonly key: SimKey;
  readonly instance: string;
  readonly noCache: boolean;
  readonly arrivedAt: number;
  readonly answeredAt: number;
  readonly status: number;
  readonly code: string | undefined;
  readonly header: 'hit' | 'miss' | 'stale' | undefined;
  readonly token: string | undefined;
}

export interface Violation {
  readonly rule: string;
  readonly at: number;
  readonly detail: string;
}

export interface SimResult {
  readonly seed: number;
  readonly scenario: Scenario;
  readonly answered: number;
  readonly died: number;
  readonly idpRequests: number;
  readonly tableCalls: number;
  readonly violations: readonly Violation[];
  /** The last events before the first violation (or the end), one line each, for a reader to replay. */
  readonly trace: readonly string[];
  /** Every answer and every IdP request, in order: what a scripted scenario asserts on. */
  readonly answers: readonly Answered[];
  readonly sent: readonly IdpRequest[];
  /** Writes the table took for each key's item (key id), landed or refused. */
  readonly writes: ReadonlyMap<string, number>;
}

const TRACE_LINES = 400;

interface Instance {
  readonly owner: Owner;
  readonly cache: TokenCache;
  readonly runtime: ReturnType<World['runtime']>;
  busy: number;
  /** Requests waiting for a Lambda-shaped instance to be free. */
  readonly queue: (() => void)[];
}

/** Run one seed: its scenario, with `requests` requests of random traffic. */
export function simulate(seed: number, requests: number): Promise<SimResult> {
  const random = prng(seed);
  return runScenario(scenarioOf(seed, requests, random), random);
}

/**
 * Run a scenario: a fleet of instances running the real cache code (memory tier, protocol, driver)
 * over a simulated table, IdP and clocks, with the scenario's trouble, checking every invariant as it
 * goes. `random` decides what the scenario leaves to chance.
 */
export async function runScenario(plan: Scenario, random: () => number = prng(plan.seed)): Promise<SimResult> {
  const { seed } = plan;
  const world = new World();
  const trace: string[] = [];
  const note = (line: string) => {
    trace.push(`${world.now.toFixed(1).padStart(10)} ${line}`);
    if (trace.length > TRACE_LINES) trace.shift();
  };
  const T = plan.upstreamTimeoutMs;
  const callLimitMs = callLimitFor(T);
  const itemKeys = new Map<string, ItemKeys & { key: string }>();
  const table = new SimTable(
    world,
    prng(seed ^ 0x5eed),
    (at, instance, pk) => tableBehaviourAt(plan.table, at, instance, itemKeys.get(pk)?.key),
    callLimitMs,
    note,
  );
  const idp = new SimIdp(world, prng(seed ^ 0x1d9), plan.idp);
  const pepper = Buffer.from(`simulated-pepper-${seed}-0123456789abcdef`);
  const pepperSource: PepperSource = { get: async () => pepper };
  const requestOf = (key: SimKey): TokenRequest =>
    key.assertion
      ? {
          clientId: key.client,
          accessTokenUrl: key.tokenUrl,
          grantType: 'client_credentials',
          scope: key.scope,
          authMethod: 'private_key_jwt',
          clientAssertion: 'assertion',
        }
      : {
          clientId: key.client,
          accessTokenUrl: key.tokenUrl,
          grantType: 'client_credentials',
          scope: key.scope,
          authMethod: 'client_secret_basic',
          clientSecret: key.secret,
        };
  for (const key of plan.keys) {
    if (!key.assertion) {
      const request = requestOf(key) as Extract<TokenRequest, { clientSecret: string }>;
      const keys = requestItemKeys(pepper, key.secret, requestText(request, key.tokenUrl));
      itemKeys.set(keys.itemKey, { ...keys, key: key.id });
    }
    const hold = holdItemKeys(pepper, clientHoldKey(key.client, key.tokenUrl));
    itemKeys.set(hold.itemKey, { ...hold, key: `hold:${key.client}` });
  }
  table.describe = (pk, item) => describe(itemKeys.get(pk), item);
  const judge = new Judge(plan, idp, table, itemKeys, note);

  const instances: Instance[] = [];
  let serial = 0;
  const start = (slot: number): Instance => {
    const owner: Owner = { name: `i${slot}`, frozen: false, dead: false, deferred: [] };
    const runtime = world.runtime(owner, plan.skewsMs[slot] ?? 0, prng(seed ^ (0x1000 + serial++)));
    const tier =
      plan.cache === 'shared'
        ? new SharedTier({ table: table.for(owner), upstreamTimeoutMs: T, callLimitMs, pepper: pepperSource, runtime })
        : undefined;
    const instance = { owner, cache: new TokenCache(tier, runtime, T), runtime, busy: 0, queue: [] };
    instances[slot] = instance;
    note(`${owner.name} starts (clock ${plan.skewsMs[slot] ?? 0} ms off)`);
    return instance;
  };

  const traffic = plan.traffic;
  const requests = traffic.kind === 'random' ? traffic.requests : traffic.arrivals.length;
  let sent = 0;
  let died = 0;
  const answers: Answered[] = [];
  /** A caller's next request to a Lambda-shaped instance, some time after its last answer. */
  const next = (slot: number) => {
    if (traffic.kind === 'random' && sent < requests)
      world.schedule(world.now + random() * traffic.thinkMs * 2, undefined, () => send(slot));
  };
  const send = (slot: number, chosen?: { key: string; noCache?: boolean }): void => {
    const instance = instances[slot] as Instance;
    if (plan.mode === 'lambda' && instance.busy > 0) {
      instance.queue.push(() => send(slot, chosen));
      return;
    }
    const key = chosen
      ? (plan.keys.find((candidate) => candidate.id === chosen.key) as SimKey)
      : (plan.keys[Math.floor(random() * plan.keys.length)] as SimKey);
    const noCache = chosen ? chosen.noCache === true : traffic.kind === 'random' && random() < traffic.noCacheShare;
    const { owner, cache, runtime } = instance;
    if (instance.busy === 0 && owner.frozen) world.thaw(owner);
    instance.busy++;
    sent++;
    const arrivedAt = world.now;
    note(`${owner.name} <- ${key.id}${noCache ? ' no-cache' : ''}`);
    const report: CacheReport = {};
    const finish = (status: number, code: string | undefined, header: Answered['header'], token: string | undefined) => {
      if (owner.dead) return;
      instance.busy--;
      const answer: Answered = { key, instance: owner.name, noCache, arrivedAt, answeredAt: world.now, status, code, header, token };
      answers.push(answer);
      note(
        `${owner.name} -> ${key.id} ${status}${header ? ` ${header}` : ''}${code ? ` ${code}` : ''}${token ? ` ${token}` : ''} (${(world.now - arrivedAt).toFixed(1)} ms)`,
      );
      judge.answered(answer);
      if (plan.mode === 'lambda') {
        owner.frozen = true;
        const queued = instance.queue.shift();
        if (queued) world.schedule(world.now, undefined, queued);
        else next(slot);
      }
    };
    const authentic = key.assertion || plan.secrets.get(key.client) === key.secret;
    cache
      .resolve({
        request: requestOf(key),
        tokenUrl: key.tokenUrl,
        noCache,
        arrivedAt: runtime.epoch(),
        deadline: monoMs(runtime.mono() + T),
        exchange: tracedExchange(idp.exchange(owner, key.id, key.client, authentic, arrivedAt), () =>
          note(`${owner.name} => IdP ${key.id}`),
        ),
        report,
      })
      .then(
        (answer) => finish(200, undefined, answer.header, String(answer.token.access_token)),
        (error: unknown) => {
          if (!(error instanceof ExchangeError)) throw error;
          finish(error.statusCode, error.code, undefined, undefined);
        },
      );
  };

  for (let slot = 0; slot < plan.instances; slot++) start(slot);
  if (traffic.kind === 'scripted') {
    for (const arrival of traffic.arrivals) world.schedule(arrival.at, undefined, () => send(arrival.instance, arrival));
  } else if (plan.mode === 'lambda') {
    for (let slot = 0; slot < plan.instances; slot++) world.schedule(random() * traffic.thinkMs, undefined, () => send(slot));
  } else {
    let at = 0;
    for (let index = 0; index < requests; index++) {
      at += random() * traffic.thinkMs * (2 / plan.instances);
      const slot = Math.floor(random() * plan.instances);
      world.schedule(at, undefined, () => send(slot));
    }
  }
  for (const death of plan.deaths) {
    world.schedule(death.at, undefined, () => {
      const slot = death.instance ?? instances.findIndex((instance) => instance.busy > 0 && !instance.owner.dead);
      if (slot < 0) return;
      const dying = instances[slot] as Instance;
      dying.owner.dead = true;
      died += dying.busy;
      note(`${dying.owner.name} dies with ${dying.busy} request(s) under way`);
      judge.died(world.now, dying.owner.name);
      const queued = start(slot).queue;
      queued.push(...dying.queue);
      if (plan.mode === 'lambda')
        world.schedule(world.now + 100, undefined, () => (queued.length > 0 ? (queued.shift() as () => void)() : next(slot)));
    });
  }
  for (const tampering of plan.tampering) {
    world.schedule(tampering.at, undefined, () => tamper(table, itemKeys, tampering, random, world, note, judge));
  }

  await world.run(plan.durationMs * 4 + 120_000, () => judge.violations.length > 0);
  judge.finish();
  const writes = new Map<string, number>();
  for (const [pk, count] of table.writes) writes.set(itemKeys.get(pk)?.key ?? pk, count);
  return {
    seed,
    scenario: plan,
    answered: answers.length,
    died,
    idpRequests: idp.requests.length,
    tableCalls: table.calls,
    violations: judge.violations,
    trace,
    answers,
    sent: idp.requests,
    writes,
  };
}

function tracedExchange(exchange: ReturnType<SimIdp['exchange']>, noteSend: () => void): ReturnType<SimIdp['exchange']> {
  return (timeoutMs) => {
    noteSend();
    return exchange(timeoutMs);
  };
}

/**
 * What someone with write access and no pepper does to one item: retype its revision, rewrite it, put
 * back an older copy, write garbage, or delete it, once or again and again (100 ms apart).
 */
function tamper(
  table: SimTable,
  keys: Map<string, ItemKeys & { key: string }>,
  planned: Scenario['tampering'][number],
  random: () => number,
  world: World,
  note: (line: string) => void,
  judge: Judge,
): void {
  const pks = [...keys.keys()];
  const pk = planned.key
    ? ([...keys.entries()].find(([, candidate]) => candidate.key === planned.key)?.[0] as string)
    : (pks[Math.floor(random() * pks.length)] as string);
  const actions: Tampering[] = ['retype', 'rewrite', 'replay', 'garbage', 'delete'];
  const action = planned.action ?? (actions[Math.floor(random() * actions.length)] as Tampering);
  const times = planned.times ?? (random() < 0.3 ? 1 + Math.floor(random() * 20) : 1);
  for (let index = 0; index < times; index++) {
    world.schedule(world.now + index * 100, undefined, () => {
      const item = table.items.get(pk);
      judge.tampered(pk, world.now);
      switch (action) {
        case 'retype': {
          const retyped = [{ N: '7' }, { BOOL: true }, { NULL: true }, { L: [] }][Math.floor(random() * 4)] as Attribute;
          if (item) table.write(pk, { ...item, rev: retyped });
          break;
        }
        case 'rewrite':
          if (item) table.write(pk, { ...item, rev: { S: `forged-${Math.floor(random() * 1e6)}` } });
          break;
        case 'replay': {
          const past = table.history.get(pk) ?? [];
          const old = past[Math.floor(random() * past.length)];
          if (old) table.write(pk, { ...old, rev: { S: `replay-${Math.floor(random() * 1e6)}` } });
          break;
        }
        case 'garbage':
          table.write(pk, { pk: { S: pk }, state: { B: Buffer.from([3, 1, 2, 3]) }, rev: { S: 'garbage' }, expires: { N: '99999999999' } });
          break;
        case 'delete':
          table.write(pk, undefined);
          break;
      }
      note(`adversary: ${action} ${pk.slice(0, 6)}`);
    });
  }
}

/** An item in a few words: its state's kind and what decides it. */
function describe(keys: (ItemKeys & { key: string }) | undefined, item: Record<string, unknown> | undefined): string {
  if (!item) return 'absent';
  const state = keys && openItem(keys, item);
  const rev = JSON.stringify(item.rev);
  if (!state) return `garbage rev=${rev}`;
  if (state.kind === 'hold') return `hold until ${state.hold.until} rev=${rev}`;
  const kept = state.memo.kept ? `kept ${String(state.memo.kept.token.access_token)}` : 'nothing kept';
  const rejected = state.memo.rejectedAt ? ` rejected ${state.memo.rejectedAt}` : '';
  const { activity, ended } = state;
  const claimed =
    activity.kind === 'claim'
      ? `claim ${activity.claim.holder.slice(0, 4)} beat ${activity.claim.beat} left ${activity.claim.leftMs} run ${activity.claim.runMs.toFixed(0)}`
      : 'idle';
  const outcomes = ended.map(
    (outcome) =>
      `${outcome.holder.slice(0, 4)}: ${outcome.outcome.kind === 'failure' ? outcome.outcome.failure.code : `answered ${String(outcome.outcome.entry.token.access_token)}`}`,
  );
  const what = outcomes.length > 0 ? `${claimed} [${outcomes.join('; ')}]` : claimed;
  return `${what}, ${kept}${rejected} rev=${rev}`;
}

/** Open a table item the way the function would (the simulation knows the pepper), for the judge and the trace. */
export function openItem(keys: ItemKeys, item: { expires?: unknown; state?: unknown } | undefined) {
  if (!item) return undefined;
  const expires = (item.expires as { N?: string } | undefined)?.N;
  const sealed = (item.state as { B?: Uint8Array } | undefined)?.B;
  return openState(keys, expires === undefined ? undefined : Number(expires), sealed);
}

export type { IdpRequest };
