import { UpstreamThrottled, upstreamFailure } from '../../lambda/errors';
import type { Entry } from '../../lambda/cache/lifetime';
import {
  answerFailure,
  answersNoCache,
  cutShort,
  decide,
  fromFleet,
  inForce,
  isRemembered,
  type KeyView,
  longer,
  outlivesRejection,
  proves,
  type Remembered,
  remember,
} from '../../lambda/cache/rules';
import { CLOCK_TOLERANCE_MS, epochMs } from '../../lambda/cache/time';

const NOW = epochMs(1_800_000_000_000);
/** The moment `ms` from NOW (before it, when negative). */
const at = (ms: number) => epochMs(NOW + ms);
const HOUR = { access_token: 'at', expires_in: 3600 };
/** A 1 h token received `ago` ms before NOW: fresh until 3210 s, refreshed until 3240 s, stale until 3600 s. */
const kept = (ago: number): Entry => ({ token: HOUR, receivedAt: at(-ago) });
const NEVER = epochMs(0);
const FRESH = kept(1000);
const REFRESH = kept(3_220_000);
const STALE = kept(3_300_000);
const failure: Remembered = { code: 'upstream_error', until: at(500) };
const hold: Remembered = { code: 'upstream_throttled', until: at(9000) };
const view = (parts: Partial<KeyView> = {}): KeyView => ({
  entry: undefined,
  failure: undefined,
  hold: undefined,
  busy: false,
  refreshing: false,
  ...parts,
});
const normal = { noCache: false, arrivedAt: NOW };
const noCache = { noCache: true, arrivedAt: NOW };

describe('decide, for a request', () => {
  it.each<[string, Partial<KeyView>, ReturnType<typeof decide>]>([
    ['answers a fresh token, whatever else is known', { entry: FRESH, failure, hold, busy: true }, { act: 'answer', entry: FRESH }],
    ['refreshes a token due for it, as the first request', { entry: REFRESH }, { act: 'exchange', refresh: true }],
    ['answers a token due for refresh while someone refreshes it', { entry: REFRESH, refreshing: true }, { act: 'answer', entry: REFRESH }],
    ['answers a token due for refresh while a failure is remembered', { entry: REFRESH, failure }, { act: 'answer', entry: REFRESH }],
    ['answers a token due for refresh during a hold', { entry: REFRESH, hold }, { act: 'answer', entry: REFRESH }],
    ['answers a stale token with the hold', { entry: STALE, hold, failure }, { act: 'fail', failure: hold, cause: 'hold' }],
    ['answers a stale token with the remembered failure', { entry: STALE, failure }, { act: 'fail', failure, cause: 'failure' }],
    ['waits for the exchange under way for a stale token', { entry: STALE, busy: true }, { act: 'wait' }],
    ['asks the IdP for a stale token', { entry: STALE }, { act: 'exchange', refresh: false }],
    ['asks the IdP when nothing is known', {}, { act: 'exchange', refresh: false }],
  ])('%s', (_case, parts, plan) => {
    expect(decide(view(parts), normal, NOW)).toEqual(plan);
  });
});

describe('decide, for a no-cache request', () => {
  it.each<[string, Partial<KeyView>, ReturnType<typeof decide>]>([
    ['answers a token received at most 5 s before it arrived', { entry: kept(5000) }, { act: 'answer', entry: kept(5000) }],
    ['does not answer one received earlier, however fresh', { entry: kept(5001) }, { act: 'exchange', refresh: false }],
    ['answers a hold with the hold', { entry: kept(6000), hold }, { act: 'fail', failure: hold, cause: 'hold' }],
    ['ignores a remembered failure', { failure }, { act: 'exchange', refresh: false }],
    ['waits for the exchange under way', { entry: kept(6000), busy: true, failure }, { act: 'wait' }],
  ])('%s', (_case, parts, plan) => {
    expect(decide(view(parts), noCache, NOW)).toEqual(plan);
  });
});

