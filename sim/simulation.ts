import { Deadline, type EpochMs } from '../lambda/clock';
import type { CredentialRequest } from '../lambda/credentials/access-policy';
import { ExchangeError, UpstreamThrottled } from '../lambda/errors';
import type { TokenRequest } from '../lambda/request/token-request';
import type { ItemState } from '../lambda/cache/core/item';
import { cacheSettings } from '../lambda/cache/core/settings';
import type { CacheReport } from '../lambda/cache/report';
import { assertionHoldKey, clientHoldKey, credentialHoldKey, requestText } from '../lambda/cache/request-key';
import { pepperSource } from '../lambda/cache/shell/pepper';
import { holdItemKeys, type ItemKeys, openState, requestItemKeys } from '../lambda/cache/shell/sealed-item';
import { SharedTier } from '../lambda/cache/shell/shared-tier';
import { TokenCache } from '../lambda/cache/shell/token-cache';
import { SimIdp } from './idp';
import { judge } from './judge';
import type { Answer, Asked, InstanceLife, PepperRead, SimRecord, Tampering, Violation } from './record';
import { type Scenario, type ScenarioKey, scenario as scenarioOf, type TamperAction, type TamperPlan, tableBehaviourAt } from './scenario';
import { type Attribute, type RawItem, SimTable } from './table';
import { type Owner, prng, World } from './world';

export interface SimResult {
  readonly seed: number;
  readonly scenario: Scenario;
  readonly record: SimRecord;
  readonly violations: readonly Violation[];
  /** What happened, one line an event, each with its time: a reader replays a failure from it. */
  readonly trace: readonly { readonly at: number; readonly line: string }[];
}

const TRACE_KEPT = 20_000;

