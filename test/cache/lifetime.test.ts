import type { IdpToken } from '../../lambda/upstream/exchange';
import { answerFrom, expiresAt, keepable, newest, openToFleet, phaseOf, provesUntil } from '../../lambda/cache/lifetime';
import { epochMs } from '../../lambda/cache/time';

const RECEIVED = 1_800_000_000_000;
/** The moment `ms` after the token arrived. */
const at = (ms: number) => epochMs(RECEIVED + ms);
const entry = (expiresIn: unknown, extra: Record<string, unknown> = {}) => ({
  token: { access_token: 'at', expires_in: expiresIn, ...extra } as IdpToken,
  receivedAt: at(0),
});

describe('keepable', () => {
  it.each([
    ['a numeric expires_in over 30 s', 31, true],
    ['a numeric string expires_in', '3600', true],
    ['an expires_in of exactly 30 s', 30, false],
    ['no expires_in', undefined, false],
    ['a zero expires_in', 0, false],
    ['a negative expires_in', -5, false],
    ['a non-numeric expires_in', 'soon', false],
    ['a fractional string expires_in', '3600.5', false],
    ['an infinite expires_in', Number.POSITIVE_INFINITY, false],
  ])('keeps a token with %s: %p', (_case, expiresIn, kept) => {
    expect(keepable(entry(expiresIn).token)).toBe(kept);
  });
});

describe('phaseOf', () => {
  // A 1 h token: stale at 3600 - 360 s, refreshed ahead from 30 s before that.
  it.each([
    [0, 'fresh'],
    [3_210_000 - 1, 'fresh'],
    [3_210_000, 'refresh'],
    [3_240_000 - 1, 'refresh'],
    [3_240_000, 'stale'],
    [3_600_000 - 1, 'stale'],
    [3_600_000, 'expired'],
  ])('is a 1 h token %p ms after it arrived: %s', (age, phase) => {
    expect(phaseOf(entry(3600), at(age))).toBe(phase);
  });

  // A 2 min token: margin 30 s, so stale at 90 s; never refreshed in the first half of its life (60 s).
  it.each([
    [60_000 - 1, 'fresh'],
    [60_000, 'refresh'],
    [90_000 - 1, 'refresh'],
    [90_000, 'stale'],
    [120_000, 'expired'],
  ])('is a 2 min token %p ms after it arrived: %s', (age, phase) => {
    expect(phaseOf(entry(120), at(age))).toBe(phase);
  });

  it('counts a token without a usable expires_in as expired', () => {
    expect(phaseOf(entry(undefined), at(0))).toBe('expired');
  });

  it('counts an expires_in that is neither a finite number nor a string of digits as none', () => {
    expect(phaseOf(entry(Number.POSITIVE_INFINITY), at(0))).toBe('expired');
    expect(phaseOf(entry(['3600']), at(0))).toBe('expired');
    expect(keepable(entry(['3600']).token)).toBe(false);
  });

  it('counts a string expires_in as the seconds it spells', () => {
    expect(phaseOf(entry('3600'), at(3_240_000))).toBe('stale');
  });
});

describe('openToFleet', () => {
  // From the middle of the refresh window: 3225 s for a 1 h token (3210 to 3240 s), 75 s for a 2 min one (60 to 90 s).
  it.each([
    [3600, 3_225_000 - 1, false],
    [3600, 3_225_000, true],
    [3600, 3_300_000, true],
    [120, 75_000 - 1, false],
    [120, 75_000, true],
  ])('opens the refresh of a %p s token to the fleet %p ms after it arrived: %p', (expiresIn, age, open) => {
    expect(openToFleet(entry(expiresIn), at(age))).toBe(open);
  });
});

