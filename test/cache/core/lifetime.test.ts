import { epochMs } from '../../../lambda/clock';
import {
  answerFrom,
  CLOCK_TOLERANCE_MS,
  type Entry,
  expiresAt,
  keepable,
  newest,
  openToFleet,
  phaseOf,
  provesUntil,
  served,
  tokenBytes,
  ownEntry,
} from '../../../lambda/cache/core/lifetime';
import type { IdpToken } from '../../../lambda/upstream/exchange';

// A kept token's life, by the contract's Lifetime and Clocks rules. Every time is `at(ms)`: ms after the token arrived.

const RECEIVED = 1_800_000_000_000;
const at = (ms: number) => epochMs(RECEIVED + ms);
/** A token this instance received at RECEIVED, with `expires_in` as given. */
const own = (expiresIn: unknown, extra: Record<string, unknown> = {}): Entry =>
  ownEntry({ access_token: 'at', expires_in: expiresIn, ...extra } as IdpToken, at(0), 'this-instance');
/** The same token as another instance holds it: a copy from the table, dated by the receiver's clock. */
const copy = (expiresIn: unknown, extra: Record<string, unknown> = {}): Entry => ({ ...own(expiresIn, extra), copy: true });

describe('keepable', () => {
  it.each<[string, unknown, boolean]>([
    ['a numeric expires_in over 30 s', 31, true],
    ['a numeric string expires_in over 30 s', '31', true],
    ['an expires_in of exactly 30 s', 30, false],
    ['a string expires_in of exactly 30 s', '30', false],
    ['no expires_in', undefined, false],
    ['a null expires_in', null, false],
    ['a zero expires_in', 0, false],
    ['a negative expires_in', -3600, false],
    ['an infinite expires_in', Number.POSITIVE_INFINITY, false],
    ['a NaN expires_in', Number.NaN, false],
    ['a word', 'soon', false],
    ['an empty string', '', false],
    ['a fractional string', '3600.5', false],
    ['a string with a space before the digits', ' 3600', false],
    ['a string with a space after the digits', '3600 ', false],
    ['a hexadecimal string', '0x1000', false],
    ['an array holding the digits', ['3600'], false],
    ['true', true, false],
  ])('keeps a token with %s: %p', (_case, expiresIn, kept) => {
    expect(keepable(own(expiresIn).token)).toBe(kept);
  });
});

describe('phaseOf, by the age of the token as dated', () => {
  // 1 h: the margin is 10% (360 s), so stale at 3240 s; refreshed ahead from 30 s before that.
  it.each([
    [-2000, 'fresh'],
    [0, 'fresh'],
    [3_210_000 - 1, 'fresh'],
    [3_210_000, 'refresh'],
    [3_240_000 - 1, 'refresh'],
    [3_240_000, 'stale'],
    [3_600_000 - 1, 'stale'],
    [3_600_000, 'expired'],
  ])('is a 1 h token %p ms after it arrived: %s', (age, phase) => {
    expect(phaseOf(own(3600), at(age))).toBe(phase);
  });

  // 2 min: the margin is 30 s (more than 10%), so stale at 90 s; the refresh opens at 60 s by both rules.
  it.each([
    [60_000 - 1, 'fresh'],
    [60_000, 'refresh'],
    [90_000 - 1, 'refresh'],
    [90_000, 'stale'],
    [120_000 - 1, 'stale'],
    [120_000, 'expired'],
  ])('is a 2 min token %p ms after it arrived: %s', (age, phase) => {
    expect(phaseOf(own(120), at(age))).toBe(phase);
  });

  // 100 s: stale at 70 s; 30 s before that is 40 s, but no refresh comes in the first half of a life (50 s).
  it.each([
    [50_000 - 1, 'fresh'],
    [50_000, 'refresh'],
    [70_000 - 1, 'refresh'],
    [70_000, 'stale'],
    [100_000, 'expired'],
  ])('is a 100 s token %p ms after it arrived: %s', (age, phase) => {
    expect(phaseOf(own(100), at(age))).toBe(phase);
  });

  it('dates a copy by its receipt alone: its phases come at the same ages as the receiver’s', () => {
    const ages = [3_210_000 - 1, 3_210_000, 3_240_000 - 1, 3_240_000, 3_600_000 - 1, 3_600_000];

    expect(ages.map((age) => phaseOf(copy(3600), at(age)))).toEqual(ages.map((age) => phaseOf(own(3600), at(age))));
  });

  it('counts a string expires_in as the seconds it spells', () => {
    expect([phaseOf(own('3600'), at(3_240_000 - 1)), phaseOf(own('3600'), at(3_240_000))]).toEqual(['refresh', 'stale']);
  });

  it.each<[string, unknown]>([
    ['no expires_in', undefined],
    ['an infinite one', Number.POSITIVE_INFINITY],
    ['one that is not a string of digits', '1 h'],
    ['an array', ['3600']],
  ])('counts a token with %s as expired', (_case, expiresIn) => {
    expect(phaseOf(own(expiresIn), at(0))).toBe('expired');
  });
});

describe('openToFleet', () => {
  // From the middle of the refresh window: 3225 s for 1 h (3210-3240 s), 75 s for 2 min (60-90 s), 60 s for 100 s (50-70 s).
  it.each([
    [3600, 3_225_000 - 1, false],
    [3600, 3_225_000, true],
    [3600, 3_300_000, true],
    [120, 75_000 - 1, false],
    [120, 75_000, true],
    [100, 60_000 - 1, false],
    [100, 60_000, true],
  ])('opens the refresh of a %p s token to the fleet %p ms after it arrived: %p', (expiresIn, age, open) => {
    expect(openToFleet(own(expiresIn), at(age))).toBe(open);
  });

  it('opens a copy’s refresh at the same age: dated as its receiver dated it', () => {
    expect([openToFleet(copy(3600), at(3_225_000 - 1)), openToFleet(copy(3600), at(3_225_000))]).toEqual([false, true]);
  });
});

