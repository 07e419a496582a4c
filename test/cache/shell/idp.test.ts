import { Deadline, type EpochMs, epochMs } from '../../../lambda/clock';
import { ExchangeError, upstreamFailure } from '../../../lambda/errors';
import { type Exchange, exchangeResult } from '../../../lambda/cache/shell/idp';
import { checkTokenUrl, parseAllowlist } from '../../../lambda/policy/token-url-policy';
import type { TokenRequest } from '../../../lambda/request/token-request';
import { exchangeToken } from '../../../lambda/upstream/exchange';
import { destroyAgents } from '../../../lambda/upstream/guarded-agents';
import { manualClock, type ManualClock } from '../../support/manual-clock';
import { DEMO_TOKEN, json, startTokenServer, type TokenServer } from '../../support/token-server';

// What the cache learns from asking the IdP: the real exchange against the scripted token server on
// 127.0.0.1, on a manual clock, so each date is exact.

let server: TokenServer;
let clock: ManualClock;

beforeAll(async () => {
  server = await startTokenServer();
});
beforeEach(() => {
  clock = manualClock();
  server.received.length = 0;
});
afterAll(async () => {
  destroyAgents();
  await server.close();
});

/** The real exchange of one request, bounded by `deadline`. */
function exchangeWithin(deadline: Deadline): Exchange {
  const request: TokenRequest = {
    clientId: 'idp-test-client',
    clientSecret: 'idp-test-secret',
    accessTokenUrl: `${server.origin}/token`,
    grantType: 'client_credentials',
    authMethod: 'client_secret_post',
  };
  const target = checkTokenUrl(request.accessTokenUrl, parseAllowlist(server.origin));
  return () => exchangeToken(request, target, deadline, {});
}

/** Ask as instance `i-1` with a deadline of `ms` on the manual clock, knowing of the key's rejection as `rejectedAt` says. */
function ask(ms = 5000, rejectedAt: () => EpochMs = () => epochMs(0)) {
  const deadline = Deadline.after(clock, ms);
  return exchangeResult(exchangeWithin(deadline), clock, 'i-1', deadline, rejectedAt);
}

describe('exchangeResult', () => {
  it("gives the IdP's token as this instance's own, dated when its answer arrived, after the rejection known when it was asked for", async () => {
    // Prepare: the IdP takes 700 ms of the clock to answer.
    const asked = clock.epoch();
    server.answer((request, response) => {
      clock.advance(700);
      void json(200, { ...DEMO_TOKEN, scope: 'read' })(request, response);
    });

    // Act: a rejection was known from 2 s before the request.
    const result = await ask(5000, () => epochMs(asked - 2000));

    // Assess
    expect(result).toEqual({
      token: {
        token: { ...DEMO_TOKEN, scope: 'read' },
        receivedAt: asked + 700,
        receivedBy: 'i-1',
        copy: false,
        after: asked - 2000,
      },
    });
  });

  it('dates it after a rejection this instance learnt while the IdP answered: received once that was known (seed 1936687369)', async () => {
    // Another request here met a 401 while this exchange ran: its token, though asked for before, is received after it.
    let rejectedAt = epochMs(0);
    server.answer((request, response) => {
      clock.advance(2000);
      rejectedAt = epochMs(clock.epoch() - 1500);
      void json(200, DEMO_TOKEN)(request, response);
    });

    const result = await ask(5000, () => rejectedAt);

    expect(result).toMatchObject({ token: { after: rejectedAt } });
    expect(rejectedAt).toBeGreaterThan(0);
  });

  it.each([
    ['a rejection, 5 s', json(401, { error: 'invalid_client' }), 'unauthorized', 5000],
    ['a server error, 1 s', json(500, { error: 'server_error' }), 'upstream_error', 1000],
    ['an answer that is no token, 1 s', json(200, { token_type: 'Bearer' }), 'upstream_error', 1000],
    ['a 429, as long as its retry-after', json(429, { error: 'slow_down' }, { 'retry-after': '7' }), 'upstream_throttled', 7000],
    ['a 503 with retry-after, as long as it says', json(503, {}, { 'retry-after': '12' }), 'upstream_throttled', 12_000],
  ] as const)('remembers %s from when it was handled', async (_case, script, code, forMs) => {
    // Prepare
    server.answer((request, response) => {
      clock.advance(300);
      void script(request, response);
    });
    const asked = clock.epoch();

    // Act
    const result = await ask();

    // Assess
    expect(result).toEqual({ failure: { code, until: asked + 300 + forMs } });
  });

  it('dates a timeout at the deadline that ended it, however late its news is handled', async () => {
    // Prepare: the IdP never answers; the instance is frozen from before its deadline until 3 s after it.
    let arrived: () => void = () => undefined;
    const atIdp = new Promise<void>((resolve) => (arrived = resolve));
    server.answer(() => arrived());
    const asked = clock.epoch();

    // Act
    const result = ask(2000);
    await atIdp;
    clock.advance(5000);

    // Assess: remembered 1 s from the deadline, not from the thaw.
    expect(await result).toEqual({ failure: { code: 'upstream_timeout', until: asked + 2000 + 1000 } });
  });

  it('dates any other failure handled after the deadline at the deadline: it came by then (seed 10410@60)', async () => {
    // A Lambda frozen while the IdP answered reads the answer when thawed, maybe hours later: old news, not remembered as new.
    const deadline = Deadline.after(clock, 1000);
    const late: Exchange = async () => {
      clock.advance(4000);
      throw upstreamFailure('upstream_error');
    };
    const asked = clock.epoch();

    expect(await exchangeResult(late, clock, 'i-1', deadline, () => epochMs(0))).toEqual({
      failure: { code: 'upstream_error', until: asked + 1000 + 1000 },
    });
  });

  it('dates a failure handled within the deadline when it is handled', async () => {
    const deadline = Deadline.after(clock, 5000);
    const inTime: Exchange = async () => {
      clock.advance(4000);
      throw upstreamFailure('upstream_error');
    };
    const asked = clock.epoch();

    expect(await exchangeResult(inTime, clock, 'i-1', deadline, () => epochMs(0))).toEqual({
      failure: { code: 'upstream_error', until: asked + 4000 + 1000 },
    });
  });

  it.each([
    ['an internal error', new ExchangeError('internal_error', 'Internal error')],
    ['an invalid request', new ExchangeError('invalid_request', 'client_id is required')],
    ['anything that is no ExchangeError', new TypeError('a bug')],
  ])('throws %s as the bug it is, remembered by no one', async (_case, bug) => {
    const deadline = Deadline.after(clock, 1000);

    await expect(
      exchangeResult(
        () => Promise.reject(bug),
        clock,
        'i-1',
        deadline,
        () => epochMs(0),
      ),
    ).rejects.toBe(bug);
  });
});
