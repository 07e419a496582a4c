import { epochMs } from '../../../lambda/clock';
import { ExchangeError, UpstreamThrottled, upstreamFailure, type UpstreamFailureCode } from '../../../lambda/errors';
import { CLOCK_TOLERANCE_MS, type Entry, ownEntry } from '../../../lambda/cache/core/lifetime';
import {
  answerFailure,
  answersNoCache,
  cutShort,
  decide,
  type FailureAnswer,
  type Freshness,
  fromFleet,
  happenedAt,
  holdScope,
  inForce,
  isHold,
  isRemembered,
  type KeyView,
  laterRejection,
  longer,
  NO_REJECTION,
  outlastsTimeout,
  outlivesRejection,
  type Plan,
  proves,
  receivedSince,
  type Rejection,
  type Remembered,
  remember,
} from '../../../lambda/cache/core/rules';

// The cache's rules for one key, as the contract states them. NOW is the request's moment; at(ms) is ms from it.

const NOW = epochMs(1_800_000_000_000);
const at = (ms: number) => epochMs(NOW + ms);
const HOUR = { access_token: 'at', expires_in: 3600 };
/** A 1 h token received `ago` ms before NOW, here: fresh until 3210 s, due for refresh until 3240 s, stale until 3600 s. */
const kept = (ago: number, copy = false): Entry => ({ ...ownEntry(HOUR, at(-ago), copy ? 'other' : 'self'), copy });
const FRESH = kept(1000);
const REFRESH = kept(3_220_000);
const STALE = kept(3_300_000);
/** Stale, and within its last 5 s: no longer served. */
const LAST_SECONDS = kept(3_596_000);
const failure: Remembered = { code: 'upstream_error', until: at(500) };
const hold: Remembered = { code: 'upstream_throttled', until: at(9000) };
const rejection = (ms: number, own = false): Rejection => ({ at: at(ms), own });
const view = (parts: Partial<KeyView> = {}): KeyView => ({
  entry: undefined,
  failure: undefined,
  hold: undefined,
  busy: false,
  refreshing: false,
  ...parts,
});
const normal: Freshness = { noCache: false, arrivedAt: NOW };
const noCache: Freshness = { noCache: true, arrivedAt: NOW };
/** An answer in place of a failure, its error by code, description and seconds (jest compares errors by message alone). */
const shown = (answer: FailureAnswer) =>
  answer.served === 'error'
    ? {
        served: answer.served,
        code: answer.error.code,
        description: answer.error.description,
        retryAfter: answer.error instanceof UpstreamThrottled ? answer.error.retryAfterSeconds : undefined,
      }
    : answer;
const errorShown = (code: UpstreamFailureCode, retryAfter?: number) => ({
  served: 'error',
  code,
  description: upstreamFailure(code).description,
  retryAfter,
});

describe('decide, for a request', () => {
  it.each<[string, Partial<KeyView>, Plan]>([
    [
      'answers a fresh token, whatever else is known',
      { entry: FRESH, failure, hold, busy: true, refreshing: true },
      { act: 'answer', entry: FRESH },
    ],
    ['refreshes a token due for it, as the first request', { entry: REFRESH }, { act: 'exchange', refresh: true }],
    ['refreshes a token due for it while an exchange is under way', { entry: REFRESH, busy: true }, { act: 'exchange', refresh: true }],
    ['answers a token due for refresh while someone refreshes it', { entry: REFRESH, refreshing: true }, { act: 'answer', entry: REFRESH }],
    ['answers a token due for refresh while a failure is remembered', { entry: REFRESH, failure }, { act: 'answer', entry: REFRESH }],
    ['answers a token due for refresh during a hold', { entry: REFRESH, hold }, { act: 'answer', entry: REFRESH }],
    [
      'fails a stale token with the hold before the remembered failure',
      { entry: STALE, hold, failure, busy: true },
      { act: 'fail', failure: hold, cause: 'hold' },
    ],
    [
      'fails a stale token with the remembered failure before waiting',
      { entry: STALE, failure, busy: true },
      { act: 'fail', failure, cause: 'failure' },
    ],
    ['waits for the exchange under way for a stale token', { entry: STALE, busy: true }, { act: 'wait' }],
    ['asks the IdP for a stale token', { entry: STALE }, { act: 'exchange', refresh: false }],
    ['asks the IdP when nothing is known', {}, { act: 'exchange', refresh: false }],
    ['fails with a hold when nothing is kept', { hold }, { act: 'fail', failure: hold, cause: 'hold' }],
  ])('%s', (_case, parts, plan) => {
    expect(decide(view(parts), normal, NOW)).toEqual(plan);
  });
});