interface Instance {
  readonly owner: Owner;
  readonly slot: number;
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
 * Run a scenario: a fleet of instances running the real cache code (memory tier, visit protocol,
 * driver, pepper source) over a simulated table, IdP, Secrets Manager and clocks, with the scenario's
 * trouble; then judge the record of what was seen from outside.
 */
export async function runScenario(plan: Scenario, random: () => number = prng(plan.seed)): Promise<SimResult> {
  const { seed } = plan;
  const world = new World();
  const trace: { at: number; line: string }[] = [];
  const note = (line: string) => {
    trace.push({ at: world.now, line });
    if (trace.length > TRACE_KEPT) trace.shift();
  };
  const settings = cacheSettings(plan.upstreamTimeoutMs);
  const eras = [0, ...plan.rotations];
  const pepperOf = (era: number) => Buffer.from(`simulated-pepper-${seed}-${era}-0123456789abcdefghij`);
  const names = itemNames(
    plan,
    eras.map((_, era) => pepperOf(era)),
  );
  const table = new SimTable(
    world,
    prng(seed ^ 0x5eed),
    (at, instance, pk) => tableBehaviourAt(plan.table, at, instance, names.get(pk)?.name),
    settings.callLimitMs,
    plan.ttlLagMs,
    (pk) => names.get(pk)?.name ?? '?',
    note,
  );
  table.describe = (pk, item) => describe(names.get(pk), item);
  const idp = new SimIdp(world, prng(seed ^ 0x1d9), plan.idp);
  const pepperReads: PepperRead[] = [];
  const pepperRandom = prng(seed ^ 0x9e99e);

  const lives: { -readonly [K in keyof InstanceLife]: InstanceLife[K] }[] = [];
  const instances: Instance[] = [];
  let serial = 0;
  const start = (slot: number): Instance => {
    const incarnation = lives.filter((life) => life.name.split('.')[0] === `i${slot}`).length;
    const owner: Owner = { name: incarnation === 0 ? `i${slot}` : `i${slot}.${incarnation}`, frozen: false, dead: false, deferred: [] };
    const skewMs = plan.skewsMs[slot] ?? 0;
    const runtime = world.runtime(owner, skewMs, prng(seed ^ (0x1000 + serial++)));
    const read = (deadline: Deadline): Promise<string> =>
      new Promise((resolve, reject) => {
        const record = {
          instance: owner.name,
          sentAt: world.now,
          answeredAt: undefined as number | undefined,
          fault: 'none' as PepperRead['fault'],
        };
        pepperReads.push(record);
        const trouble = plan.pepper.find(
          (phase) => phase.from <= world.now && world.now < phase.to && (phase.instance === undefined || phase.instance === slot),
        );
        if (trouble) record.fault = trouble.fault;
        if (trouble?.fault === 'hang') return void deadline.whenPassed(() => reject(Object.assign(new Error(), { name: 'TimeoutError' })));
        const era = eras.filter((at) => at <= world.now).length - 1;
        world.schedule(world.now + 2 + pepperRandom() * 8, owner, () => {
          if (trouble) return reject(Object.assign(new Error(), { name: 'InternalServiceError' }));
          record.answeredAt = world.now;
          resolve(pepperOf(era).toString('utf8'));
        });
      });
    const tier =
      plan.cache === 'shared'
        ? new SharedTier({ table: table.for(owner), settings, pepper: pepperSource(read, runtime, settings.pepper), runtime })
        : undefined;
    const instance: Instance = { owner, slot, cache: new TokenCache(tier, runtime, settings), runtime, busy: 0, queue: [] };
    instances[slot] = instance;
    lives.push({ name: owner.name, skewMs, bornAt: world.now, diedAt: undefined });
    note(`${owner.name} starts (clock ${skewMs} ms off)`);
    return instance;
  };

  const { traffic } = plan;
  const asked: Asked[] = [];
  const answers: Answer[] = [];
  const limit = traffic.kind === 'random' ? traffic.requests : traffic.arrivals.length;
  const episodeAt = (at: number) =>
    traffic.kind === 'random' ? traffic.episodes.find((episode) => episode.from <= at && at < episode.to) : undefined;

  /** A caller's next request to a Lambda-shaped instance, some time after its last answer, within a spell of traffic. */
  const next = (slot: number) => {
    if (traffic.kind !== 'random' || asked.length >= limit) return;
    const at = world.now + random() * traffic.thinkMs * 2;
    const episode = episodeAt(at) ?? traffic.episodes.find((later) => later.from > at);
    if (episode) world.schedule(Math.max(at, episode.from), undefined, () => send(slot));
  };
  const send = (slot: number, chosen?: { key: string; noCache?: boolean }): void => {
    const instance = instances[slot] as Instance;
    if (plan.mode === 'lambda' && instance.busy > 0) {
      instance.queue.push(() => send(slot, chosen));
      return;
    }
    if (!chosen && asked.length >= limit) return;
    const key = chosen
      ? (plan.keys.find((candidate) => candidate.id === chosen.key) as ScenarioKey)
      : (plan.keys[Math.floor(random() * plan.keys.length)] as ScenarioKey);
    const noCache = chosen ? chosen.noCache === true : traffic.kind === 'random' && random() < traffic.noCacheShare;
    const { owner, cache, runtime } = instance;
    if (instance.busy === 0 && owner.frozen) world.thaw(owner);
    instance.busy++;
    const id = asked.length;
    asked.push({ id, instance: owner.name, key: key.id, noCache, arrivedAt: world.now });
    note(`${owner.name} <- #${id} ${key.id}${noCache ? ' no-cache' : ''}`);
    const deadline = Deadline.after(runtime, plan.upstreamTimeoutMs);
    const finish = (answer: Omit<Answer, 'request' | 'answeredAt'>) => {
      if (owner.dead) return;
      instance.busy--;
      answers.push({ request: id, answeredAt: world.now, ...answer });
      note(
        `${owner.name} -> #${id} ${key.id} ${answer.status}${answer.header ? ` ${answer.header}` : ''}${answer.code ? ` ${answer.code}` : ''}${answer.token ? ` ${answer.token.slice(0, 12)}` : ''}${answer.retryAfter ? ` retry-after ${answer.retryAfter}` : ''} (${(world.now - (asked[id] as Asked).arrivedAt).toFixed(1)} ms)`,
      );
      if (plan.mode === 'lambda') {
        owner.frozen = true;
        const queued = instance.queue.shift();
        if (queued) world.schedule(world.now, undefined, queued);
        else next(slot);
      }
    };
    const report: CacheReport = {};
    cache
      .resolve({
        request: requestOf(key),
        tokenUrl: key.tokenUrl,
        noCache,
        arrivedAt: runtime.epoch() as EpochMs,
        deadline,
        exchange: idp.exchange(owner, key, id, deadline, () => note(`${owner.name} => IdP for #${id} ${key.id}`)),
        report,
      })
      .then(
        ({ token, header }) =>
          finish({
            status: 200,
            code: undefined,
            header,
            token: String(token.access_token),
            expiresIn: token.expires_in,
            extExpiresIn: token.ext_expires_in,
            retryAfter: undefined,
          }),
        (error: unknown) => {
          if (!(error instanceof ExchangeError)) throw error;
          finish({
            status: error.statusCode,
            code: error.code,
            header: undefined,
            token: undefined,
            expiresIn: undefined,
            extExpiresIn: undefined,
            retryAfter: error instanceof UpstreamThrottled ? error.retryAfterSeconds : undefined,
          });
        },
      );
  };

  for (let slot = 0; slot < plan.instances; slot++) start(slot);
  if (traffic.kind === 'scripted') {
    for (const arrival of traffic.arrivals) world.schedule(arrival.at, undefined, () => send(arrival.instance, arrival));
  } else if (plan.mode === 'lambda') {
    for (let slot = 0; slot < plan.instances; slot++) next(slot);
  } else {
    const spans = traffic.episodes.map((episode) => episode.to - episode.from);
    const total = spans.reduce((a, b) => a + b, 0);
    for (let index = 0; index < limit; index++) {
      let offset = random() * total;
      const episode =
        traffic.episodes.find((_, at) => (offset -= spans[at] as number) < 0) ?? (traffic.episodes[0] as { from: number; to: number });
      const at = episode.from + random() * (episode.to - episode.from);
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
      (lives.find((life) => life.name === dying.owner.name) as InstanceLife & { diedAt: number | undefined }).diedAt = world.now;
      note(`${dying.owner.name} dies with ${dying.busy} request(s) under way`);
      const successor = start(slot);
      successor.queue.push(...dying.queue);
      if (plan.mode === 'lambda')
        world.schedule(world.now + 100, undefined, () =>
          successor.queue.length > 0 ? (successor.queue.shift() as () => void)() : next(slot),
        );
    });
  }
  const tamperings: Tampering[] = [];
  for (const tampering of plan.tampering) {
    world.schedule(tampering.at, undefined, () => tamper(table, names, eras, tampering, random, world, note, tamperings));
  }
  for (const at of plan.rotations) world.schedule(at, undefined, () => note('the pepper is rotated'));

