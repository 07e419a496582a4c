import type { IdpAnswer, IdpPhase, SimKey, Tampering } from './record';
import type { TableBehaviour } from './table';
import { prng } from './world';

/** A key as the simulation sends it: its identity for the record, and the secret its requests carry. */
export interface ScenarioKey extends SimKey {
  readonly secret: string;
}

/** What someone with write access and no pepper does: one action, or a run of an item's recorded versions written back one after another. */
export type TamperAction = Tampering['action'] | 'replay-run';

export interface TamperPlan {
  readonly at: number;
  /** The key (id) whose item it is, `hold:` and a client for its hold item; else one at random. */
  readonly key?: string;
  readonly action?: TamperAction;
  /** How many times in a row, `everyMs` apart (a replay run: how many versions, and their pace). */
  readonly times?: number;
  readonly everyMs?: number;
}

/** Who sends what when: callers within episodes of activity, or requests given one by one. */
export type Traffic =
  | {
      readonly kind: 'random';
      readonly requests: number;
      readonly thinkMs: number;
      readonly noCacheShare: number;
      /** Spells of activity: time passes between them at no cost, so a token's whole life fits in a run. */
      readonly episodes: readonly { readonly from: number; readonly to: number }[];
    }
  | {
      readonly kind: 'scripted';
      readonly arrivals: readonly { readonly at: number; readonly instance: number; readonly key: string; readonly noCache?: boolean }[];
    };

/** The Secrets Manager holding the pepper over time, for all or one instance. */
export interface PepperPhase {
  readonly from: number;
  readonly to: number;
  readonly fault: 'error' | 'hang';
  readonly instance?: number;
}

export interface TablePhase {
  readonly from: number;
  readonly behaviour: TableBehaviour;
  readonly instance?: string;
  readonly item?: string;
}

/** Everything one run decides: the fleet, the keys, the IdP, the table, the pepper and the trouble. */
export interface Scenario {
  readonly seed: number;
  /** `shared`: memory and the table; `memory`: each instance's memory alone. */
  readonly cache: 'shared' | 'memory';
  readonly upstreamTimeoutMs: number;
  /** `lambda`: one request at a time per instance, frozen between them; `concurrent`: many at once, never frozen. */
  readonly mode: 'lambda' | 'concurrent';
  readonly instances: number;
  /** Each instance's wall clock, off the true time by up to half the Clocks rule's 5 s either way (all 0: in step). */
  readonly skewsMs: readonly number[];
  readonly keys: readonly ScenarioKey[];
  readonly idp: readonly IdpPhase[];
  /** The table over time: for all, or for one instance's calls (`instance`), or for one item's (`item`: a key id, or `hold:` and the client). */
  readonly table: readonly TablePhase[];
  /** How long after an item's TTL the table deletes it. */
  readonly ttlLagMs: number;
  readonly pepper: readonly PepperPhase[];
  /** When the pepper secret is rotated. */
  readonly rotations: readonly number[];
  /** When an instance dies (`instance`: that one, else a busy one), replaced by a fresh one. */
  readonly deaths: readonly { readonly at: number; readonly instance?: number }[];
  readonly tampering: readonly TamperPlan[];
  readonly traffic: Traffic;
  /** How long the traffic lasts. */
  readonly durationMs: number;
}

const TOKEN_URL = 'https://idp.example/token';
const LIFETIMES: readonly (number | string | undefined)[] = [undefined, 25, 35, 60, 120, 120, 3600, 3600, '3600', 259_200];

/**
 * The scenario of a seed: `requests` is the traffic it aims at. Half the seeds also meet trouble
 * where the traffic is, drawn from a stream of their own, so that the other half keep the scenarios
 * they always had.
 */
export function scenario(seed: number, requests: number, random: () => number): Scenario {
  const drawn = drawnScenario(seed, requests, random);
  const more = prng(seed ^ 0x5eed_cafe);
  return more() < 0.5 ? troubleAtBursts(drawn, more) : drawn;
}