describe('decide, for a no-cache request', () => {
  it.each<[string, Partial<KeyView>, Freshness, Plan]>([
    ['answers a token received 5 s before it arrived', { entry: kept(5000) }, noCache, { act: 'answer', entry: kept(5000) }],
    ['asks the IdP for one received earlier, however fresh', { entry: kept(5001) }, noCache, { act: 'exchange', refresh: false }],
    [
      'answers a token received 5 s before it arrived, though it has waited since',
      { entry: kept(8000) },
      { noCache: true, arrivedAt: at(-3000) },
      { act: 'answer', entry: kept(8000) },
    ],
    ['answers a recent token during a hold', { entry: kept(1000), hold }, noCache, { act: 'answer', entry: kept(1000) }],
    [
      'fails with the hold otherwise',
      { entry: kept(6000), hold, failure, busy: true },
      noCache,
      { act: 'fail', failure: hold, cause: 'hold' },
    ],
    ['ignores a remembered failure', { failure }, noCache, { act: 'exchange', refresh: false }],
    ['waits for the exchange under way', { entry: kept(6000), busy: true, failure }, noCache, { act: 'wait' }],
    [
      'never answers a recent token too close to its expiry to be served',
      { entry: { ...kept(2000), token: { access_token: 'short', expires_in: 6 } } },
      noCache,
      { act: 'exchange', refresh: false },
    ],
  ])('%s', (_case, parts, freshness, plan) => {
    expect(decide(view(parts), freshness, NOW)).toEqual(plan);
  });
});

describe('answersNoCache', () => {
  it('takes a token received at most 5 s before the request arrived', () => {
    expect([answersNoCache(kept(5000), normal), answersNoCache(kept(5001), normal)]).toEqual([true, false]);
  });
});