  await world.run(plan.durationMs * 4 + 600_000);
  const record: SimRecord = {
    upstreamTimeoutMs: plan.upstreamTimeoutMs,
    cache: plan.cache,
    mode: plan.mode,
    keys: plan.keys.map(({ secret: _secret, ...key }) => key),
    instances: lives,
    idpPhases: plan.idp,
    requests: asked,
    answers,
    idp: idp.calls,
    table: table.calls,
    pepper: pepperReads,
    tamperings,
    rotations: plan.rotations,
    deletions: table.deletions,
    endedAt: world.now,
  };
  return { seed, scenario: plan, record, violations: judge(record), trace };
}

function requestOf(key: ScenarioKey): TokenRequest | CredentialRequest {
  const common = { clientId: key.client, accessTokenUrl: key.tokenUrl, grantType: 'client_credentials', scope: key.scope } as const;
  switch (key.kind) {
    case 'assertion':
      return { ...common, authMethod: 'private_key_jwt', clientAssertion: 'assertion' };
    case 'credential':
      return { ...common, credential: key.credential as string, authMethod: 'client_secret_basic' };
    default:
      return { ...common, authMethod: 'client_secret_basic', clientSecret: key.secret };
  }
}

/** Every item key the fleet may write under each pepper, named for the record: a key's id, or `hold:` and its scope. */
function itemNames(plan: Scenario, peppers: readonly Buffer[]): Map<string, ItemKeys & { name: string; era: number }> {
  const names = new Map<string, ItemKeys & { name: string; era: number }>();
  for (const [era, pepper] of peppers.entries()) {
    for (const key of plan.keys) {
      const request = requestOf(key);
      if (key.kind !== 'assertion') {
        const keys = requestItemKeys(pepper, key.kind === 'credential' ? null : key.secret, requestText(request as never, key.tokenUrl));
        names.set(keys.itemKey, { ...keys, name: key.id, era });
      }
      const holds: [string, string][] = [
        [clientHoldKey(key.client, key.tokenUrl), `hold:${key.client}`],
        [assertionHoldKey(key.client, key.tokenUrl), `hold:${key.client}/jwt`],
        ...(key.credential ? [[credentialHoldKey(key.credential, key.tokenUrl), `hold:${key.credential}`] as [string, string]] : []),
      ];
      for (const [holdKey, name] of holds) {
        const keys = holdItemKeys(pepper, holdKey);
        names.set(keys.itemKey, { ...keys, name, era });
      }
    }
  }
  return names;
}