/** A seed's scenario as drawn before trouble at the bursts was added (a test replays a seed found then). */
export function drawnScenario(seed: number, requests: number, random: () => number): Scenario {
  const pick = <T>(choices: readonly T[]): T => choices[Math.floor(random() * choices.length)] as T;
  const chance = (p: number) => random() < p;
  const upstreamTimeoutMs = pick([5000, 5000, 5000, 2000, 1000]);
  const mode = chance(0.8) ? 'lambda' : 'concurrent';
  const instances = 2 + Math.floor(random() * 7);
  const thinkMs = pick([20, 200, 1000, 3000]);
  const lifetime = pick(LIFETIMES);
  const bytes = chance(0.05) ? pick([250_000, 450_000]) : undefined;
  const keys = keysOf(random, chance);
  const episodes = episodesOf(requests, instances, thinkMs, lifetime, random);
  const durationMs = (episodes.at(-1) as { to: number }).to;
  const inStep = chance(0.5);
  return {
    seed,
    cache: chance(0.85) ? 'shared' : 'memory',
    upstreamTimeoutMs,
    mode,
    instances,
    skewsMs: Array.from({ length: instances }, () => (inStep ? 0 : Math.round((random() - 0.5) * 5000))),
    keys,
    idp: idpPhases(
      episodes,
      upstreamTimeoutMs,
      { kind: 'token', expiresIn: lifetime, ...(bytes ? { bytes } : {}), ...(chance(0.2) ? { extExpiresIn: lifetime } : {}) },
      random,
    ),
    table: tablePhases(durationMs, instances, keys, random),
    ttlLagMs: pick([0, 1000, 60_000, 3_600_000, 48 * 3_600_000]),
    pepper: chance(0.1) ? [pepperTrouble(durationMs, instances, random)] : [],
    rotations: chance(0.15) ? [Math.floor(random() * durationMs)] : [],
    deaths: chance(0.2) ? times(durationMs, 1 + Math.floor(random() * 3), random).map((at) => ({ at })) : [],
    tampering: chance(0.2) ? times(durationMs, 1 + Math.floor(random() * 10), random).map((at) => tamperPlan(at, random)) : [],
    traffic: { kind: 'random', requests, thinkMs, noCacheShare: chance(0.3) ? 0.05 : 0, episodes },
    durationMs,
  };
}

/**
 * Trouble at the moments that decide the most: a spell's first requests, which arrive together and
 * race for one exchange. The table turns slow (as a loaded machine's, 200-300 ms), hangs, fails or
 * loses answers just before; the IdP turns slow near the deadline, rejects, throttles or fails; a
 * busy holder dies; an item's versions are written back at table speed. Sometimes a token too large
 * to share, or a flood of `no-cache`.
 */