describe('answerFailure', () => {
  it('answers a token not yet stale as a hit, whatever the failure and whenever the key was rejected', () => {
    expect(answerFailure(failure, REFRESH, NO_REJECTION, normal, NOW, NOW)).toEqual({ served: 'hit', entry: REFRESH });
    expect(answerFailure({ code: 'unauthorized', until: at(5000) }, FRESH, rejection(0, true), normal, NOW, NOW)).toEqual({
      served: 'hit',
      entry: FRESH,
    });
  });

  it.each(['upstream_error', 'upstream_throttled', 'upstream_timeout'] as const)('answers a stale token in place of %s', (code) => {
    expect(answerFailure({ code, until: at(1000) }, STALE, NO_REJECTION, normal, NOW, NOW)).toEqual({ served: 'stale', entry: STALE });
  });

  it.each(['unauthorized', 'token_url_not_allowed'] as const)('never answers a stale token in place of %s', (code) => {
    const answer = answerFailure({ code, until: at(1000) }, STALE, NO_REJECTION, normal, NOW, NOW);

    expect(shown(answer)).toEqual(errorShown(code));
  });

  it('never answers a token within 5 s of its expiry, nor an expired one', () => {
    expect(shown(answerFailure(failure, LAST_SECONDS, NO_REJECTION, normal, NOW, NOW))).toEqual(errorShown('upstream_error'));
    expect(shown(answerFailure(failure, kept(3_600_000), NO_REJECTION, normal, NOW, NOW))).toEqual(errorShown('upstream_error'));
  });

  it('gives a no-cache request the error, never a kept token', () => {
    expect(shown(answerFailure(failure, FRESH, NO_REJECTION, noCache, NOW, NOW))).toEqual(errorShown('upstream_error'));
  });

  it('gives the error when nothing is kept', () => {
    expect(shown(answerFailure(failure, undefined, NO_REJECTION, normal, NOW, NOW))).toEqual(errorShown('upstream_error'));
  });

  it.each([
    [8001, 9],
    [8000, 8],
    [1, 1],
    [0, 1],
    [-2500, 1],
  ])('says a hold with %p ms left has %p s left: rounded up, never under 1', (leftMs, seconds) => {
    const answer = answerFailure({ code: 'upstream_throttled', until: at(leftMs) }, undefined, NO_REJECTION, normal, NOW, NOW);

    expect(shown(answer)).toEqual(errorShown('upstream_throttled', seconds));
  });

  it('counts a hold this request met itself from when it met it, and one it was told of from now', () => {
    // A 429 met 2 s ago with retry-after 10: the caller is told the IdP's 10 s, not the 8 s left.
    const met = answerFailure({ code: 'upstream_throttled', until: at(8000) }, undefined, NO_REJECTION, normal, NOW, at(-2000));
    const told = answerFailure({ code: 'upstream_throttled', until: at(8000) }, undefined, NO_REJECTION, normal, NOW, at(3000));

    expect([shown(met), shown(told)]).toEqual([errorShown('upstream_throttled', 10), errorShown('upstream_throttled', 8)]);
  });

  it("never answers a stale token received before the key's last rejection, nor within the clocks' tolerance after it", () => {
    const received = -3_300_000;

    expect(shown(answerFailure(failure, STALE, rejection(received - CLOCK_TOLERANCE_MS), normal, NOW, NOW))).toEqual(
      errorShown('upstream_error'),
    );
    expect(answerFailure(failure, STALE, rejection(received - CLOCK_TOLERANCE_MS - 1), normal, NOW, NOW)).toEqual({
      served: 'stale',
      entry: STALE,
    });
  });

  it('answers a stale token received after a rejection this instance dated too, by any margin', () => {
    expect(answerFailure(failure, STALE, rejection(-3_300_001, true), normal, NOW, NOW)).toEqual({ served: 'stale', entry: STALE });
  });
});

describe('remember', () => {
  it.each([
    ['unauthorized', 5000],
    ['upstream_error', 1000],
    ['upstream_timeout', 1000],
    ['token_url_not_allowed', 1000],
  ] as const)('remembers %s for %p ms', (code, ms) => {
    expect(remember(upstreamFailure(code) as ExchangeError & { code: UpstreamFailureCode }, NOW)).toEqual({ code, until: at(ms) });
  });

  it('remembers a hold for as long as the IdP asked', () => {
    expect(remember(new UpstreamThrottled(42), NOW)).toEqual({ code: 'upstream_throttled', until: at(42_000) });
  });
});

describe('isRemembered and isHold', () => {
  it.each([
    ['unauthorized', true],
    ['token_url_not_allowed', true],
    ['upstream_error', true],
    ['upstream_throttled', true],
    ['upstream_timeout', true],
    ['invalid_request', false],
    ['credential_not_allowed', false],
    ['payload_too_large', false],
    ['internal_error', false],
  ] as const)('remembers a failure with code %s: %p', (code, remembered) => {
    expect(isRemembered(new ExchangeError(code, 'a description'))).toBe(remembered);
  });

  it('tells a hold from a failure', () => {
    expect([isHold(hold), isHold(failure), isHold({ code: 'unauthorized', until: NOW })]).toEqual([true, false, false]);
  });
});

describe('cutShort', () => {
  const timeout: Remembered = { code: 'upstream_timeout', until: NOW };

  it("counts a timeout as the cache's own when the exchange had less than the deadline but a twenty-fifth", () => {
    expect([cutShort(timeout, 4799, 5000), cutShort(timeout, 4800, 5000), cutShort(timeout, 5000, 5000)]).toEqual([true, false, false]);
    expect([cutShort(timeout, 959, 1000), cutShort(timeout, 960, 1000)]).toEqual([true, false]);
  });

  it('never counts another failure as cut short, however little time its exchange had', () => {
    expect([cutShort(failure, 100, 5000), cutShort(hold, 100, 5000)]).toEqual([false, false]);
  });
});