describe('answerFailure', () => {
  it('answers a token not yet stale as a hit, whatever the failure', () => {
    expect(answerFailure(failure, REFRESH, NEVER, normal, NOW)).toEqual({ served: 'hit', entry: REFRESH });
    expect(answerFailure({ code: 'token_url_not_allowed', until: NOW }, FRESH, NEVER, normal, NOW)).toEqual({
      served: 'hit',
      entry: FRESH,
    });
  });

  it.each(['upstream_error', 'upstream_throttled', 'upstream_timeout'] as const)('answers a stale token in place of %s', (code) => {
    expect(answerFailure({ code, until: at(1000) }, STALE, NEVER, normal, NOW)).toEqual({ served: 'stale', entry: STALE });
  });

  it.each(['unauthorized', 'token_url_not_allowed'] as const)('never answers a stale token in place of %s', (code) => {
    const answer = answerFailure({ code, until: at(1000) }, STALE, NEVER, normal, NOW);

    expect(answer).toEqual({ served: 'error', error: expect.objectContaining({ code }) });
  });

  it('never answers an expired token', () => {
    expect(answerFailure(failure, kept(3_600_000), NEVER, normal, NOW)).toMatchObject({ served: 'error' });
  });

  it('gives a no-cache request the error, never a kept token', () => {
    expect(answerFailure(failure, FRESH, NEVER, noCache, NOW)).toMatchObject({ served: 'error', error: { code: 'upstream_error' } });
  });

  it('says how many seconds of a hold are left, rounded up', () => {
    const answer = answerFailure({ code: 'upstream_throttled', until: at(8001) }, undefined, NEVER, normal, NOW);

    expect(answer).toEqual({ served: 'error', error: expect.any(UpstreamThrottled) });
    expect(answer.served === 'error' && (answer.error as UpstreamThrottled).retryAfterSeconds).toBe(9);
  });
});

describe('remember', () => {
  it.each([
    ['unauthorized', 5000],
    ['upstream_error', 1000],
    ['upstream_timeout', 1000],
    ['token_url_not_allowed', 1000],
  ] as const)('remembers %s for %p ms', (code, ms) => {
    expect(remember(upstreamFailure(code) as never, NOW)).toEqual({ code, until: at(ms) });
  });

  it('remembers a hold for as long as the IdP asked', () => {
    expect(remember(new UpstreamThrottled(42), NOW)).toEqual({ code: 'upstream_throttled', until: at(42_000) });
  });

  it('remembers what an exchange can end in, and nothing else', () => {
    expect(isRemembered(upstreamFailure('upstream_error'))).toBe(true);
    expect(isRemembered(new UpstreamThrottled(1))).toBe(true);
    expect(isRemembered(upstreamFailure('unauthorized'))).toBe(true);
    expect(isRemembered({ code: 'internal_error' } as never)).toBe(false);
    expect(isRemembered({ code: 'invalid_request' } as never)).toBe(false);
  });
});

describe("answerFailure and the key's last rejection", () => {
  it("never answers a stale token received before the rejection, nor within the clocks' tolerance after it", () => {
    const rejectedAt = at(-3_300_000 - CLOCK_TOLERANCE_MS);

    expect(answerFailure(failure, STALE, rejectedAt, normal, NOW)).toMatchObject({ served: 'error' });
    expect(answerFailure(failure, STALE, epochMs(rejectedAt - 1), normal, NOW)).toEqual({ served: 'stale', entry: STALE });
  });

  it('still answers a token not yet stale as a hit, whenever it was received', () => {
    expect(answerFailure(failure, FRESH, NOW, normal, NOW)).toEqual({ served: 'hit', entry: FRESH });
  });
});

describe('inForce', () => {
  it.each([
    ['a failure until a moment ago', { code: 'upstream_error', until: NOW }, false],
    ['a failure for another millisecond', { code: 'upstream_error', until: at(1) }, true],
    ['nothing', undefined, false],
  ] as const)('holds %s in force: %p', (_case, remembered, expected) => {
    expect(inForce(remembered as Remembered | undefined, NOW)).toBe(expected);
  });
});