function troubleAtBursts(drawn: Scenario, random: () => number): Scenario {
  const episodes = drawn.traffic.kind === 'random' ? drawn.traffic.episodes : [];
  const pick = <T>(choices: readonly T[]): T => choices[Math.floor(random() * choices.length)] as T;
  const table: TablePhase[] = [...drawn.table];
  const idp: IdpPhase[] = [...drawn.idp];
  const deaths = [...drawn.deaths];
  const tampering = [...drawn.tampering];
  const timeoutMs = drawn.upstreamTimeoutMs;
  const [token] = drawn.idp.map((phase) => phase.answer).filter((answer) => answer.kind === 'token');
  for (const { from } of episodes) {
    if (random() < 0.6) {
      const at = Math.max(0, from - random() * 300);
      const behaviour = pick<TableBehaviour>([
        { kind: 'slow', minMs: 200, maxMs: 300 },
        { kind: 'slow', minMs: 200, maxMs: 300 },
        { kind: 'hang' },
        { kind: 'error' },
        { kind: 'lost-answer' },
        { kind: 'retried' },
      ]);
      const scope = random();
      const key = pick(drawn.keys);
      const where =
        scope < 0.2
          ? { instance: `i${Math.floor(random() * drawn.instances)}` }
          : scope < 0.35
            ? { item: random() < 0.5 ? key.id : `hold:${key.client}` }
            : {};
      table.push(
        { from: at, behaviour, ...where },
        { from: from + 300 + random() * 3000, behaviour: { kind: 'normal', minMs: 1, maxMs: 12 }, ...where },
      );
    }
    if (token && random() < 0.4) {
      const answer = pick<IdpPhase>([
        { from, minMs: timeoutMs * 0.75, maxMs: timeoutMs * 0.95, answer: token },
        { from, minMs: 5, maxMs: 50, answer: { kind: 'reject' } },
        { from, minMs: 5, maxMs: 50, answer: { kind: 'throttle', retryAfter: 1 + Math.floor(random() * 10) } },
        { from, minMs: 5, maxMs: 200, answer: { kind: 'error' } },
      ]);
      idp.push(answer, { from: from + 200 + random() * 4000, minMs: 5, maxMs: 50, answer: token });
    }
    if (random() < 0.25) deaths.push({ at: from + random() * 300 });
    if (random() < 0.25)
      tampering.push({
        at: from + random() * 500,
        action: 'replay-run',
        times: 2 + Math.floor(random() * 12),
        everyMs: pick([2, 10, 250]),
      });
  }
  const big = random() < 0.15 ? pick([350_000, 450_000]) : undefined;
  const sized = (phase: IdpPhase): IdpPhase =>
    big && phase.answer.kind === 'token' ? { ...phase, answer: { ...phase.answer, bytes: big } } : phase;
  const { traffic } = drawn;
  return {
    ...drawn,
    table: table.sort((a, b) => a.from - b.from),
    idp: idp.map(sized).sort((a, b) => a.from - b.from),
    deaths: deaths.sort((a, b) => a.at - b.at),
    tampering: tampering.sort((a, b) => a.at - b.at),
    traffic: traffic.kind === 'random' && random() < 0.15 ? { ...traffic, noCacheShare: 0.3 } : traffic,
  };
}

/** One or two clients, each with one or two scopes; sometimes a wrong secret, a caller's assertion, a stored credential. */
function keysOf(random: () => number, chance: (p: number) => boolean): ScenarioKey[] {
  const clients = ['client-a', 'client-b'].slice(0, chance(0.5) ? 1 : 2);
  const tokenUrls = chance(0.8) ? [TOKEN_URL] : [TOKEN_URL, `${TOKEN_URL}?tenant=2`];
  const keys: ScenarioKey[] = [];
  for (const client of clients) {
    const tokenUrl = tokenUrls[Math.floor(random() * tokenUrls.length)] as string;
    const key = (
      id: string,
      scope: string,
      kind: ScenarioKey['kind'],
      secret: string,
      authentic: boolean,
      credential?: string,
    ): ScenarioKey => ({
      id: `${client}/${id}`,
      client,
      tokenUrl,
      scope,
      kind,
      secret,
      authentic,
      ...(credential ? { credential } : {}),
    });
    for (const scope of chance(0.5) ? ['read'] : ['read', 'write']) keys.push(key(scope, scope, 'secret', `${client}-secret`, true));
    if (chance(0.3)) keys.push(key('wrong', 'read', 'secret', 'wrong-secret', false));
    if (chance(0.2)) keys.push(key('jwt', 'read', 'assertion', '', true));
    if (chance(0.2)) keys.push(key('cred', 'read', 'credential', '', true, `${client}-cred`));
  }
  return keys;
}

/**
 * Spells of traffic: the first at 0, each later one where the last spell's tokens are in a phase
 * worth reaching (their refresh window, stale, the last seconds of their life, just expired, or
 * expired a lifetime ago), so that hour-long tokens pass through every phase in one run.
 */
