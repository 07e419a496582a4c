import type { IdpAnswer, IdpPhase } from './record';
import { type Scenario, type ScenarioKey, SCRIPTED_KEY, scriptedScenario, type TablePhase } from './scenario';

// Hard cases written out: schedules random seeds reach rarely, run before the seeds by `npm run sim` and
// by `npm run sim:mutate`, and judged as every seed is. A name says the case, not the code it aims at.

export interface Schedule {
  readonly name: string;
  readonly scenario: Scenario;
}

const [A, K] = [SCRIPTED_KEY, SCRIPTED_KEY.id];
const at = (ms: number, instance: number, noCache = false, key = K) => ({ at: ms, instance, key, ...(noCache ? { noCache } : {}) });
// The same client id with another secret: another key, which a hold on the client id covers; and another scope.
const B: ScenarioKey = { ...A, id: 'client-a/read-2', secret: 'client-a-secret-2' };
const W: ScenarioKey = { ...A, id: 'client-a/write', scope: 'write' };
const idp = (from: number, ms: number, answer: IdpAnswer): IdpPhase => ({ from, minMs: ms, maxMs: ms, answer });
const token = (expiresIn: number | undefined, bytes?: number): IdpAnswer => ({ kind: 'token', expiresIn, ...(bytes ? { bytes } : {}) });
const [REJECT, ERROR] = [{ kind: 'reject' }, { kind: 'error' }] as const;
const throttle = (retryAfter: number): IdpAnswer => ({ kind: 'throttle', retryAfter });
const table = (from: number, behaviour: TablePhase['behaviour'], instance?: number): TablePhase => ({
  from,
  behaviour,
  ...(instance === undefined ? {} : { instance: `i${instance}` }),
});
const normal = (ms = 2) => ({ kind: 'normal', minMs: ms, maxMs: ms }) as const;
const schedule = (name: string, arrivals: Parameters<typeof scriptedScenario>[0], parts: Partial<Scenario>): Schedule => ({
  name,
  scenario: scriptedScenario(arrivals, parts),
});

