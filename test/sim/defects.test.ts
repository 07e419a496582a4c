import type { IdpPhase } from '../../sim/record';
import { drawnScenario, type Scenario, type ScenarioKey, scriptedScenario } from '../../sim/scenario';
import { runScenario, type SimResult } from '../../sim/simulation';
import { prng } from '../../sim/world';

// Each shape of trouble a review of the shared cache reproduced, as a scenario the simulator runs
// deterministically on the real cache code: what the callers got, and no invariant broken.

const KEY = 'client-a/read';
const healthy = (ms: number, expiresIn: number | undefined = 3600): IdpPhase => ({
  from: 0,
  minMs: ms,
  maxMs: ms,
  answer: { kind: 'token', expiresIn },
});
/** `count` requests for KEY, `everyMs` apart from `fromMs`, over `instances` instances in turn. */
const burst = (count: number, instances: number, fromMs = 0, everyMs = 10, key = KEY) =>
  Array.from({ length: count }, (_, index) => ({ at: fromMs + index * everyMs, instance: index % instances, key }));
/** What each caller got, in the order answered, with the instance it asked. */
const answers = (result: SimResult) =>
  result.record.answers.map((answer) => ({ ...answer, instance: result.record.requests[answer.request]?.instance }));
const statuses = (result: SimResult) => answers(result).map((answer) => answer.status);
const tokens = (result: SimResult) => new Set(answers(result).map((answer) => answer.token));
/** The requests that reached the IdP. */
const sent = (result: SimResult) => result.record.idp;
/** A client's key with its own secret, which the IdP accepts. */
const keyOf = (client: string, scope: string, secret = `${client}-secret`, authentic = true): ScenarioKey => ({
  id: `${client}/${scope}`,
  client,
  secret,
  scope,
  tokenUrl: 'https://idp.example/token',
  kind: 'secret',
  authentic,
});

async function run(scenario: Scenario): Promise<SimResult> {
  const result = await runScenario(scenario);
  // A broken invariant names itself, with the trace that led to it.
  expect({ violations: result.violations, trace: result.violations.length > 0 ? result.trace.slice(-60) : [] }).toEqual({
    violations: [],
    trace: [],
  });
  return result;
}