describe('served', () => {
  it('answers with a token until 5 s before it expires, by the clock that dated it', () => {
    expect([served(own(3600), at(3_595_000 - 1)), served(own(3600), at(3_595_000))]).toEqual([true, false]);
  });

  it("answers with a copy until 5 s earlier still: its receiver's clock may be the clocks' tolerance ahead", () => {
    const lastMs = 3_600_000 - 5000 - CLOCK_TOLERANCE_MS;

    expect([served(copy(3600), at(lastMs - 1)), served(copy(3600), at(lastMs))]).toEqual([true, false]);
  });

  it('never answers with a token without a usable expires_in', () => {
    expect(served(own(undefined), at(0))).toBe(false);
  });
});

describe('expiresAt and provesUntil', () => {
  it('dates expiry expires_in after receipt, a copy’s as its receiver dated it', () => {
    expect([expiresAt(own(3600)), expiresAt(copy('120'))]).toEqual([at(3_600_000), at(120_000)]);
  });

  it('proves its key for one lifetime past its expiry', () => {
    expect([provesUntil(own(3600)), provesUntil(copy(120))]).toEqual([at(7_200_000), at(240_000)]);
  });
});

describe('answerFrom', () => {
  it('lowers expires_in by the whole seconds since receipt, rounded up', () => {
    expect([answerFrom(own(3600), at(0)).expires_in, answerFrom(own(3600), at(100_000)).expires_in]).toEqual([3600, 3500]);
    expect(answerFrom(own(3600), at(100_001)).expires_in).toBe(3499);
  });

  it("lowers a copy's by 5 s more: its receiver's clock may be that far ahead, and no answer overstates a token's life", () => {
    expect([answerFrom(copy(3600), at(0)).expires_in, answerFrom(copy(3600), at(100_001)).expires_in]).toEqual([3595, 3494]);
  });

  it('never raises expires_in for a token dated ahead of this clock', () => {
    expect(answerFrom(own(3600), at(-2000)).expires_in).toBe(3600);
    expect(answerFrom(copy(3600), at(-2000)).expires_in).toBe(3597);
    expect(answerFrom(copy(3600), at(-6000)).expires_in).toBe(3600);
  });

  it('keeps a string expires_in a string', () => {
    expect(answerFrom(own('600'), at(60_000)).expires_in).toBe('540');
  });

  it("lowers Entra ID's ext_expires_in by the same seconds, in the type the IdP used", () => {
    expect(answerFrom(own(3600, { ext_expires_in: 7200 }), at(60_000))).toMatchObject({ expires_in: 3540, ext_expires_in: 7140 });
    expect(answerFrom(copy(3600, { ext_expires_in: '7200' }), at(60_000))).toMatchObject({ expires_in: 3535, ext_expires_in: '7135' });
  });

  it('never lowers below zero', () => {
    expect(answerFrom(own(3600, { ext_expires_in: 10 }), at(60_000)).ext_expires_in).toBe(0);
    expect(answerFrom(own(3600, { ext_expires_in: '10' }), at(60_000)).ext_expires_in).toBe('0');
    expect(answerFrom(own(30), at(60_000)).expires_in).toBe(0);
  });

  it.each<[string, unknown]>([
    ['a word', 'later'],
    ['digits after a word', 'in 7200'],
    ['digits before a word', '7200 s'],
    ['digits after a space', ' 7200'],
    ['digits before a space', '7200 '],
    ['an array', ['7200']],
    ['null', null],
    ['minus infinity', Number.NEGATIVE_INFINITY],
  ])('leaves an ext_expires_in that is not a number of seconds as it is: %s', (_case, value) => {
    expect(answerFrom(own(3600, { ext_expires_in: value }), at(60_000)).ext_expires_in).toEqual(value);
  });

  it('adds no ext_expires_in where the IdP sent none, changes nothing else, and leaves the kept token as it was', () => {
    const kept = own(3600, { scope: 'read', token_type: 'Bearer' });

    const answered = answerFrom(kept, at(1000));

    expect(answered).toStrictEqual({ access_token: 'at', expires_in: 3599, scope: 'read', token_type: 'Bearer' });
    expect(kept.token).toStrictEqual({ access_token: 'at', expires_in: 3600, scope: 'read', token_type: 'Bearer' });
  });
});

describe('newest', () => {
  const older = own(3600);
  const younger = { ...own(3600), receivedAt: at(1) };

  it('picks the entry received last, as dated, whichever comes first', () => {
    expect([newest(older, younger), newest(younger, older)]).toEqual([younger, younger]);
  });

  it('picks the one there is, or none', () => {
    expect([newest(undefined, older), newest(older, undefined), newest(undefined, undefined)]).toEqual([older, older, undefined]);
  });

  it('keeps the first of two received at the same moment', () => {
    const same = copy(3600);

    expect([newest(older, same), newest(same, older)]).toEqual([older, same]);
  });
});

describe('tokenBytes', () => {
  it("counts the answer's JSON in UTF-8 bytes, as an item holds it", () => {
    expect(tokenBytes({ access_token: 'é' })).toBe(21);
  });
});