function episodesOf(requests: number, instances: number, thinkMs: number, lifetime: number | string | undefined, random: () => number) {
  const count = 1 + Math.floor(random() * 4);
  const spanMs = Math.max(2000, (requests / count / instances) * (thinkMs + 60));
  const L = Number(lifetime) * 1000;
  const episodes: { from: number; to: number }[] = [];
  let from = 0;
  for (let index = 0; index < count; index++) {
    episodes.push({ from, to: from + spanMs });
    const margin = Math.max(30_000, L / 10);
    const offsets = Number.isFinite(L)
      ? [L / 2 + 1000, L - margin - 15_000, L - margin + 2000, L - 8000, L - 3000, L + 2000, 2 * L + 5000]
      : [2000, 20_000, 60_000];
    const offset = offsets[Math.floor(random() * offsets.length)] as number;
    from = Math.max(from + spanMs + 500, from + offset);
  }
  return episodes;
}

function times(durationMs: number, count: number, random: () => number): number[] {
  return Array.from({ length: count }, () => Math.floor(random() * durationMs)).sort((a, b) => a - b);
}

/**
 * The IdP over time: healthy, with trouble at random moments (slowness near the deadline, rejections,
 * throttling, errors, hangs), and sometimes a story told over the spells: a rejection and then an
 * outage, an outage through the tokens' expiry, a throttle and its end.
 */
function idpPhases(
  episodes: readonly { from: number; to: number }[],
  timeoutMs: number,
  token: IdpAnswer,
  random: () => number,
): IdpPhase[] {
  const healthy = (from: number): IdpPhase => ({ from, minMs: 5, maxMs: 50, answer: token });
  const phases: IdpPhase[] = [healthy(0)];
  const trouble = (from: number): IdpPhase => {
    const roll = random();
    if (roll < 0.2) return { from, minMs: timeoutMs * 0.7, maxMs: timeoutMs * 0.94, answer: token };
    if (roll < 0.4) return { from, minMs: 5, maxMs: 50, answer: { kind: 'reject' } };
    if (roll < 0.6) return { from, minMs: 5, maxMs: 50, answer: { kind: 'throttle', retryAfter: 1 + Math.floor(random() * 30) } };
    if (roll < 0.85) return { from, minMs: 5, maxMs: 200, answer: { kind: 'error' } };
    return { from, minMs: timeoutMs * 2, maxMs: timeoutMs * 3, answer: token };
  };
  for (const [index, episode] of episodes.entries()) {
    if (index > 0 && random() < 0.5) {
      // A story over this spell: it begins at the spell's start.
      const story = random();
      const at = episode.from;
      if (story < 0.35) phases.push({ from: at, minMs: 5, maxMs: 50, answer: { kind: 'reject' } }, trouble(at + 500 + random() * 5000));
      else if (story < 0.7) phases.push({ from: at, minMs: 5, maxMs: 200, answer: { kind: 'error' } });
      else phases.push({ from: at, minMs: 5, maxMs: 50, answer: { kind: 'throttle', retryAfter: 1 + Math.floor(random() * 60) } });
      phases.push(healthy(at + (episode.to - episode.from) * (0.3 + random() * 0.7)));
    }
    let at = episode.from;
    while (at < episode.to) {
      at += 500 + random() * Math.max(1000, (episode.to - episode.from) / 3);
      if (at >= episode.to) break;
      phases.push(random() < 0.45 ? healthy(at) : trouble(at));
    }
  }
  return phases.sort((a, b) => a.from - b.from);
}