describe('fromFleet', () => {
  it.each([
    ['a failure until a moment ago', { code: 'upstream_error', until: NOW }, undefined],
    ['a failure for another millisecond, as written', { code: 'upstream_error', until: at(1) }, at(1)],
    [
      'a rejection as long as an honest instance remembers it, with the clocks 5 s apart',
      { code: 'unauthorized', until: at(5000 + CLOCK_TOLERANCE_MS) },
      at(10_000),
    ],
    ['a rejection dated further ahead', { code: 'unauthorized', until: at(5001 + CLOCK_TOLERANCE_MS) }, undefined],
    [
      'a failure dated further ahead than 1 s and the tolerance',
      { code: 'upstream_error', until: at(1001 + CLOCK_TOLERANCE_MS) },
      undefined,
    ],
    ['a hold of 60 s, 5 s longer', { code: 'upstream_throttled', until: at(60_000 + CLOCK_TOLERANCE_MS) }, at(70_000)],
    ['a hold that ended less than 5 s ago, as in force 5 s longer', { code: 'upstream_throttled', until: at(-4999) }, at(1)],
    ['a hold that ended 5 s ago', { code: 'upstream_throttled', until: at(-5000) }, undefined],
    ['a hold dated years ahead', { code: 'upstream_throttled', until: at(3e11) }, undefined],
    ['nothing', undefined, undefined],
  ] as const)('honours %s: until %p', (_case, remembered, until) => {
    expect(fromFleet(remembered as Remembered | undefined, NOW)?.until).toBe(until);
  });
});

describe('longer', () => {
  it('keeps the hold that ends last, never shortening one', () => {
    const short: Remembered = { code: 'upstream_throttled', until: at(1000) };

    expect(longer(hold, short)).toBe(hold);
    expect(longer(short, hold)).toBe(hold);
    expect(longer(undefined, short)).toBe(short);
    expect(longer(short, undefined)).toBe(short);
    expect(longer(hold, { ...hold })).toBe(hold);
  });
});

describe('answersNoCache', () => {
  it('takes a token received at most 5 s before the request arrived', () => {
    expect([answersNoCache(kept(5000), normal), answersNoCache(kept(5001), normal)]).toEqual([true, false]);
  });
});

describe('cutShort', () => {
  const timeout: Remembered = { code: 'upstream_timeout', until: NOW };

  it("counts a timeout as the cache's own when the exchange had less than the deadline but the hedge", () => {
    expect(cutShort(timeout, 4799, 5000)).toBe(true);
    expect(cutShort(timeout, 4800, 5000)).toBe(false);
    expect(cutShort(timeout, 5000, 5000)).toBe(false);
  });

  it('never counts another failure as cut short, however little time its exchange had', () => {
    expect(cutShort({ code: 'upstream_error', until: NOW }, 100, 5000)).toBe(false);
  });
});

describe('outlivesRejection and proves', () => {
  it('lets any token stand in for a key never rejected, however early it is dated', () => {
    expect(outlivesRejection({ token: HOUR, receivedAt: epochMs(1000) }, NEVER)).toBe(true);
  });

  it('lets every token outlive a key never rejected', () => {
    expect(outlivesRejection(kept(0), NEVER)).toBe(true);
  });

  it("counts a token as outliving a rejection only when received more than the clocks' tolerance after it", () => {
    const token = kept(0);

    expect(outlivesRejection(token, at(-CLOCK_TOLERANCE_MS))).toBe(false);
    expect(outlivesRejection(token, at(-CLOCK_TOLERANCE_MS - 1))).toBe(true);
  });

  it('proves a key by a kept token until one lifetime after it expired, unless rejected since', () => {
    expect(proves(kept(7_199_999), NEVER, NOW)).toBe(true);
    expect(proves(kept(7_200_000), NEVER, NOW)).toBe(false);
    expect(proves(kept(1000), NOW, NOW)).toBe(false);
    expect(proves(undefined, NEVER, NOW)).toBe(false);
  });
});