describe('outlastsTimeout', () => {
  // A timeout remembered until NOW happened at(-1000).
  const timeout: Remembered = { code: 'upstream_timeout', until: NOW };

  it('lets a request that came before a timeout, with more than the margin left, outlast it', () => {
    expect([outlastsTimeout(timeout, at(-1001), 101, 100), outlastsTimeout(timeout, at(-1001), 100, 100)]).toEqual([true, false]);
  });

  it('binds a request that came at or after it, whatever it has left', () => {
    expect([outlastsTimeout(timeout, at(-1000), 5000, 100), outlastsTimeout(timeout, at(-999), 5000, 100)]).toEqual([false, false]);
  });

  it('lets no request outlast another failure', () => {
    expect([outlastsTimeout(failure, at(-5000), 5000, 100), outlastsTimeout(hold, at(-70_000), 5000, 100)]).toEqual([false, false]);
  });
});

describe('happenedAt', () => {
  it.each([
    ['a rejection', 'unauthorized', -5000],
    ['a server error', 'upstream_error', -1000],
    ['a timeout', 'upstream_timeout', -1000],
    ['a refused address', 'token_url_not_allowed', -1000],
    ['a hold, as its end', 'upstream_throttled', 0],
  ] as const)('dates %s as long before its end as it is remembered', (_case, code, ms) => {
    expect(happenedAt({ code, until: NOW })).toBe(at(ms));
  });
});

describe('inForce', () => {
  it.each([
    ['a failure until now', { code: 'upstream_error', until: NOW }, false],
    ['a failure for another millisecond', { code: 'upstream_error', until: at(1) }, true],
    ['nothing', undefined, false],
  ] as const)('holds %s in force: %p', (_case, remembered, expected) => {
    expect(inForce(remembered as Remembered | undefined, NOW)).toBe(expected);
  });
});

describe('fromFleet', () => {
  it.each([
    ['a failure until now', { code: 'upstream_error', until: NOW }, undefined],
    ['a failure for another millisecond, as written', { code: 'upstream_error', until: at(1) }, at(1)],
    ['a failure as far ahead as 1 s and the tolerance', { code: 'upstream_error', until: at(1000 + CLOCK_TOLERANCE_MS) }, at(6000)],
    ['a failure dated further ahead', { code: 'upstream_error', until: at(1001 + CLOCK_TOLERANCE_MS) }, undefined],
    ['a rejection as far ahead as 5 s and the tolerance', { code: 'unauthorized', until: at(5000 + CLOCK_TOLERANCE_MS) }, at(10_000)],
    ['a rejection dated further ahead', { code: 'unauthorized', until: at(5001 + CLOCK_TOLERANCE_MS) }, undefined],
    ['a hold as far ahead as 60 s and the tolerance', { code: 'upstream_throttled', until: at(60_000 + CLOCK_TOLERANCE_MS) }, at(65_000)],
    ['a hold dated further ahead', { code: 'upstream_throttled', until: at(60_001 + CLOCK_TOLERANCE_MS) }, undefined],
    ['a hold dated years ahead', { code: 'upstream_throttled', until: at(3e11) }, undefined],
    ['a hold that has ended', { code: 'upstream_throttled', until: at(-1) }, undefined],
    ['nothing', undefined, undefined],
  ] as const)('honours %s: until %p', (_case, remembered, until) => {
    expect(fromFleet(remembered as Remembered | undefined, NOW)?.until).toBe(until);
  });

  it('gives back what it honours as it is', () => {
    expect(fromFleet(hold, NOW)).toBe(hold);
  });
});