/** The table over time: mostly fast, with spells of slowness, hangs, errors, lost answers and retried writes, for all or for one instance or item. */
function tablePhases(durationMs: number, instances: number, keys: readonly ScenarioKey[], random: () => number): TablePhase[] {
  const normal: TableBehaviour = { kind: 'normal', minMs: 1, maxMs: 12 };
  const phases: TablePhase[] = [{ from: 0, behaviour: normal }];
  if (random() < 0.5) return phases;
  let at = 0;
  while (at < durationMs) {
    at += 1000 + random() * Math.max(2000, durationMs / 4);
    const roll = random();
    const behaviour: TableBehaviour =
      roll < 0.3
        ? normal
        : roll < 0.45
          ? { kind: 'slow', minMs: 50, maxMs: 600 }
          : roll < 0.6
            ? { kind: 'hang' }
            : roll < 0.75
              ? { kind: 'error' }
              : roll < 0.9
                ? { kind: 'lost-answer' }
                : { kind: 'retried' };
    const scope = random();
    const key = keys[Math.floor(random() * keys.length)] as ScenarioKey;
    const where =
      scope < 0.25
        ? { instance: `i${Math.floor(random() * instances)}` }
        : scope < 0.4
          ? { item: random() < 0.5 ? key.id : `hold:${key.client}` }
          : {};
    phases.push({ from: at, behaviour, ...where }, { from: at + 200 + random() * 3000, behaviour: normal, ...where });
  }
  return phases.sort((a, b) => a.from - b.from);
}

function pepperTrouble(durationMs: number, instances: number, random: () => number): PepperPhase {
  const from = Math.floor(random() * durationMs);
  return {
    from,
    to: from + 500 + Math.floor(random() * 90_000),
    fault: random() < 0.5 ? 'error' : 'hang',
    ...(random() < 0.5 ? { instance: Math.floor(random() * instances) } : {}),
  };
}

function tamperPlan(at: number, random: () => number): TamperPlan {
  if (random() < 0.3) {
    // Recorded versions written back one after another: at table speed, at a holder's pace, or slower.
    const everyMs = [2, 10, 250, 600][Math.floor(random() * 4)] as number;
    return { at, action: 'replay-run', times: 2 + Math.floor(random() * 12), everyMs };
  }
  return { at, ...(random() < 0.3 ? { times: 1 + Math.floor(random() * 20), everyMs: 1 + Math.floor(random() * 100) } : {}) };
}

/** How the table treats a call from `instance` on `item` at `at`: the latest phase for that item, that instance, or all. */
export function tableBehaviourAt(phases: readonly TablePhase[], at: number, instance: string, item: string | undefined): TableBehaviour {
  let current: TableBehaviour = { kind: 'normal', minMs: 1, maxMs: 12 };
  for (const phase of phases) {
    if (phase.from > at) break;
    const slot = instance.split('.')[0];
    if ((phase.instance === undefined || phase.instance === slot) && (phase.item === undefined || phase.item === item))
      current = phase.behaviour;
  }
  return current;
}

/** The one key a scripted scenario has unless it says: client-a's `read`, with the secret the IdP accepts. */
export const SCRIPTED_KEY: ScenarioKey = {
  id: 'client-a/read',
  client: 'client-a',
  secret: 'client-a-secret',
  scope: 'read',
  tokenUrl: TOKEN_URL,
  kind: 'secret',
  authentic: true,
};

/**
 * A scenario given whole, for a test: one client with one key by default, a healthy IdP and table,
 * Lambda-shaped instances in step, and the requests the test lists.
 */
export function scriptedScenario(
  arrivals: Extract<Traffic, { kind: 'scripted' }>['arrivals'],
  parts: Partial<Omit<Scenario, 'traffic'>> = {},
): Scenario {
  const instances = parts.instances ?? 1 + Math.max(0, ...arrivals.map((arrival) => arrival.instance));
  return {
    seed: 1,
    cache: 'shared',
    upstreamTimeoutMs: 5000,
    mode: 'lambda',
    instances,
    skewsMs: Array.from({ length: instances }, () => 0),
    keys: [SCRIPTED_KEY],
    idp: [{ from: 0, minMs: 20, maxMs: 20, answer: { kind: 'token', expiresIn: 3600 } }],
    table: [{ from: 0, behaviour: { kind: 'normal', minMs: 2, maxMs: 2 } }],
    ttlLagMs: 60_000,
    pepper: [],
    rotations: [],
    deaths: [],
    tampering: [],
    durationMs: Math.max(0, ...arrivals.map((arrival) => arrival.at)) + 1000,
    ...parts,
    traffic: { kind: 'scripted', arrivals },
  };
}
