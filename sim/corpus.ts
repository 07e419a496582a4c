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
const ADMIN: ScenarioKey = { ...A, id: 'client-a/admin', scope: 'admin' };
const idp = (from: number, ms: number, answer: IdpAnswer): IdpPhase => ({ from, minMs: ms, maxMs: ms, answer });
const token = (expiresIn: number | undefined, bytes?: number): IdpAnswer => ({ kind: 'token', expiresIn, ...(bytes ? { bytes } : {}) });
const [REJECT, ERROR] = [{ kind: 'reject' }, { kind: 'error' }] as const;
const throttle = (retryAfter: number): IdpAnswer => ({ kind: 'throttle', retryAfter });
const table = (from: number, behaviour: TablePhase['behaviour'], instance?: number, item?: string): TablePhase => ({
  from,
  behaviour,
  ...(instance === undefined ? {} : { instance: `i${instance}` }),
  ...(item === undefined ? {} : { item }),
});
const normal = (ms = 2) => ({ kind: 'normal', minMs: ms, maxMs: ms }) as const;
// Phases in the order they begin, however a schedule lists them.
const byStart = <T extends { from: number }>(phases: readonly T[]): T[] => [...phases].sort((a, b) => a.from - b.from);
const schedule = (name: string, arrivals: Parameters<typeof scriptedScenario>[0], parts: Partial<Scenario>): Schedule => ({
  name,
  scenario: scriptedScenario(arrivals, {
    ...parts,
    ...(parts.table ? { table: byStart(parts.table) } : {}),
    ...(parts.idp ? { idp: byStart(parts.idp) } : {}),
  }),
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
  schedule(
    'a holder whose IdP call hangs, then a request 1.5 s later on another instance whose own call takes 2.5 s',
    [at(0, 0), at(1500, 1)],
    { upstreamTimeoutMs: 5000, idp: [idp(0, 8000, token(3600)), idp(500, 2500, token(3600))] },
  ),
  schedule('a waiter whose poll fails is throttled 2 s by the IdP itself, then its holder is throttled 10 s', [at(0, 0), at(50, 1)], {
    idp: [idp(0, 1000, throttle(10)), idp(100, 200, throttle(2))],
    table: [table(0, normal()), table(100, { kind: 'error' }, 1), table(200, normal(), 1)],
  }),
  schedule(
    'an IdP error for the key, then a proven other secret of its client throttled for 30 s, then the key asked within the second on an instance whose hold item reads in 190 ms',
    [at(0, 1, false, B.id), at(9500, 0), at(9700, 1, true, B.id), at(10_000, 2)],
    {
      keys: [A, B],
      idp: [idp(0, 20, token(3600)), idp(9400, 20, ERROR), idp(9600, 20, throttle(30))],
      table: [table(0, normal()), table(9900, normal(190), 2), table(9901, normal(5), 2, K)],
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
  schedule(
    "a waiter whose poll fails asks the IdP itself, meets its holder's 10 s throttle, then gets its own 2 s throttle 2 s later",
    [at(0, 0), at(50, 1)],
    {
      idp: [idp(0, 300, throttle(10)), idp(100, 2500, throttle(2))],
      table: [table(0, normal()), table(100, { kind: 'error' }, 1), table(200, normal(), 1)],
    },
  ),
  schedule(
    'a request for another secret of a client under a client-wide hold reads the hold item in 300 ms and asks the IdP after its hedge',
    [at(0, 1, false, B.id), at(6100, 1, true, B.id), at(7000, 2)],
    {
      keys: [A, B],
      idp: [idp(0, 20, token(3600)), idp(6050, 20, throttle(30))],
      table: [table(0, normal()), table(6200, normal(300), 2, 'hold:client-a')],
      durationMs: 9000,
    },
  ),
  schedule(
    'a no-cache request elsewhere is throttled just before the refresh window, the receiver meets the hold, then asks again once it is over',
    [at(0, 0), at(59_500, 1, true), at(60_100, 0), at(60_600, 0)],
    { durationMs: 95_000, idp: [idp(0, 20, token(120)), idp(59_000, 20, throttle(1)), idp(60_000, 20, token(120))] },
  ),
  schedule(
    'a waiter whose poll fails is throttled 10 s by the IdP itself, then its holder meets an IdP error, then a third instance asks within the throttle',
    [at(0, 0), at(50, 1), at(2500, 2)],
    {
      idp: [idp(0, 1000, ERROR), idp(100, 200, throttle(10))],
      table: [table(0, normal()), table(100, { kind: 'error' }, 1), table(200, normal(), 1)],
      keys: [A, B],
      durationMs: 6000,
    },
  ),
  schedule(
    'no-cache requests on three instances on a 2 s deadline share a 280 KB token that cannot be kept, while the item keeps a stale 150 KB token',
    [at(0, 0), ...[0, 1, 2].map((i) => at(40_000 + i * 10, i, true))],
    { upstreamTimeoutMs: 2000, idp: [idp(0, 20, token(60, 150_000)), idp(39_000, 300, token(undefined, 280_000))] },
  ),
  // Old copies written back.
  schedule(
    'a no-cache request meets an old claim and then its old outcome written back by someone with write access',
    [at(0, 0), at(6000, 1, true)],
    { seed: 7, tampering: [{ at: 5990, key: K, action: 'replay-run', times: 2, everyMs: 110 }] },
  ),
  // Read from the survivors of a mutation sample: takeovers, holds met late, pepper switches, old copies.
  schedule(
    'a no-cache request gets a token just after its own instance met a 401, another instance keeps a copy, then an outage once it is stale',
    [at(0, 0), at(1000, 0, true), at(2000, 1), at(97_000, 1)],
    { idp: [idp(0, 20, REJECT), idp(500, 20, token(120)), idp(90_000, 20, ERROR)] },
  ),
  schedule(
    'a refresh ahead is throttled, memory only, then a request during the hold in the refresh window',
    [at(0, 0), at(61_000, 0), at(62_000, 0)],
    { cache: 'memory', idp: [idp(0, 20, token(120)), idp(60_000, 20, throttle(10)), idp(61_500, 20, token(120))] },
  ),
  schedule(
    'an instance holding a copy in its refresh window, before its middle, while its pepper cannot be read',
    [at(0, 0), at(1000, 1), at(62_000, 1)],
    {
      idp: [idp(0, 20, token(120)), idp(61_000, 20, token(120))],
      pepper: [{ from: 61_000, to: 63_000, fault: 'error', instance: 1 }],
    },
  ),
  schedule('a burst of requests on one instance after an IdP error, memory only', [at(0, 0), at(100, 0), at(200, 0), at(300, 0)], {
    cache: 'memory',
    idp: [idp(0, 20, ERROR)],
  }),
  schedule(
    'a throttle met exactly two lifetimes after the token was received, then a request with another secret, memory only',
    [at(0, 0), at(70_000, 0), at(71_000, 0, false, B.id)],
    {
      cache: 'memory',
      keys: [A, B],
      idp: [idp(0, 20, token(35)), idp(69_000, 20, throttle(10)), idp(70_500, 20, token(3600))],
    },
  ),
  schedule(
    'a timeout, then a holder whose table fails after its exchange, and a request that finds its claim',
    [at(0, 0), at(6500, 1), at(6750, 2)],
    {
      idp: [idp(0, 6000, token(3600)), idp(6000, 200, token(3600))],
      table: [table(0, normal()), table(6650, { kind: 'error' }, 1)],
    },
  ),
  schedule('a holder dies with four waiters on other instances', [at(0, 0), at(10, 1), at(20, 2), at(30, 3), at(40, 4)], {
    idp: [idp(0, 3000, token(3600))],
    deaths: [{ at: 100, instance: 0 }],
  }),
  schedule(
    'a no-cache request just before the refresh window meets an IdP error while its table is slow, then a request in the window once the error is over',
    [at(0, 0), at(59_800, 0, true), at(60_900, 0)],
    {
      durationMs: 95_000,
      idp: [idp(0, 20, token(120)), idp(59_500, 20, ERROR), idp(60_000, 20, token(120))],
      table: [table(0, normal()), table(59_810, { kind: 'slow', minMs: 300, maxMs: 300 }, 0), table(60_600, normal(), 0)],
    },
  ),
  schedule(
    'a timeout, then requests on other instances within its second while the IdP gives tokens that cannot be kept',
    [at(0, 0), at(5100, 1), at(5200, 2), at(5300, 3), at(5400, 4)],
    { idp: [idp(0, 6000, token(3600)), idp(5050, 20, token(undefined))] },
  ),
  schedule(
    "a holder dies, a waiter takes over, and old copies of the dead holder's claim are written back while another waits",
    [at(0, 0), at(10, 1), at(20, 2)],
    {
      idp: [idp(0, 3000, token(3600))],
      deaths: [{ at: 300, instance: 0 }],
      tampering: [{ at: 1100, key: K, action: 'replay', times: 8, everyMs: 30 }],
    },
  ),
  schedule(
    'a key hold met here, a longer client-wide hold earned elsewhere, then the key asked again while its item reads in 50 ms and the hold item in 190 ms',
    [at(0, 1, false, B.id), at(9500, 0), at(10_000, 1, true, B.id), at(11_000, 0)],
    {
      keys: [A, B],
      idp: [idp(0, 20, token(3600)), idp(9000, 20, throttle(5)), idp(9800, 20, throttle(30))],
      table: [table(0, normal()), table(10_500, normal(190), 0), table(10_501, normal(50), 0, K)],
    },
  ),
  schedule(
    'a token kept in memory is looked up after 30 s and found rejected elsewhere, while another secret of its client holds a client-wide hold',
    [at(0, 0), at(100, 2, false, B.id), at(40_000, 1, true), at(41_000, 2, true, B.id), at(47_000, 0)],
    {
      keys: [A, B],
      idp: [idp(0, 20, token(3600)), idp(39_000, 20, REJECT), idp(40_500, 20, throttle(60))],
    },
  ),
  schedule(
    'an IdP error, then a no-cache request gets a token that cannot be kept, then plain requests on four instances within the second',
    [at(0, 0), at(100, 1, true), at(200, 2), at(300, 3), at(400, 4), at(500, 5)],
    { idp: [idp(0, 20, ERROR), idp(50, 20, token(undefined))] },
  ),
  schedule(
    'eight waiters on instances never frozen, arriving within 800 ms of a holder whose IdP call outlasts the deadline',
    [at(0, 0), ...[1, 2, 3, 4, 5, 6, 7, 8].map((i) => at(i * 100, i))],
    { mode: 'concurrent', idp: [idp(0, 6000, token(3600))] },
  ),
  schedule(
    "a waiter arrives as someone with write access writes back a finished holder's twenty renewals one by one, 250 ms apart",
    [at(0, 0), at(4910, 1)],
    {
      seed: 35,
      idp: [idp(0, 4800, token(3600)), idp(1000, 20, token(3600))],
      tampering: [{ at: 4900, key: K, action: 'replay-run', times: 20, everyMs: 250 }],
    },
  ),
  schedule('the table hangs on the claim write: the hedge passes and the IdP is asked meanwhile', [at(0, 0), at(1500, 1)], {
    table: [table(0, normal()), table(6, { kind: 'hang' }, 0, K), table(1000, normal(), 0, K)],
  }),
  schedule(
    "two requests race to take over a slow holder's claim given back after a takeover whose token cannot be kept was published",
    [at(0, 0), at(1300, 1), at(1340, 2), at(1340, 3)],
    { idp: [idp(0, 4000, token(undefined)), idp(1000, 20, token(undefined)), idp(1335, 20, token(3600))] },
  ),
  schedule(
    "two no-cache requests race to take over a slow holder's claim given back after a takeover met an IdP error",
    [at(0, 0), at(1300, 1), at(1340, 2, true), at(1340, 3, true)],
    { idp: [idp(0, 4000, token(3600)), idp(1000, 20, ERROR), idp(1330, 20, token(3600))] },
  ),
  schedule(
    "a no-cache request arrives as someone with write access writes back a takeover's claim and then the slow holder's claim it gave back with its error",
    [at(0, 0), at(1300, 1), at(1805, 2, true)],
    {
      seed: 1,
      idp: [idp(0, 4000, token(3600)), idp(1000, 20, ERROR), idp(1500, 20, token(3600))],
      tampering: [{ at: 1800, key: K, action: 'replay-run', times: 2, everyMs: 100 }],
    },
  ),
  schedule(
    "a no-cache request on an instance whose table answers in 150 ms arrives just after a takeover met an IdP error and gave back a slow holder's claim, which renews meanwhile",
    [at(0, 2, false, W.id), at(2000, 0), at(3300, 1), at(3340, 2, true)],
    {
      keys: [A, W],
      idp: [idp(0, 20, token(3600)), idp(1900, 4000, token(3600)), idp(3000, 20, ERROR), idp(3330, 20, token(3600))],
      table: [table(0, normal()), table(0, normal(150), 2)],
    },
  ),
  schedule(
    "a no-cache request on an instance whose table answers in 200 ms arrives just after a takeover met an IdP error and gave back a slow holder's claim, which renews meanwhile",
    [at(0, 2, false, W.id), at(2000, 0), at(3300, 1), at(3340, 2, true)],
    {
      keys: [A, W],
      idp: [idp(0, 20, token(3600)), idp(1900, 4000, token(3600)), idp(3000, 20, ERROR), idp(3330, 20, token(3600))],
      table: [table(0, normal()), table(0, normal(200), 2)],
    },
  ),
  schedule(
    "a no-cache request on an instance whose table answers in 250 ms arrives just after a takeover met an IdP error and gave back a slow holder's claim, which renews meanwhile",
    [at(0, 2, false, W.id), at(2000, 0), at(3300, 1), at(3340, 2, true)],
    {
      keys: [A, W],
      idp: [idp(0, 20, token(3600)), idp(1900, 4000, token(3600)), idp(3000, 20, ERROR), idp(3330, 20, token(3600))],
      table: [table(0, normal()), table(0, normal(250), 2)],
    },
  ),
  schedule(
    'no-cache requests on four instances wait on an exchange for a token that cannot be kept',
    [at(0, 0), at(5, 1, true), at(10, 2, true), at(15, 3, true), at(20, 4, true)],
    { idp: [idp(0, 200, token(undefined))] },
  ),
  schedule(
    'a request arrives as an old claim and then its old outcome, a 31 s token stale by now, are written back',
    [at(0, 0), at(2010, 1)],
    {
      seed: 35,
      idp: [idp(0, 20, token(31))],
      tampering: [{ at: 2000, key: K, action: 'replay-run', times: 2, everyMs: 250 }],
    },
  ),
  schedule(
    'a holder and two waiters on a 2 s deadline get a 280 KB token that cannot be kept, while the item keeps an expired 150 KB token',
    [at(0, 0), ...[0, 1, 2].map((i) => at(40_000 + i * 10, i))],
    { upstreamTimeoutMs: 2000, idp: [idp(0, 20, token(35, 150_000)), idp(39_000, 300, token(undefined, 280_000))] },
  ),
  schedule(
    'a three-day token too large to share on two instances, rejected by a no-cache request, then an outage once it is stale',
    [at(0, 0), at(1000, 1), at(6000, 0, true), at(233_400_000, 1)],
    { idp: [idp(0, 20, token(259_200, 310_000)), idp(5500, 20, REJECT), idp(6500, 20, ERROR)] },
  ),
  schedule('an adversary rewrites the item every millisecond while a holder renews and a waiter asks for its echo', [at(0, 0), at(10, 1)], {
    idp: [idp(0, 2000, token(3600))],
    tampering: [{ at: 100, key: K, action: 'rewrite', times: 800, everyMs: 1 }],
  }),
  schedule(
    'a waiter learns a client-wide hold from a slow hold read just before its holder, sent before the hold, is throttled for less',
    [at(0, 1, false, B.id), at(6000, 0), at(6100, 1, true, B.id), at(6300, 2)],
    {
      keys: [A, B],
      idp: [idp(0, 20, token(3600)), idp(5990, 944, throttle(2)), idp(6050, 20, throttle(30))],
      table: [table(0, normal()), table(6200, normal(660), 2, 'hold:client-a')],
      durationMs: 10_000,
    },
  ),
  schedule(
    "a request on a slow table asks the IdP, then reads another's 10 s hold, then its own exchange is throttled for 9 s ending later",
    [at(0, 0), at(50, 1)],
    {
      idp: [idp(0, 100, throttle(10)), idp(200, 3000, throttle(9))],
      table: [table(0, normal()), table(40, normal(400), 1)],
      durationMs: 6000,
    },
  ),
  schedule(
    "a dead holder's waiter takes over in its last 100 ms while its claim's answer is lost, and a later waiter waits on that claim",
    [at(0, 0), at(200, 1), at(700, 2)],
    {
      idp: [idp(0, 4400, token(3600)), idp(50, 20, token(3600))],
      deaths: [{ at: 4330, instance: 0 }],
      table: [
        table(0, normal()),
        table(5079, { kind: 'lost-answer' }, 1),
        table(5080, normal(), 1),
        table(4250, normal(600), 2),
        table(4600, normal(), 2),
      ],
      durationMs: 7000,
    },
  ),
  schedule(
    "a dead holder's waiter whose memory token a 401 voided takes over in its last 100 ms, its hold read slow, and a later waiter waits on that claim",
    [at(0, 1), at(40_000, 0, true), at(50_000, 0), at(50_200, 1), at(50_700, 2)],
    {
      idp: [
        idp(0, 20, token(3600)),
        idp(39_000, 20, { kind: 'reject' }),
        idp(49_990, 4400, token(3600)),
        idp(50_150, 6000, token(3600)),
        idp(50_650, 20, token(3600)),
      ],
      deaths: [{ at: 54_330, instance: 0 }],
      table: [
        table(0, normal()),
        table(54_500, normal(900), 1, 'hold:client-a'),
        table(54_250, normal(600), 2),
        table(54_600, normal(), 2),
      ],
      durationMs: 57_000,
    },
  ),
  schedule(
    "a copy read from an old-pepper item just before its reader switched, on clocks 5 s apart, then a 401 only the old item knows, then the reader's no-cache request meets an IdP error, then a new instance asks during an outage",
    [
      at(0, 1),
      at(1000, 2),
      at(2000, 0),
      at(31_000, 1, true),
      at(31_100, 2),
      at(32_000, 2, false, W.id),
      at(32_500, 2, false, ADMIN.id),
      at(39_000, 0, true),
      at(43_000, 2, true),
      at(125_000, 3),
    ],
    {
      keys: [A, W, ADMIN],
      skewsMs: [0, 2500, -2500, 0],
      rotations: [29_000],
      idp: [idp(0, 20, token(120)), idp(38_500, 20, { kind: 'reject' }), idp(42_000, 20, { kind: 'error' })],
      durationMs: 127_000,
    },
  ),
  schedule(
    'after a pepper rotation, a token received on an instance that switched early is read from the new item by one that switched late, then an outage once it is stale',
    [at(31_000, 1, false, W.id), at(32_000, 1), at(40_000, 0, false, W.id), at(41_000, 0, false, W.id), at(130_000, 0)],
    {
      mode: 'concurrent',
      keys: [A, W],
      rotations: [1000],
      idp: [idp(0, 20, token(120)), idp(129_000, 20, ERROR)],
    },
  ),
  schedule(
    "a pepper rotation while one instance's reads of the pepper fail, then that instance asks for a key whose token a dead instance published before the rotation",
    [at(0, 1), at(1000, 0, false, W.id), at(80_000, 0)],
    {
      keys: [A, W],
      rotations: [10_000],
      deaths: [{ at: 5000, instance: 1 }],
      pepper: [{ from: 9000, to: 200_000, fault: 'error', instance: 0 }],
      idp: [idp(0, 20, token(3600))],
    },
  ),
  schedule(
    'a key hold (no kept token) met at 510 ms, while five instances whose table failed at arrival have exchanges running that end in IdP errors after it, then a fresh instance asks within the hold',
    [at(0, 0), at(10, 1), at(20, 2), at(30, 3), at(40, 4), at(50, 5), at(3000, 6)],
    {
      idp: [idp(0, 500, throttle(30)), ...[1, 2, 3, 4, 5].map((i) => idp(i * 10, 600 + i * 110, ERROR)), idp(2000, 20, token(3600))],
      table: [
        table(0, normal()),
        ...[1, 2, 3, 4, 5].map((i) => table(0, { kind: 'error' }, i)),
        ...[1, 2, 3, 4, 5].map((i) => table(200, normal(), i)),
      ],
    },
  ),
  // Waiter k's deadline passes 10 + 100(k-1) ms after the holder's, its reads then too slow to see the holder's timeout.
  ...[0, 35_000].map((start) =>
    schedule(
      `${start > 0 ? 'a stale 200 KB token; ' : ''}a holder whose IdP call hangs past its deadline; three waiters on three instances whose deadlines pass 10, 110 and 210 ms after it (their reads slow enough to miss its timeout), each with a request 5 ms younger that shares its fetch${start > 0 ? ', while the IdP gives 200 KB tokens that cannot be kept' : ''}`,
      [
        ...(start > 0 ? [at(0, 4)] : []),
        at(start, 0),
        ...[1, 2, 3].flatMap((k) => [at(start + 10 + 100 * (k - 1), k), at(start + 15 + 100 * (k - 1), k)]),
      ],
      {
        mode: 'concurrent',
        idp:
          start > 0
            ? [idp(0, 20, token(60, 200_000)), idp(start - 100, 6000, token(3600)), idp(start + 4000, 20, token(undefined, 200_000))]
            : [idp(0, 6000, token(3600)), idp(4000, 20, token(3600))],
        table: [
          table(0, normal()),
          ...[1, 2, 3].map((k) => table(start + 4000, normal([40, 260, 460][k - 1]), k)),
          ...[1, 2, 3].map((k) => table(start + 5010 + 100 * (k - 1), normal(), k)),
        ],
      },
    ),
  ),
  schedule(
    'an instance that remembers an IdP error for a key reads its item holding a 5 s key hold, while another secret of its client earned a 30 s client-wide hold',
    [at(0, 1, false, B.id), at(6000, 0), at(6100, 2, true), at(6200, 3, true, B.id), at(6300, 0)],
    {
      keys: [A, B],
      idp: [
        idp(0, 20, token(3600)),
        idp(5900, 20, ERROR),
        idp(6050, 20, throttle(5)),
        idp(6150, 20, throttle(30)),
        idp(6250, 20, token(3600)),
      ],
    },
  ),
  schedule(
    'concurrent mode: on three instances a request waits on a holder whose IdP call fails after 300 ms, and a no-cache request 5 ms younger shares its fetch, while the IdP keeps failing fast',
    [at(0, 0), ...[1, 2, 3].flatMap((k) => [at(10 * k, k), at(10 * k + 5, k, true)])],
    { mode: 'concurrent', idp: [idp(0, 300, ERROR), idp(320, 5, ERROR)] },
  ),
  schedule(
    'skew: eight waiters on instances never frozen, clocks 2.5 s ahead, arriving within 800 ms of a holder whose clock is 2.5 s behind and whose IdP call outlasts the deadline',
    [at(0, 0), ...[1, 2, 3, 4, 5, 6, 7, 8].map((i) => at(i * 100, i))],
    { mode: 'concurrent', skewsMs: [-2500, 2500, 2500, 2500, 2500, 2500, 2500, 2500, 2500], idp: [idp(0, 6000, token(3600))] },
  ),
  schedule(
    'no-cache requests on three instances on a 2 s deadline share a 280 KB token that cannot be kept, while the item keeps a stale 150 KB token',
    [at(0, 0), ...[0, 1, 2].map((i) => at(40_000 + i * 10, i, true))],
    { upstreamTimeoutMs: 2000, idp: [idp(0, 20, token(60, 150_000)), idp(39_000, 300, token(undefined, 280_000))] },
  ),
  schedule(
    "while the item keeps a stale 150 KB token, a holder's token that cannot be kept exactly fills the item's room; it is published just after a no-cache waiter's poll, and a later request claims at once, its claim carrying that token on; its own call is slow",
    [at(0, 0), at(40_000, 0), at(40_010, 1, true), at(41_012, 2)],
    { idp: [idp(0, 20, token(60, 150_000)), idp(39_000, 1000, token(undefined, 210_050)), idp(41_011, 4500, token(3600))] },
  ),
  schedule(
    "a no-cache request arrives as someone with write access writes back a failed holder's claim, its renewals and then its failure, 100 ms apart",
    [at(0, 0), at(1100, 1, true)],
    {
      seed: 35,
      idp: [idp(0, 1000, ERROR), idp(1050, 20, token(3600))],
      tampering: [{ at: 1095, key: K, action: 'replay-run', times: 5, everyMs: 100 }],
    },
  ),
  schedule(
    "while the item keeps a stale 150 KB token, a holder gets a token that cannot be kept one byte over the item's room; a no-cache waiter, a later request claims at once and its own call is slow",
    [at(0, 0), at(40_000, 0), at(40_010, 1, true), at(41_012, 2)],
    { idp: [idp(0, 20, token(60, 150_000)), idp(39_000, 1000, token(undefined, 210_051)), idp(41_011, 4500, token(3600))] },
  ),
  schedule(
    'four no-cache requests share one exchange that brings a 210 KB token that cannot be kept, while the item keeps a fresh 150 KB token; then three more',
    [at(0, 0), ...[0, 1, 2, 3].map((i) => at(40_000 + i * 10, i, true)), ...[1, 2, 3].map((i) => at(42_000 + i * 10, i, true))],
    { idp: [idp(0, 20, token(3600, 150_000)), idp(39_000, 1000, token(undefined, 210_100))] },
  ),
  schedule(
    'instances never frozen: a request waits on a holder whose publication is slow while another exchange, sent without the table, times out before its deadline',
    [at(0, 0), at(2900, 2), at(3000, 1)],
    {
      mode: 'concurrent',
      idp: [idp(0, 8000, token(3600)), idp(1000, 2000, token(3600))],
      table: [table(0, normal()), table(0, { kind: 'error' }, 0), table(50, normal(), 0), table(4800, normal(800), 2)],
    },
  ),
  schedule(
    'a request on a slow-table instance comes while a token that cannot be kept is fetched and finds it published, and two on slower tables ask the IdP past their hedge',
    [at(0, 0), at(950, 1), at(990, 2), at(995, 3)],
    {
      idp: [idp(0, 1000, token(undefined)), idp(500, 200, token(undefined))],
      table: [table(0, normal()), table(0, normal(150), 1), table(0, normal(700), 2), table(0, normal(700), 3)],
    },
  ),
  schedule(
    'three warm instances race for a key while another instance, its table slow, asks the IdP past its hedge, and their table slows from 80 ms to 150 ms between their read and their claim',
    [
      at(0, 0, false, W.id),
      at(0, 1, false, W.id),
      at(0, 2, false, W.id),
      at(400, 0, false, W.id),
      at(400, 1, false, W.id),
      at(400, 2, false, W.id),
      at(9800, 3),
      at(10001, 0),
      at(10001, 1),
      at(10001, 2),
    ],
    {
      keys: [A, W],
      idp: [idp(0, 50, token(3600))],
      table: [table(0, normal(80)), table(0, normal(300), 3), ...[0, 1, 2].map((i) => table(10081, normal(150), i))],
    },
  ),
  schedule(
    "a no-cache request arrives as someone with write access writes back a takeover's claim and then the slow holder's claim it gave back with its error, 250 ms apart",
    [at(0, 0), at(1300, 1), at(1805, 2, true)],
    {
      seed: 1,
      idp: [idp(0, 4000, token(3600)), idp(1000, 20, ERROR), idp(1500, 20, token(3600))],
      tampering: [{ at: 1800, key: K, action: 'replay-run', times: 2, everyMs: 250 }],
    },
  ),
  schedule(
    "a request arrives as someone with write access writes back a holder's claim, its renewal and then its IdP error from five seconds before",
    [at(0, 0), at(5001, 1)],
    {
      seed: 7,
      idp: [idp(0, 300, ERROR), idp(1000, 20, token(3600))],
      tampering: [{ at: 5000, key: K, action: 'replay-run', times: 3, everyMs: 100 }],
    },
  ),
  schedule('a token of exactly 30 s, then an IdP error 2 s later on the same instance', [at(0, 0), at(2000, 0)], {
    idp: [idp(0, 20, token(30)), idp(1000, 20, ERROR)],
  }),
  schedule(
    'a no-cache token whose publication fails, then the same instance looks in the table 40 s later',
    [at(0, 0), at(6000, 0, true), at(40_000, 0), at(41_000, 1)],
    {
      table: [table(0, normal()), table(5990, { kind: 'error' }, 0), table(7000, normal(), 0)],
    },
  ),
  schedule(
    'two secrets of a proven client throttled at once on one concurrent instance, the longer hold first, then a no-cache request within it, memory only',
    [at(0, 0), at(100, 0, false, B.id), at(6000, 0, true), at(6010, 0, true, B.id), at(9000, 0, true, B.id)],
    {
      cache: 'memory',
      mode: 'concurrent',
      keys: [A, B],
      idp: [idp(0, 20, token(3600)), idp(5990, 500, throttle(2)), idp(6005, 100, throttle(30)), idp(6100, 20, token(3600))],
    },
  ),
  schedule('a token whose publication fails, then its instance looks in the table 40 s later', [at(0, 0), at(40_000, 0)], {
    table: [table(0, { kind: 'error' }, 0), table(1000, normal(), 0)],
  }),
  schedule(
    'a holder meets an IdP error while its table turns slow, and a no-cache request arrives on another instance before the error is published',
    [at(0, 0), at(1100, 1, true)],
    {
      idp: [idp(0, 1000, ERROR), idp(1050, 20, token(3600))],
      table: [table(0, normal()), table(900, { kind: 'slow', minMs: 600, maxMs: 600 }, 0)],
    },
  ),
  schedule(
    'on a concurrent instance, a refresh ahead is held back by a 1 s throttle another secret of its client met there just before, while the key item is slow; then one request just after the hold ends',
    [at(0, 0), at(100, 0, false, B.id), at(59_990, 0, true, B.id), at(60_035, 0), at(61_200, 0)],
    {
      mode: 'concurrent',
      durationMs: 95_000,
      keys: [A, B],
      idp: [idp(0, 20, token(120)), idp(59_900, 80, throttle(1)), idp(60_020, 20, token(120))],
      table: [table(0, normal()), table(60_000, normal(150), 0, K)],
    },
  ),
  schedule(
    "a waiter on an instance whose table answers in 100 ms arrives as someone with write access writes back a finished holder's twenty renewals one by one, 250 ms apart",
    [at(0, 0), at(4910, 1)],
    {
      seed: 35,
      idp: [idp(0, 4800, token(3600)), idp(1000, 20, token(3600))],
      table: [table(0, normal()), table(4000, normal(100), 1)],
      tampering: [{ at: 4900, key: K, action: 'replay-run', times: 20, everyMs: 250 }],
    },
  ),
  schedule(
    'six instances whose table failed at arrival have exchanges running that end in key throttles one after another (the fifth for 30 s), then a fresh instance asks once the short ones are over',
    [1, 2, 3, 4, 5, 6].map((i) => at(i * 10, i)).concat([at(7000, 7)]),
    {
      idp: [...[1, 2, 3, 4, 5, 6].map((i) => idp(i * 10, 600 + i * 110, throttle(i === 5 ? 30 : 5))), idp(1000, 20, token(3600))],
      table: [
        table(0, normal()),
        ...[1, 2, 3, 4, 5, 6].map((i) => table(0, { kind: 'error' }, i)),
        ...[1, 2, 3, 4, 5, 6].map((i) => table(200, normal(), i)),
      ],
    },
  ),
  schedule(
    'concurrent mode: a slow exchange, a later request on its instance takes over and meets a 401, the slow token comes, another instance keeps a copy, then an outage once it is stale',
    [at(0, 1), at(1100, 1), at(3000, 2), at(97_000, 2)],
    {
      mode: 'concurrent',
      idp: [idp(0, 1500, token(120)), idp(1000, 20, REJECT), idp(2000, 20, token(120)), idp(90_000, 20, ERROR)],
    },
  ),
  schedule(
    "a no-cache request on a 1 s deadline arrives as someone with write access writes back a failed holder's claims, renewals and error, 60 ms apart",
    [at(0, 0), at(351, 1, true)],
    {
      seed: 7,
      upstreamTimeoutMs: 1000,
      idp: [idp(0, 300, ERROR), idp(320, 20, token(3600))],
      tampering: [{ at: 350, key: K, action: 'replay-run', times: 12, everyMs: 60 }],
    },
  ),
  schedule(
    "a no-cache request on an instance whose table answers in 150 ms arrives just after a takeover met an IdP error and gave back a slow holder's claim, as someone with write access writes back the holder's older claim, then the taker's claim, then the item with the taker's error, 200 ms apart",
    [at(0, 2, false, W.id), at(2000, 0), at(3300, 1), at(3340, 2, true)],
    {
      seed: 1,
      keys: [A, W],
      idp: [idp(0, 20, token(3600)), idp(1900, 4000, token(3600)), idp(3000, 20, ERROR), idp(3330, 20, token(3600))],
      table: [table(0, normal()), table(0, normal(150), 2)],
      tampering: [{ at: 3350, key: K, action: 'replay-run', times: 3, everyMs: 200 }],
    },
  ),
  schedule(
    'two bursts for a 400 KB token that cannot be kept, the IdP taking 3 s for the second',
    [at(0, 0), at(10, 1), at(20_000, 0), at(20_010, 1)],
    { idp: [idp(0, 1000, token(undefined, 400_000)), idp(10_000, 3000, token(undefined, 400_000))] },
  ),
  schedule(
    'a kept token, then a no-cache request on its instance meets a 401, then plain requests there within the 5 s and after, memory only',
    [at(0, 0), at(10_000, 0, true), at(12_000, 0), at(20_000, 0)],
    {
      cache: 'memory',
      idp: [idp(0, 20, token(3600)), idp(9000, 20, REJECT)],
    },
  ),
  schedule(
    "a token kept in memory, a no-cache request on another instance meets a 401, then the receiver's look in the table 30 s on reads it within its 5 s",
    [at(0, 0), at(30_000, 1, true), at(31_000, 0)],
    {
      idp: [idp(0, 20, token(3600)), idp(1000, 20, REJECT)],
    },
  ),
  schedule(
    'on a concurrent instance whose no-cache request waits on a slow exchange, its visit reads a 401 another instance published; then a plain request there is answered from memory',
    [at(0, 0), at(5600, 0, true), at(6700, 1, true), at(8500, 2, true), at(9000, 0)],
    {
      mode: 'concurrent',
      idp: [idp(0, 20, token(3600)), idp(5000, 4500, token(3600)), idp(8000, 10, REJECT)],
    },
  ),
  schedule(
    'a 400 KB token that is kept, then two instances without it ask at once, the IdP taking 3 s',
    [at(0, 0), at(20_000, 1), at(20_010, 2)],
    { idp: [idp(0, 1000, token(3600, 400_000)), idp(10_000, 3000, token(3600, 400_000))] },
  ),
];