describe('answerFrom', () => {
  it('lowers expires_in by the whole seconds elapsed, rounded up', () => {
    expect(answerFrom(entry(3600), at(100_500)).expires_in).toBe(3499);
    expect(answerFrom(entry(3600), at(0)).expires_in).toBe(3600);
  });

  it('keeps a string expires_in a string', () => {
    expect(answerFrom(entry('600'), at(60_000)).expires_in).toBe('540');
  });

  it("lowers Entra ID's ext_expires_in by the same seconds, in the type the IdP used", () => {
    expect(answerFrom(entry(3600, { ext_expires_in: 7200 }), at(60_000))).toMatchObject({ expires_in: 3540, ext_expires_in: 7140 });
    expect(answerFrom(entry(3600, { ext_expires_in: '7200' }), at(60_000)).ext_expires_in).toBe('7140');
  });

  it('never lowers below zero, and leaves a value that is not a number of seconds as it is', () => {
    expect(answerFrom(entry(3600, { ext_expires_in: 10 }), at(60_000)).ext_expires_in).toBe(0);
    expect(answerFrom(entry(3600, { ext_expires_in: '10' }), at(60_000)).ext_expires_in).toBe('0');
    expect(answerFrom(entry(3600, { ext_expires_in: 'later' }), at(60_000)).ext_expires_in).toBe('later');
    expect(answerFrom(entry(3600, { ext_expires_in: 'in 7200' }), at(60_000)).ext_expires_in).toBe('in 7200');
    expect(answerFrom(entry(3600, { ext_expires_in: '7200 s' }), at(60_000)).ext_expires_in).toBe('7200 s');
    expect(answerFrom(entry(3600, { ext_expires_in: ['7200'] }), at(60_000)).ext_expires_in).toEqual(['7200']);
  });

  it('adds no ext_expires_in where the IdP sent none, and changes nothing else', () => {
    const answered = answerFrom(entry(3600, { scope: 'read' }), at(1000));

    expect(answered).toStrictEqual({ access_token: 'at', expires_in: 3599, scope: 'read' });
  });

  it('never raises expires_in for a token dated ahead of this clock', () => {
    expect(answerFrom(entry(3600), at(-2000)).expires_in).toBe(3600);
  });
});

describe('a token another instance received', () => {
  // Dated by that instance's clock, which may run up to 5 s ahead: judged 5 s older, never served past its life.
  const fromFleet = { ...entry(3600), fleet: true as const };

  it.each([
    [3_205_000 - 1, 'fresh'],
    [3_205_000, 'refresh'],
    [3_235_000, 'stale'],
    [3_595_000 - 1, 'stale'],
    [3_595_000, 'expired'],
  ])('is a 1 h token %p ms after it arrived: %s', (age, phase) => {
    expect(phaseOf(fromFleet, at(age))).toBe(phase);
  });

  it('opens its refresh to the fleet 5 s earlier too', () => {
    expect([openToFleet(fromFleet, at(3_220_000 - 1)), openToFleet(fromFleet, at(3_220_000))]).toEqual([false, true]);
  });

  it('is answered with expires_in lowered by the seconds its own clock says, as any kept token', () => {
    expect(answerFrom(fromFleet, at(100_000)).expires_in).toBe(3500);
  });
});

describe('provesUntil', () => {
  it('proves its key for one lifetime past its expiry', () => {
    expect(provesUntil(entry(3600))).toBe(RECEIVED + 7_200_000);
  });
});

describe('expiresAt and newest', () => {
  it('dates expiry expires_in after arrival', () => {
    expect(expiresAt(entry(3600))).toBe(at(3_600_000));
  });

  it('picks the entry received last, or the one there is', () => {
    const older = entry(3600);
    const younger = { ...entry(3600), receivedAt: at(1) };

    expect(newest(older, younger)).toBe(younger);
    expect(newest(younger, older)).toBe(younger);
    expect(newest(undefined, older)).toBe(older);
    expect(newest(older, undefined)).toBe(older);
    expect(newest(undefined, undefined)).toBeUndefined();
  });

  it('keeps the first of two entries received at the same moment', () => {
    const kept = entry(3600);
    const same = entry(3600);

    expect(newest(kept, same)).toBe(kept);
  });
});
