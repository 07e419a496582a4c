import type { IdpAnswer, IdpPhase } from './idp';
import type { TableBehaviour } from './table';

/** One distinct request a caller may send: its identity for the IdP and the invariants, and its credentials. */
export interface SimKey {
  readonly id: string;
  readonly client: string;
  readonly secret: string;
  readonly scope: string;
  readonly tokenUrl: string;
  /** A `private_key_jwt` request: never cached, never shared; holds apply. */
  readonly assertion: boolean;
}

/** What someone with write access and no pepper does to a key's item: its revision retyped or rewritten, an older copy put back, garbage, a deletion. */
export type Tampering = 'retype' | 'rewrite' | 'replay' | 'garbage' | 'delete';

/** Who sends what when: a caller per instance at random, or requests given one by one. */
export type Traffic =
  | { readonly kind: 'random'; readonly requests: number; readonly thinkMs: number; readonly noCacheShare: number }
  | {
      readonly kind: 'scripted';
      readonly arrivals: readonly { readonly at: number; readonly instance: number; readonly key: string; readonly noCache?: boolean }[];
    };

/** Everything one run decides: the fleet, the keys, the IdP, the table and the trouble. */
export interface Scenario {
  readonly seed: number;
  /** `shared`: memory and the table; `memory`: each instance's memory alone. */
  readonly cache: 'shared' | 'memory';
  readonly upstreamTimeoutMs: number;
  /** `lambda`: one request at a time per instance, frozen between them; `concurrent`: many at once, never frozen. */
  readonly mode: 'lambda' | 'concurrent';
  readonly instances: number;
  /** Each instance's wall clock, off the true time by up to half the tolerance either way. */
  readonly skewsMs: readonly number[];
  readonly keys: readonly SimKey[];
  readonly secrets: ReadonlyMap<string, string>;
  readonly idp: readonly IdpPhase[];
  /** The table over time: for all, or for one instance's calls (`instance`), or for one item's (`item`: a key id, or `hold:` and the client). */
  readonly table: readonly TablePhase[];
  /** When an instance dies (`instance`: that one, else a busy one), replaced by a fresh one. */
  readonly deaths: readonly { readonly at: number; readonly instance?: number }[];
  /** When an adversary writes (`key`: that key's item, `times` in a row 100 ms apart; else one at random). */
  readonly tampering: readonly { readonly at: number; readonly key?: string; readonly action?: Tampering; readonly times?: number }[];
  readonly traffic: Traffic;
  /** How long the traffic lasts. */
  readonly durationMs: number;
}

/** The scenario of a seed: `requests` is the traffic it aims at, which sets how long it lasts. */
export function scenario(seed: number, requests: number, random: () => number): Scenario {
  const pick = <T>(choices: readonly T[]): T => choices[Math.floor(random() * choices.length)] as T;
  const chance = (p: number) => random() < p;
  const upstreamTimeoutMs = pick([5000, 5000, 5000, 2000, 1000]);
  const mode = chance(0.8) ? 'lambda' : 'concurrent';
  const instances = 2 + Math.floor(random() * 7);
  const thinkMs = pick([20, 200, 1000, 3000]);
  const durationMs = Math.max(5000, (requests / instances) * (thinkMs + 60));
  const clients = ['client-a', 'client-b'].slice(0, chance(0.5) ? 1 : 2);
  const secrets = new Map(clients.map((client) => [client, `${client}-secret`]));
  const tokenUrls = chance(0.8) ? ['https://idp.example/token'] : ['https://idp.example/token', 'https://idp.example/token?tenant=2'];
  const keys: SimKey[] = [];
  for (const client of clients) {
    for (const scope of chance(0.5) ? ['read'] : ['read', 'write']) {
      keys.push({ id: `${client}/${scope}`, client, secret: `${client}-secret`, scope, tokenUrl: pick(tokenUrls), assertion: false });
    }
    if (chance(0.3))
      keys.push({ id: `${client}/wrong`, client, secret: 'wrong-secret', scope: 'read', tokenUrl: pick(tokenUrls), assertion: false });
    if (chance(0.2)) keys.push({ id: `${client}/jwt`, client, secret: '', scope: 'read', tokenUrl: pick(tokenUrls), assertion: true });
  }
  return {
    seed,
    cache: chance(0.85) ? 'shared' : 'memory',
    upstreamTimeoutMs,
    mode,
    instances,
    skewsMs: Array.from({ length: instances }, () => (chance(0.5) ? Math.round((random() - 0.5) * 5000) : 0)),
    keys,
    secrets,
    idp: idpPhases(durationMs, upstreamTimeoutMs, random),
    table: tablePhases(durationMs, instances, random),
    deaths: chance(0.2) ? times(durationMs, 1 + Math.floor(random() * 3), random).map((at) => ({ at })) : [],
    tampering: chance(0.15) ? times(durationMs, 1 + Math.floor(random() * 20), random).map((at) => ({ at })) : [],
    traffic: { kind: 'random', requests, thinkMs, noCacheShare: chance(0.3) ? 0.05 : 0 },
    durationMs,
  };
}

