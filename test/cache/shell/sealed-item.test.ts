import { createCipheriv, createHash, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { epochMs } from '../../../lambda/clock';
import { EMPTY_MEMO, type ItemState } from '../../../lambda/cache/core/item';
import { holdItemKeys, type ItemKeys, open, openState, requestItemKeys, seal, sealState } from '../../../lambda/cache/shell/sealed-item';

// The sealed format of a table item: its keys, its seal, its TTL. A stored format: items outlive a deployment.

const TEXT = JSON.stringify([
  ['accessTokenUrl', 'https://idp.example.com/token'],
  ['clientId', 'service-a'],
  ['scope', 'read'],
]);
const SECRET = 'sealed-item-test-secret';
const PEPPER = Buffer.from('sealed-item-test-pepper-of-at-least-32-characters');
const VALUE = {
  kind: 'key',
  memo: {
    kept: { token: { access_token: 'eyJhbGciOi.sealed.token', token_type: 'Bearer', expires_in: 3600 }, receivedAt: 1_800_000_000_000 },
  },
};
const EXPIRES = 1_800_003_600;
const DOMAIN = 'token-exchange/shared-token-cache/v2';
const VERSION = 7;
const HOLD_KEY = '["service-a","https://idp.example.com/token"]';

/** A value in the sealed format (version, IV, ciphertext, tag; AAD = label, item key, expiry) around any plaintext, as other code would seal it. */
function sealRaw(keys: ItemKeys, plaintext: string, { version = VERSION, expires = EXPIRES } = {}): Buffer {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', keys.sealKey, iv);
  cipher.setAAD(Buffer.from(`${DOMAIN}\0${keys.itemKey}\0${expires}`));
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([Buffer.of(version), iv, ciphertext, cipher.getAuthTag()]);
}

describe('requestItemKeys', () => {
  it('derives a 32-byte item key and a 32-byte seal key, the same for the same pepper, secret and request', () => {
    const keys = requestItemKeys(PEPPER, SECRET, TEXT);

    expect(Buffer.from(keys.itemKey, 'base64url')).toHaveLength(32);
    expect(keys.sealKey).toHaveLength(32);
    expect(requestItemKeys(PEPPER, SECRET, TEXT)).toEqual(keys);
  });

  it('is HKDF-SHA-256 with the secret as keying material and an HMAC of the request under the pepper as salt', () => {
    const salt = createHmac('sha256', PEPPER).update(`${DOMAIN}/request\0${TEXT}`).digest();
    const okm = Buffer.from(hkdfSync('sha256', SECRET, salt, `${DOMAIN}/request-keys`, 64));

    expect(requestItemKeys(PEPPER, SECRET, TEXT)).toEqual({
      sealKey: okm.subarray(0, 32),
      itemKey: okm.subarray(32).toString('base64url'),
    });
  });

  it('derives the same keys in every version: items outlive a deployment, so the derivation is a stored format', () => {
    const keys = requestItemKeys(PEPPER, SECRET, TEXT);

    expect(keys.itemKey).toBe('DWfne0U2egnws3CNgBgMAo8TKBtULQdg84J-XgMDIDI');
    expect(keys.sealKey.toString('hex')).toBe('d4231faf5e5f3e9b2402f7fb1487efc469e035bad3b6dcda92adf87ccc255fe9');
  });

  it.each([
    ['another secret', () => requestItemKeys(PEPPER, `${SECRET}x`, TEXT)],
    ['another request', () => requestItemKeys(PEPPER, SECRET, TEXT.replace('read', 'write'))],
    [
      'another pepper: a table copied elsewhere, or read without it, gives nothing',
      () => requestItemKeys(Buffer.from('another pepper'), SECRET, TEXT),
    ],
    ['no secret (a stored credential)', () => requestItemKeys(PEPPER, null, TEXT)],
    ['an empty secret', () => requestItemKeys(PEPPER, '', TEXT)],
  ])('gives %s another item and another key', (_case, other) => {
    const keys = requestItemKeys(PEPPER, SECRET, TEXT);

    expect(other().itemKey).not.toBe(keys.itemKey);
    expect(other().sealKey.equals(keys.sealKey)).toBe(false);
  });

  it("derives a stored credential's keys from the pepper alone, as the keying material, the same in every version", () => {
    const salt = createHmac('sha256', PEPPER).update(`${DOMAIN}/request\0${TEXT}`).digest();
    const okm = Buffer.from(hkdfSync('sha256', PEPPER, salt, `${DOMAIN}/request-keys`, 64));

    const keys = requestItemKeys(PEPPER, null, TEXT);

    expect(keys).toEqual({ sealKey: okm.subarray(0, 32), itemKey: okm.subarray(32).toString('base64url') });
    expect(keys.itemKey).toBe('3orWg3blcx0UmyiIEaaF4r5BT1pXjc-4RtEeJpwxm1o');
    expect(requestItemKeys(PEPPER, '', TEXT).itemKey).not.toBe(keys.itemKey);
  });
});

describe('holdItemKeys', () => {
  it('derives from the pepper and the hold key alone, apart from every request item', () => {
    const keys = holdItemKeys(PEPPER, HOLD_KEY);

    expect(holdItemKeys(PEPPER, HOLD_KEY)).toEqual(keys);
    expect(holdItemKeys(Buffer.from('another pepper'), HOLD_KEY).itemKey).not.toBe(keys.itemKey);
    expect(holdItemKeys(PEPPER, '["service-b","https://idp.example.com/token"]').itemKey).not.toBe(keys.itemKey);
    expect(keys.itemKey).not.toBe(requestItemKeys(PEPPER, null, HOLD_KEY).itemKey);
  });

  it('is HKDF-SHA-256 with the pepper as keying material and a hash of the hold key as salt, the same in every version', () => {
    const salt = createHash('sha256').update(`${DOMAIN}/hold\0${HOLD_KEY}`).digest();
    const okm = Buffer.from(hkdfSync('sha256', PEPPER, salt, `${DOMAIN}/hold-keys`, 64));

    const keys = holdItemKeys(PEPPER, HOLD_KEY);

    expect(keys).toEqual({ sealKey: okm.subarray(0, 32), itemKey: okm.subarray(32).toString('base64url') });
    expect(keys.itemKey).toBe('772URD52og44Zq1AdnHIMYfYZobHMa607cWGj-8EnWQ');
  });
});

describe('seal and open', () => {
  const keys = requestItemKeys(PEPPER, SECRET, TEXT);

  it('opens what it sealed, with the same keys', () => {
    expect(open(keys, EXPIRES, seal(keys, EXPIRES, VALUE))).toEqual(VALUE);
  });

  it('seals with a fresh IV each time', () => {
    expect(seal(keys, EXPIRES, VALUE).equals(seal(keys, EXPIRES, VALUE))).toBe(false);
  });

  it('holds nothing of the value in the clear', () => {
    const sealed = seal(keys, EXPIRES, VALUE).toString('latin1');

    for (const part of ['sealed.token', 'Bearer', 'access_token', 'memo', 'receivedAt']) expect(sealed).not.toContain(part);
  });

  it('pads to 256-byte blocks, with spaces: a JSON of 3 or 256 bytes to one block, 257 to two', () => {
    const sealedLength = (length: number) => seal(keys, EXPIRES, 'a'.repeat(length - 2)).length - 1 - 12 - 16;

    expect([sealedLength(3), sealedLength(256), sealedLength(257)]).toEqual([256, 256, 512]);
    expect(open(keys, EXPIRES, sealRaw(keys, `"a"${' '.repeat(253)}`))).toBe('a');
  });

  it(`opens a value sealed in the format by other code (version ${VERSION}, IV, ciphertext, tag; AAD: label, item key, expiry)`, () => {
    expect(open(keys, EXPIRES, sealRaw(keys, `${JSON.stringify(VALUE)}   `))).toEqual(VALUE);
  });

  it(`writes format version ${VERSION} in its first byte`, () => {
    expect(seal(keys, EXPIRES, VALUE)[0]).toBe(VERSION);
  });

  it.each<[string, () => unknown]>([
    ['under another secret', () => open(requestItemKeys(PEPPER, 'another-secret', TEXT), EXPIRES, seal(keys, EXPIRES, VALUE))],
    ['under another pepper', () => open(requestItemKeys(Buffer.from('x'), SECRET, TEXT), EXPIRES, seal(keys, EXPIRES, VALUE))],
    ['with another clear expiry (the TTL attribute is authenticated)', () => open(keys, EXPIRES + 1, seal(keys, EXPIRES, VALUE))],
    ['under another item key with the same seal key', () => open({ ...keys, itemKey: 'other' }, EXPIRES, seal(keys, EXPIRES, VALUE))],
    [
      'of the format whose tokens said whether a no-cache request got them (version 6)',
      () => open(keys, EXPIRES, sealRaw(keys, JSON.stringify(VALUE), { version: VERSION - 1 })),
    ],
    ['of a later format (version 8)', () => open(keys, EXPIRES, sealRaw(keys, JSON.stringify(VALUE), { version: VERSION + 1 }))],
    ['from a sealed value that is not JSON', () => open(keys, EXPIRES, sealRaw(keys, 'not json'))],
    ['from a sealed empty value', () => open(keys, EXPIRES, sealRaw(keys, ''))],
    ['from nothing', () => open(keys, EXPIRES, new Uint8Array())],
    ['from a version byte alone', () => open(keys, EXPIRES, Uint8Array.of(VERSION))],
  ])('opens nothing %s', (_case, attempt) => {
    expect(attempt()).toBeUndefined();
  });

  it('opens nothing from any change of a single byte, or any truncation', () => {
    const sealed = seal(keys, EXPIRES, VALUE);
    fc.assert(
      fc.property(
        fc.nat({ max: sealed.length - 1 }),
        fc.integer({ min: 1, max: 255 }),
        fc.nat({ max: sealed.length - 1 }),
        (at, flip, cut) => {
          const changed = Buffer.from(sealed);
          changed[at] = (changed[at] as number) ^ flip;
          return open(keys, EXPIRES, changed) === undefined && open(keys, EXPIRES, sealed.subarray(0, cut)) === undefined;
        },
      ),
      { numRuns: 300 },
    );
  });

  it('round-trips any JSON value', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1 }), fc.dictionary(fc.string(), fc.jsonValue()), (accessToken, extra) => {
        const state = { kind: 'key', memo: { kept: { token: { ...extra, access_token: accessToken }, receivedAt: 1 } } };
        return JSON.stringify(open(keys, EXPIRES, seal(keys, EXPIRES, state))) === JSON.stringify(state);
      }),
      { numRuns: 200 },
    );
  });
});