describe('the shared cache, under the trouble a review found', () => {
  it('writes a bounded number of times while someone retypes the revision again and again, and answers from the IdP', async () => {
    // The revision written as a number, a boolean, null, a list: every 100 ms for 5 s
    const result = await run(
      scriptedScenario(burst(8, 4, 100, 100), {
        idp: [healthy(50)],
        tampering: [{ at: 0, key: KEY, action: 'retype', times: 50 }],
      }),
    );

    expect(statuses(result)).toEqual(Array(8).fill(200));
    expect(result.record.table.filter((call) => call.item === KEY && call.op === 'put').length).toBeLessThanOrEqual(8 * 4);
  });

  it("shares the holder's token though someone rewrites the revision every 100 ms while its exchange runs", async () => {
    const result = await run(
      scriptedScenario(
        [{ at: 0, instance: 0, key: KEY }, ...burst(3, 3, 200, 10).map((arrival) => ({ ...arrival, instance: arrival.instance + 1 }))],
        {
          idp: [healthy(2000)],
          tampering: [{ at: 100, key: KEY, action: 'rewrite', times: 30 }],
        },
      ),
    );

    expect(statuses(result)).toEqual([200, 200, 200, 200]);
    expect(tokens(result).size).toBe(1);
    expect(sent(result)).toHaveLength(1);
  });

  it('lets a waiter answer with its own stale token when the exchange it waited for fails', async () => {
    // i1 gets a 2 min token the table never learns (its writes fail); 95 s later it is stale, and the
    // IdP fails: i0 claims and asks, i1 waits for i0, and stands its own copy in
    const result = await run(
      scriptedScenario(
        [
          { at: 0, instance: 1, key: KEY },
          { at: 95_000, instance: 0, key: KEY },
          { at: 95_010, instance: 1, key: KEY },
        ],
        {
          idp: [healthy(20, 120), { from: 90_000, minMs: 300, maxMs: 300, answer: { kind: 'error' } }],
          table: [
            { from: 0, behaviour: { kind: 'normal', minMs: 2, maxMs: 2 } },
            { from: 0, behaviour: { kind: 'error' }, instance: 'i1' },
            { from: 1000, behaviour: { kind: 'normal', minMs: 2, maxMs: 2 } },
          ],
        },
      ),
    );

    expect(answers(result).map((answer) => [answer.instance, answer.status, answer.header])).toEqual([
      ['i1', 200, 'miss'],
      ['i0', 502, undefined],
      ['i1', 200, 'stale'],
    ]);
  });

  it("never answers stale with a token received before its key's rejection, whatever the item holds after", async () => {
    // A 2 min token on i0 and i1; once stale, the IdP rejects the key (i0 asks); 6 s later the
    // rejection's 5 s are over, another failure and a claim have come, and the IdP is failing
    const result = await run(
      scriptedScenario(
        [
          { at: 0, instance: 0, key: KEY },
          { at: 10, instance: 1, key: KEY },
          { at: 95_000, instance: 0, key: KEY },
          { at: 101_000, instance: 2, key: KEY },
          { at: 101_500, instance: 1, key: KEY },
        ],
        {
          idp: [
            healthy(20, 120),
            { from: 94_000, minMs: 20, maxMs: 20, answer: { kind: 'reject' } },
            { from: 100_000, minMs: 300, maxMs: 300, answer: { kind: 'error' } },
          ],
        },
      ),
    );

    expect(answers(result).map((answer) => [answer.instance, answer.status])).toEqual([
      ['i0', 200],
      ['i1', 200],
      ['i0', 401],
      ['i2', 502],
      ['i1', 502],
    ]);
  });

  it('settles over a claim whose answer was lost, so the next request finds the token and waits out no silent claim', async () => {
    // At 1 s (the pepper long loaded), i0 reads the item and claims it; the claim lands but its answer
    // never comes, so i0 asks the IdP at the hedge and answers. i1 comes 1.5 s later.
    const result = await run(
      scriptedScenario(
        [
          { at: 1000, instance: 0, key: KEY },
          { at: 2500, instance: 1, key: KEY },
        ],
        {
          idp: [healthy(50)],
          table: [
            { from: 0, behaviour: { kind: 'normal', minMs: 2, maxMs: 2 } },
            // The read sent at 1000 answers at 1002; the claim sent then has its answer lost.
            { from: 1001, behaviour: { kind: 'lost-answer' }, instance: 'i0' },
            { from: 1800, behaviour: { kind: 'normal', minMs: 2, maxMs: 2 } },
          ],
        },
      ),
    );

    expect(result.record.table.find((call) => call.instance === 'i0' && call.op === 'put')).toMatchObject({ fault: 'lost-answer' });
    expect(statuses(result)).toEqual([200, 200]);
    expect(answers(result)[1]).toMatchObject({ header: 'hit', token: answers(result)[0]?.token });
    expect(answers(result)[1]?.answeredAt).toBeLessThan(2510);
    expect(sent(result)).toHaveLength(1);
  });

  it("gives a waiter its holder's token when a no-cache claim replaces the settle before the waiter reads it", async () => {
    // Found by the search (seed 100123): the token came 4.4 s after a 401, too close to prove the key
    // across clocks, so the no-cache claim did not carry it, and the waiter met a claim it could not outlast.
    const random = prng(100123);
    const result = await runScenario(drawnScenario(100123, 600, random), random);

    expect(result.violations).toEqual([]);
    expect(result.record.answers).toHaveLength(result.record.requests.length);
  });

  it('never takes over from a live holder whose clock is 4 s behind: one exchange for the burst', async () => {
    const result = await run(
      scriptedScenario(burst(6, 3, 0, 300), {
        idp: [healthy(3000)],
        skewsMs: [-4000, 0, 0],
      }),
    );

    expect(statuses(result)).toEqual(Array(6).fill(200));
    expect(sent(result)).toHaveLength(1);
  });

  it('never lets a shorter Retry-After shorten a longer hold', async () => {
    // Two scopes of a client, each with a kept 2 min token; once stale, the IdP asks one to wait 30 s,
    // then the other 5 s; 15 s later, a request must still be held
    const keys = [keyOf('client-a', 'read'), keyOf('client-a', 'write')];
    const result = await run(
      scriptedScenario(
        [
          { at: 0, instance: 0, key: KEY },
          { at: 10, instance: 1, key: 'client-a/write' },
          { at: 95_000, instance: 0, key: KEY },
          { at: 95_050, instance: 1, key: 'client-a/write' },
          { at: 110_000, instance: 2, key: KEY },
        ],
        {
          keys,
          table: [{ from: 0, behaviour: { kind: 'normal', minMs: 1, maxMs: 1 } }],
          idp: [
            healthy(20, 120),
            { from: 94_000, minMs: 100, maxMs: 100, answer: { kind: 'throttle', retryAfter: 30 } },
            { from: 95_040, minMs: 200, maxMs: 200, answer: { kind: 'throttle', retryAfter: 5 } },
          ],
        },
      ),
    );

    expect(sent(result).map((call) => call.retryAfterS)).toEqual([undefined, undefined, 30, 5]);
    expect(answers(result).at(-1)).toMatchObject({ instance: 'i2', status: 200, header: 'stale' });
  });

  it("answers the fleet's longer client hold over a shorter key hold its own memory knows", async () => {
    // i0's key client-a/write is held 8 s; then i1's proven key earns a 20 s hold on the whole client.
    // i0's next request must say what is left of the 20 s (seed 930@600: it said its own key hold's).
    const keys = [keyOf('client-a', 'read'), keyOf('client-a', 'write')];
    const result = await run(
      scriptedScenario(
        [
          { at: 0, instance: 1, key: KEY },
          { at: 200, instance: 0, key: 'client-a/write' },
          { at: 5100, instance: 1, key: KEY, noCache: true },
          { at: 6000, instance: 0, key: 'client-a/write' },
        ],
        {
          keys,
          idp: [
            healthy(20),
            { from: 100, minMs: 20, maxMs: 20, answer: { kind: 'throttle', retryAfter: 8 } },
            { from: 300, minMs: 20, maxMs: 20, answer: { kind: 'throttle', retryAfter: 20 } },
          ],
        },
      ),
    );

    expect(sent(result).map((call) => call.retryAfterS)).toEqual([undefined, 8, 20]);
    expect(answers(result).at(-1)).toMatchObject({ instance: 'i0', status: 503, retryAfter: 20 });
  });

  it('costs no third IdP request when the instance that took over gets a token that cannot be kept', async () => {
    // i0 claims and dies; i1 and i2 wait, one takes over; the token has no expires_in
    const result = await run(
      scriptedScenario(
        [
          { at: 0, instance: 0, key: KEY },
          { at: 100, instance: 1, key: KEY },
          { at: 120, instance: 2, key: KEY },
        ],
        { idp: [healthy(1000, undefined)], deaths: [{ at: 300, instance: 0 }] },
      ),
    );

    expect(statuses(result)).toEqual([200, 200]);
    expect(tokens(result).size).toBe(1);
    expect(sent(result)).toHaveLength(2);
  });

  it('never lets a caller who knows only the client id hold its owner: a failing secret holds its own key', async () => {
    // The IdP throttles the guesses (it throttles everyone then), and is healthy again when the owner comes.
    const guess = { ...keyOf('client-a', 'guess', 'a-guess', false), scope: 'read' };
    const result = await run(
      scriptedScenario(
        [
          ...Array.from({ length: 5 }, (_, index) => ({ at: index * 500, instance: index % 2, key: 'client-a/guess' })),
          { at: 3000, instance: 2, key: KEY },
          { at: 3100, instance: 0, key: KEY },
        ],
        {
          keys: [keyOf('client-a', 'read'), guess],
          idp: [
            { from: 0, minMs: 20, maxMs: 20, answer: { kind: 'throttle', retryAfter: 60 } },
            { ...healthy(20), from: 2900 },
          ],
        },
      ),
    );

    expect(
      answers(result)
        .slice(0, 5)
        .map((answer) => answer.status),
    ).toEqual(Array(5).fill(503));
    expect(
      answers(result)
        .slice(5)
        .map((answer) => [answer.status, answer.header]),
    ).toEqual([
      [200, 'miss'],
      [200, 'hit'],
    ]);
  });

  it('shares a running exchange with a no-cache request on an instance with memory alone', async () => {
    const result = await run(
      scriptedScenario(
        [
          { at: 0, instance: 0, key: KEY },
          { at: 100, instance: 0, key: KEY, noCache: true },
        ],
        { cache: 'memory', mode: 'concurrent', idp: [healthy(500)] },
      ),
    );

    expect(statuses(result)).toEqual([200, 200]);
    expect(sent(result)).toHaveLength(1);
  });

  it.each([4000, 4600])(
    'answers every request of 8 Lambda-shaped instances for 10 s with an IdP taking %p ms of a 5 s deadline',
    async (ms) => {
      const result = await run(scriptedScenario(burst(200, 8, 0, 50), { idp: [healthy(ms, undefined)] }));

      expect(statuses(result)).toEqual(Array(200).fill(200));
    },
  );

  it('answers every request when the table hangs and the IdP takes 4.7 s of a 5 s deadline', async () => {
    const result = await run(
      scriptedScenario(burst(200, 8, 0, 50), {
        idp: [healthy(4700)],
        table: [{ from: 0, behaviour: { kind: 'hang' } }],
      }),
    );

    expect(statuses(result)).toEqual(Array(200).fill(200));
  });

  it.each([
    ['slow', { kind: 'slow', minMs: 600, maxMs: 900 }],
    ['throttled', { kind: 'error' }],
  ] as const)("answers every request within a 1 s deadline when the client's hold item is %s", async (_case, behaviour) => {
    const result = await run(
      scriptedScenario(burst(40, 8, 0, 25), {
        upstreamTimeoutMs: 1000,
        idp: [healthy(100)],
        table: [
          { from: 0, behaviour: { kind: 'normal', minMs: 2, maxMs: 2 } },
          { from: 0, behaviour, item: 'hold:client-a' },
        ],
      }),
    );

    expect(statuses(result)).toEqual(Array(40).fill(200));
  });

  it('answers a cold burst of 400 over 8 keys and 8 instances within a 1 s deadline, twice per key at most', async () => {
    const keys = Array.from({ length: 8 }, (_, index) => keyOf(`client-${index}`, 'read'));
    const arrivals = Array.from({ length: 400 }, (_, index) => ({ at: index / 4, instance: index % 8, key: `client-${index % 8}/read` }));

    const result = await run(
      scriptedScenario(arrivals, {
        upstreamTimeoutMs: 1000,
        mode: 'concurrent',
        keys,
        idp: [healthy(200)],
        table: [{ from: 0, behaviour: { kind: 'normal', minMs: 5, maxMs: 30 } }],
      }),
    );

    expect(statuses(result)).toEqual(Array(400).fill(200));
    for (const key of keys) expect(sent(result).filter((request) => request.key === key.id).length).toBeLessThanOrEqual(2);
  });
});