function times(durationMs: number, count: number, random: () => number): number[] {
  return Array.from({ length: count }, () => Math.floor(random() * durationMs)).sort((a, b) => a - b);
}

/** The IdP over time: mostly well, with spells of slowness near the deadline, rejections, throttling, errors and hangs. */
function idpPhases(durationMs: number, timeoutMs: number, random: () => number): IdpPhase[] {
  const lifetime = [undefined, 25, 60, 120, 3600][Math.floor(random() * 5)];
  const healthy: IdpAnswer = { kind: 'token', expiresIn: random() < 0.85 ? (lifetime ?? 120) : lifetime };
  const phases: IdpPhase[] = [{ from: 0, minMs: 5, maxMs: 50, answer: healthy }];
  let at = 0;
  while (at < durationMs) {
    at += 500 + random() * Math.max(1000, durationMs / 6);
    const roll = random();
    const troubled: Omit<IdpPhase, 'from'> =
      roll < 0.45
        ? { minMs: 5, maxMs: 50, answer: healthy }
        : roll < 0.55
          ? { minMs: timeoutMs * 0.7, maxMs: timeoutMs * 0.94, answer: healthy }
          : roll < 0.63
            ? { minMs: 5, maxMs: 50, answer: { kind: 'reject' } }
            : roll < 0.73
              ? { minMs: 5, maxMs: 50, answer: { kind: 'throttle', retryAfter: 1 + Math.floor(random() * 30) } }
              : roll < 0.85
                ? { minMs: 5, maxMs: 200, answer: { kind: 'error' } }
                : { minMs: timeoutMs * 2, maxMs: timeoutMs * 3, answer: healthy };
    phases.push({ from: at, ...troubled });
  }
  return phases;
}

/** The table over time: mostly fast, with spells of slowness, hangs, errors and lost answers, for all or for one instance. */
function tablePhases(durationMs: number, instances: number, random: () => number): TablePhase[] {
  const normal: TableBehaviour = { kind: 'normal', minMs: 1, maxMs: 12 };
  const phases: TablePhase[] = [{ from: 0, behaviour: normal }];
  if (random() < 0.6) return phases;
  let at = 0;
  while (at < durationMs) {
    at += 1000 + random() * Math.max(2000, durationMs / 4);
    const roll = random();
    const behaviour: TableBehaviour =
      roll < 0.4
        ? normal
        : roll < 0.55
          ? { kind: 'slow', minMs: 50, maxMs: 600 }
          : roll < 0.7
            ? { kind: 'hang' }
            : roll < 0.85
              ? { kind: 'error' }
              : { kind: 'lost-answer' };
    phases.push({ from: at, behaviour, ...(random() < 0.3 ? { instance: `i${Math.floor(random() * instances)}` } : {}) });
    phases.push({ from: at + 200 + random() * 3000, behaviour: normal });
  }
  return phases.sort((a, b) => a.from - b.from);
}

export interface TablePhase {
  readonly from: number;
  readonly behaviour: TableBehaviour;
  readonly instance?: string;
  readonly item?: string;
}

/** How the table treats a call from `instance` on `item` at `at`: the latest phase for that item, that instance, or all. */
export function tableBehaviourAt(phases: readonly TablePhase[], at: number, instance: string, item: string | undefined): TableBehaviour {
  let current: TableBehaviour = { kind: 'normal', minMs: 1, maxMs: 12 };
  for (const phase of phases) {
    if (phase.from > at) break;
    if ((phase.instance === undefined || phase.instance === instance) && (phase.item === undefined || phase.item === item))
      current = phase.behaviour;
  }
  return current;
}

/**
 * A scenario given whole, for a test: one client with one key by default, a healthy IdP and table,
 * Lambda-shaped instances, and the requests the test lists.
 */
export function scriptedScenario(
  arrivals: Extract<Traffic, { kind: 'scripted' }>['arrivals'],
  parts: Partial<Omit<Scenario, 'traffic'>> = {},
): Scenario {
  const key: SimKey = {
    id: 'client-a/read',
    client: 'client-a',
    secret: 'client-a-secret',
    scope: 'read',
    tokenUrl: 'https://idp.example/token',
    assertion: false,
  };
  const instances = parts.instances ?? 1 + Math.max(0, ...arrivals.map((arrival) => arrival.instance));
  return {
    seed: 1,
    cache: 'shared',
    upstreamTimeoutMs: 5000,
    mode: 'lambda',
    instances,
    skewsMs: Array.from({ length: instances }, () => 0),
    keys: [key],
    secrets: new Map([['client-a', 'client-a-secret']]),
    idp: [{ from: 0, minMs: 20, maxMs: 20, answer: { kind: 'token', expiresIn: 3600 } }],
    table: [{ from: 0, behaviour: { kind: 'normal', minMs: 2, maxMs: 2 } }],
    deaths: [],
    tampering: [],
    durationMs: Math.max(0, ...arrivals.map((arrival) => arrival.at)) + 1000,
    ...parts,
    traffic: { kind: 'scripted', arrivals },
  };
}