describe('sealState and openState', () => {
  const keys = requestItemKeys(PEPPER, SECRET, TEXT);
  const T0 = 1_800_000_000_000;
  const FLOOR = 86_400_000;
  const kept = { token: { access_token: 'at', expires_in: 3600 }, receivedAt: epochMs(T0), by: 'i', after: epochMs(0) };

  it.each<[string, ItemState, number]>([
    [
      'a kept token, a lifetime past its expiry and 5 s more',
      { kind: 'key', memo: { ...EMPTY_MEMO, kept }, activity: { kind: 'idle' }, ended: [] },
      1_800_007_205,
    ],
    [
      'a token received within a second, in whole seconds rounded up',
      { kind: 'key', memo: { ...EMPTY_MEMO, kept: { ...kept, receivedAt: epochMs(T0 + 1) } }, activity: { kind: 'idle' }, ended: [] },
      1_800_007_206,
    ],
    [
      'a rejection, the floor after it',
      { kind: 'key', memo: { ...EMPTY_MEMO, rejectedAt: epochMs(T0) }, activity: { kind: 'idle' }, ended: [] },
      1_800_086_405,
    ],
    ['a hold, at its end', { kind: 'hold', hold: { code: 'upstream_throttled', until: epochMs(T0 + 30_000) } }, 1_800_000_035],
  ])('seals %s, with that TTL bound into the seal', (_case, state, expiresSeconds) => {
    const sealed = sealState(keys, state, FLOOR);

    expect(sealed.expiresSeconds).toBe(expiresSeconds);
    expect(openState(keys, sealed.expiresSeconds, sealed.sealed)).toEqual(JSON.parse(JSON.stringify(state)));
    expect(openState(keys, sealed.expiresSeconds + 1, sealed.sealed)).toBeUndefined();
  });

  it('opens nothing from an item without a state or without a TTL', () => {
    const sealed = sealState(keys, { kind: 'hold', hold: { code: 'upstream_throttled', until: epochMs(T0) } }, FLOOR);

    expect(openState(keys, undefined, sealed.sealed)).toBeUndefined();
    expect(openState(keys, sealed.expiresSeconds, undefined)).toBeUndefined();
  });
});