/**
 * What someone with write access and no pepper does to one item: retype its revision, rewrite it, put
 * back an older copy (or a run of them, one after another), write garbage, or delete it.
 */
function tamper(
  table: SimTable,
  names: Map<string, ItemKeys & { name: string; era: number }>,
  eras: readonly number[],
  planned: TamperPlan,
  random: () => number,
  world: World,
  note: (line: string) => void,
  tamperings: Tampering[],
): void {
  const era = eras.filter((at) => at <= world.now).length - 1;
  const current = [...names.entries()].filter(([, item]) => item.era === era);
  const pk = planned.key
    ? (current.find(([, item]) => item.name === planned.key)?.[0] as string)
    : ((current[Math.floor(random() * current.length)] as [string, unknown])[0] as string);
  const name = names.get(pk)?.name ?? '?';
  const actions: TamperAction[] = ['retype', 'rewrite', 'replay', 'garbage', 'delete'];
  const action = planned.action ?? (actions[Math.floor(random() * actions.length)] as TamperAction);
  const times = planned.times ?? 1;
  const everyMs = planned.everyMs ?? 100;
  // A run replays the item's versions from a random point, in the order they were written.
  const history = table.history.get(pk) ?? [];
  const first = Math.floor(random() * history.length);
  for (let index = 0; index < times; index++) {
    world.schedule(world.now + index * everyMs, undefined, () => {
      const item = table.peek(pk);
      let done: Tampering['action'] = action === 'replay-run' ? 'replay' : action;
      let of: number | undefined;
      switch (action) {
        case 'retype': {
          const retyped = [{ N: '7' }, { BOOL: true }, { NULL: true }, { L: [] }][Math.floor(random() * 4)] as Attribute;
          if (item) table.write(pk, { ...item, rev: retyped });
          break;
        }
        case 'rewrite':
          if (item) table.write(pk, { ...item, rev: { S: `forged-${Math.floor(random() * 1e6)}` } });
          break;
        case 'replay':
        case 'replay-run': {
          const old = action === 'replay' ? history[Math.floor(random() * history.length)] : history[first + index];
          if (!old) return;
          table.write(pk, old.item);
          of = old.at;
          done = 'replay';
          break;
        }
        case 'garbage':
          table.write(pk, { pk: { S: pk }, state: { B: Buffer.from([4, 1, 2, 3]) }, rev: { S: 'garbage' }, expires: { N: '99999999999' } });
          break;
        case 'delete':
          table.write(pk, undefined);
          break;
      }
      tamperings.push({ at: world.now, item: name, action: done, of });
      note(`adversary: ${done} ${name}${of === undefined ? '' : ` (a copy from ${of.toFixed(1)})`}`);
    });
  }
}

/** An item in a few words: its state's kind and what decides it. */
function describe(keys: (ItemKeys & { name: string }) | undefined, item: RawItem | undefined): string {
  if (!item) return 'absent';
  const state = keys && openItem(keys, item);
  const rev = JSON.stringify(item.rev);
  if (!state) return `garbage rev=${rev}`;
  if (state.kind === 'hold') return `hold until ${state.hold.until} rev=${rev}`;
  const kept = state.memo.kept ? `kept ${String(state.memo.kept.token.access_token).slice(0, 12)}` : 'nothing kept';
  const rejected = state.memo.rejectedAt ? ` rejected ${state.memo.rejectedAt}` : '';
  const { activity, ended } = state;
  const claimed =
    activity.kind === 'claim'
      ? `claim ${activity.claim.holder.slice(0, 4)} beat ${activity.claim.beat} left ${activity.claim.leftMs} echoes ${activity.claim.echoes.length}`
      : 'idle';
  const outcomes = ended.map(
    (outcome) =>
      `${outcome.holder.slice(0, 4)}: ${outcome.outcome.kind === 'failure' ? outcome.outcome.failure.code : `answered ${typeof outcome.outcome.token === 'string' ? outcome.outcome.token : String(outcome.outcome.token.token.access_token).slice(0, 12)}`}`,
  );
  return `${outcomes.length > 0 ? `${claimed} [${outcomes.join('; ')}]` : claimed}, ${kept}${rejected} rev=${rev}`;
}

function openItem(keys: ItemKeys, item: RawItem): ItemState | undefined {
  const expires = (item.expires as { N?: string } | undefined)?.N;
  const sealed = (item.state as { B?: Uint8Array } | undefined)?.B;
  return openState(keys, expires === undefined ? undefined : Number(expires), sealed);
}