export const corpus: readonly Schedule[] = [
  // Bursts and tokens that cannot be kept.
  schedule(
    'a burst over six instances for a token that cannot be kept',
    [0, 1, 2, 3, 4, 5].map((i) => at(1000 + i * 10, i)),
    {
      idp: [idp(0, 200, token(undefined))],
    },
  ),
  schedule(
    'a request arriving after the holder answered, while its publication of a token that cannot be kept is slow',
    [at(1000, 0), at(1400, 1)],
    {
      idp: [idp(0, 100, token(undefined))],
      table: [table(0, normal()), table(1050, { kind: 'slow', minMs: 700, maxMs: 700 }, 0), table(3000, normal(), 0)],
    },
  ),
  schedule(
    'cold instances meet a table answering in 60 ms, the IdP taking 300 ms',
    [0, 1, 2, 3, 4, 5].map((i) => at(1000 + i * 10, i)),
    {
      idp: [idp(0, 300, token(3600))],
      table: [table(0, normal()), table(900, normal(60))],
    },
  ),
  schedule(
    'a request that came while a token that cannot be kept was fetched, then the IdP hangs for the next exchange',
    [at(0, 0), at(10, 1), at(211, 2)],
    { idp: [idp(0, 200, token(undefined)), idp(212, 4900, token(undefined))] },
  ),
  schedule(
    'no-cache requests on three instances wait on an exchange that fails',
    [at(0, 0), at(50, 1, true), at(60, 2, true), at(70, 3, true)],
    {
      idp: [idp(0, 300, ERROR)],
    },
  ),
  schedule('a waiter on a short deadline polls a holder whose exchange takes nearly all of it', [at(0, 0), at(5, 1)], {
    upstreamTimeoutMs: 500,
    idp: [idp(0, 450, token(3600))],
  }),
  schedule(
    'two bursts a second apart for large tokens that cannot be kept, on a 2 s deadline',
    [...[0, 1, 2].map((i) => at(i * 10, i)), ...[0, 1, 2, 3, 4].map((i) => at(1000 + i * 10, i))],
    { upstreamTimeoutMs: 2000, idp: [idp(0, 200, token(undefined, 250_000))] },
  ),
  schedule('a token exactly at the shared size limit, asked for on another instance', [at(0, 0), at(1000, 1)], {
    idp: [idp(0, 20, token(3600, 300_015))],
  }),
  schedule(
    'a burst of six for a large token that cannot be kept, after the key kept a large one that has expired',
    [at(0, 0), ...[0, 1, 2, 3, 4, 5].map((i) => at(40_000 + i * 10, i))],
    { idp: [idp(0, 20, token(35, 150_000)), idp(39_000, 900, token(undefined, 250_000))] },
  ),
  // A loaded table (it answers, slowly): what the hedge waits for, and what comes after it.
  schedule(
    'warm instances meet a burst on a new key as the table turns loaded: key reads fast, claim writes 440 ms, hold reads 190 ms',
    [...[0, 1, 2, 3, 4, 5].map((i) => at(i * 10, i, false, W.id)), ...[0, 1, 2, 3, 4, 5].map((i) => at(i === 0 ? 2000 : 2200 + i, i))],
    {
      keys: [A, W],
      idp: [idp(0, 600, token(3600))],
      table: [
        table(0, normal()),
        { from: 1999, item: 'hold:client-a', behaviour: normal(190) },
        ...[0, 1, 2, 3, 4, 5].map((i) => ({ from: (i === 0 ? 2000 : 2200 + i) + 1, instance: `i${i}`, item: K, behaviour: normal(440) })),
      ],
    },
  ),
  schedule('a cold instance on a loaded table (300 ms) asks for a stale shared token while the IdP errors', [at(0, 1), at(100_000, 0)], {
    idp: [idp(0, 20, token(120)), idp(99_000, 400, ERROR)],
    table: [table(0, normal()), table(99_000, normal(300), 0)],
  }),
  schedule(
    'an IdP slower than the deadline for a first request; a second on a loaded table (320 ms) arrives just before that times out',
    [at(0, 0), at(100, 1, false, W.id), at(4850, 1)],
    {
      keys: [A, W],
      idp: [idp(0, 6000, token(3600)), idp(50, 20, token(3600)), idp(4000, 2000, token(3600))],
      table: [table(0, normal()), table(0, normal(320), 1)],
    },
  ),
  // A token of one's own exchange, after one's request was answered from a slow table.
  schedule(
    'a request answered from a slow table while its own exchange still runs, and that later token outliving the one it answered',
    [at(0, 0), at(1_850_000, 1), at(3_300_000, 1)],
    {
      mode: 'concurrent',
      idp: [idp(0, 20, token(3600)), idp(1_000_000, 1000, token(3600)), idp(2_000_000, 20, token(3600))],
      table: [table(0, normal()), table(1_000_000, { kind: 'slow', minMs: 400, maxMs: 400 }, 1), table(2_000_000, normal(), 1)],
    },
  ),
  // Rejections and what they end.
  schedule(
    'a rejection, then a token that cannot be kept, then an outage while an instance keeps a stale token from before the rejection',
    [at(0, 0), at(10, 1), at(95_000, 0), at(101_000, 2), at(103_000, 1)],
    { idp: [idp(0, 20, token(120)), idp(94_000, 20, REJECT), idp(100_000, 20, token(undefined)), idp(102_000, 300, ERROR)] },
  ),
  schedule(
    'a rejection, then a no-cache request meets a brief IdP error, then plain requests while the rejection is still remembered',
    [at(0, 0), at(200, 1, true), at(1500, 2), at(2600, 3), at(3700, 4)],
    { idp: [idp(0, 20, REJECT), idp(150, 20, ERROR)] },
  ),
  schedule(
    'a rejection on one instance, then another whose table fails meets an IdP error with its old copy stale',
    [at(0, 0), at(100, 1), at(3_250_000, 0), at(3_300_000, 1)],
    {
      idp: [idp(0, 20, token(3600)), idp(3_000_000, 20, REJECT), idp(3_260_000, 20, ERROR)],
      table: [table(0, normal()), table(3_299_000, { kind: 'error' }, 1)],
    },
  ),
  schedule(
    'a 401 met on a late clock shortly after an instance on an early clock got a token, then an outage once it is stale',
    [at(5000, 1), at(7000, 0), at(97_000, 1)],
    {
      skewsMs: [-2500, 2500],
      idp: [idp(0, 20, token(120)), idp(6500, 20, REJECT), idp(8000, 20, ERROR)],
      table: [table(0, normal()), table(6900, { kind: 'hang' }, 0), table(7100, normal())],
    },
  ),
  schedule(
    'a three-day token rejected by a no-cache request, then an outage after a day on an instance that never saw the 401',
    [at(0, 0), at(10, 1), at(6000, 0, true), at(233_400_000, 1)],
    { idp: [idp(0, 20, token(259_200)), idp(5500, 20, REJECT), idp(6500, 20, ERROR)] },
  ),
  schedule(
    'a key rejected on an instance still on the old pepper, then a stale copy elsewhere long after the rotation',
    [at(0, 1), at(20_000, 0), at(35_000, 1), at(40_000, 0, true), at(95_000, 1)],
    { rotations: [29_000], idp: [idp(0, 20, token(120)), idp(39_000, 20, REJECT), idp(90_000, 50, ERROR)] },
  ),
  schedule(
    'requests on one concurrent instance while its refresh ahead runs slowly, memory only',
    [at(0, 0), at(65_000, 0), at(65_050, 0), at(65_100, 0)],
    { mode: 'concurrent', cache: 'memory', idp: [idp(0, 20, token(120)), idp(60_000, 800, token(120))] },
  ),
  // Holds: who earned them, who met them late, and what a waiter says.
  schedule('a waiter whose poll fails is asked to wait by the IdP, then its holder is asked to wait less', [at(1000, 0), at(1100, 1)], {
    idp: [idp(0, 2500, throttle(5)), idp(1150, 20, throttle(10))],
    table: [table(0, normal()), table(1150, { kind: 'error' }, 1), table(1300, normal(), 1)],
  }),
  schedule(
    "a waiter whose table fails is throttled by the IdP itself, then reads the holder's later throttle over a second later",
    [at(0, 0), at(50, 1)],
    {
      idp: [idp(0, 3000, throttle(10)), idp(100, 20, throttle(10))],
      table: [table(0, normal()), table(120, { kind: 'error' }, 1), table(4200, normal(), 1)],
    },
  ),
  schedule(
    'a short key hold among four unkept outcomes, written over by the displaced holder it outlasted',
    [at(0, 0), at(100, 0), at(200, 0), at(300, 0), at(400, 1), at(1900, 2), at(3600, 3)],
    { idp: [idp(0, 20, token(25)), idp(390, 3000, token(25)), idp(1800, 1400, throttle(1)), idp(3500, 20, token(25))] },
  ),
  schedule(
    'a holder dies mid-exchange, its waiter takes over and is throttled, then another instance asks',
    [at(0, 0), at(50, 1), at(3000, 2)],
    {
      idp: [idp(0, 500, throttle(30))],
      deaths: [{ at: 100, instance: 0 }],
    },
  ),
  schedule(
    'a client-wide hold, then a request with another secret whose key item answers slower than the hedge',
    [at(0, 0), at(6000, 0, true), at(7000, 1, false, B.id)],
    {
      keys: [A, B],
      idp: [idp(0, 20, token(3600)), idp(5000, 20, throttle(30))],
      table: [table(0, normal()), { from: 6500, behaviour: normal(300), item: B.id }],
    },
  ),
  // Old copies written back.
  schedule(
    'a no-cache request meets an old claim and then its old outcome written back by someone with write access',
    [at(0, 0), at(6000, 1, true)],
    { seed: 7, tampering: [{ at: 5990, key: K, action: 'replay-run', times: 2, everyMs: 110 }] },
  ),
];