describe('longer', () => {
  it('keeps the one that ends last, never shortening a hold', () => {
    const short: Remembered = { code: 'upstream_throttled', until: at(1000) };

    expect([longer(hold, short), longer(short, hold)]).toEqual([hold, hold]);
    expect([longer(undefined, short), longer(short, undefined), longer(undefined, undefined)]).toEqual([short, short, undefined]);
  });

  it('keeps the first of two that end together', () => {
    const same: Remembered = { code: 'upstream_error', until: hold.until };

    expect([longer(hold, same), longer(same, hold)]).toEqual([hold, same]);
  });
});

describe('receivedSince and outlivesRejection', () => {
  it('counts a token as received since a rejection only when dated after it', () => {
    expect([receivedSince(kept(0), rejection(-1)), receivedSince(kept(0), rejection(0)), receivedSince(kept(0), NO_REJECTION)]).toEqual([
      true,
      false,
      true,
    ]);
  });

  it('lets any token stand in for a key never rejected, however early it is dated', () => {
    const ancient: Entry = { ...kept(0, true), receivedAt: epochMs(1000) };

    expect(outlivesRejection(ancient, NO_REJECTION)).toBe(true);
  });

  it('compares a token and a rejection this instance both dated exactly', () => {
    expect([outlivesRejection(kept(0), rejection(-1, true)), outlivesRejection(kept(0), rejection(0, true))]).toEqual([true, false]);
  });

  it('lets a token stand in whose exchange was asked for after the rejection was known, however its receiver dated it', () => {
    const askedAfter: Entry = { ...kept(0, true), receivedAt: at(-60_000), after: at(-60_000) };

    expect([outlivesRejection(askedAfter, rejection(-60_000)), outlivesRejection(askedAfter, rejection(-59_999))]).toEqual([true, false]);
  });

  it.each([
    ['its own token after a rejection another instance dated', false, false],
    ['a copy after a rejection this instance dated', true, true],
    ['a copy after a rejection another instance dated', true, false],
  ])("counts %s as outliving it only by more than the clocks' tolerance", (_case, copy, own) => {
    expect(outlivesRejection(kept(0, copy), rejection(-CLOCK_TOLERANCE_MS, own))).toBe(false);
    expect(outlivesRejection(kept(0, copy), rejection(-CLOCK_TOLERANCE_MS - 1, own))).toBe(true);
  });
});

describe('laterRejection', () => {
  it('keeps the later of two rejections, the first of two dated alike', () => {
    const [early, late, lateOwn] = [rejection(-1), rejection(0), rejection(0, true)];

    expect([laterRejection(early, late), laterRejection(late, early), laterRejection(late, lateOwn)]).toEqual([late, late, late]);
    expect(laterRejection(NO_REJECTION, early)).toBe(early);
  });
});

describe('proves and holdScope', () => {
  it('proves a key by a kept token until one lifetime after it expired, unless the key was rejected since', () => {
    expect([proves(kept(7_199_999), NO_REJECTION, NOW), proves(kept(7_200_000), NO_REJECTION, NOW)]).toEqual([true, false]);
    expect([proves(kept(1000), rejection(-1000), NOW), proves(kept(1000), rejection(-1001), NOW)]).toEqual([false, true]);
    expect(proves(undefined, NO_REJECTION, NOW)).toBe(false);
  });

  it.each<[string, boolean, Entry | undefined, Rejection, 'client' | 'key']>([
    ['a key proven by a kept token', false, FRESH, NO_REJECTION, 'client'],
    ['a key proven by a token expired less than one lifetime ago', false, kept(7_000_000), NO_REJECTION, 'client'],
    ['a stored credential, whatever it keeps', true, undefined, NO_REJECTION, 'client'],
    ['a stored credential rejected since its token', true, FRESH, rejection(0), 'client'],
    ['a key with nothing kept', false, undefined, NO_REJECTION, 'key'],
    ['a key whose token the IdP rejected since', false, FRESH, rejection(0), 'key'],
    ['a key whose token expired more than one lifetime ago', false, kept(7_200_000), NO_REJECTION, 'key'],
  ])('holds %s at the scope %s', (_case, vouched, entry, lastRejection, scope) => {
    expect(holdScope(vouched, entry, lastRejection, NOW)).toBe(scope);
  });
});
