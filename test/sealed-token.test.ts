import { createCipheriv, randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { entryKeys, expirySeconds, openEntry, type SealedEntry, sealEntry } from '../lambda/sealed-token';

const FIELDS = JSON.stringify([
  ['accessTokenUrl', 'https://idp.example.com/token'],
  ['clientId', 'service-a'],
  ['scope', 'read'],
]);
const SECRET = 'sealed-token-test-secret';
const ENTRY: SealedEntry = {
  token: { access_token: 'eyJhbGciOi.sealed.token', token_type: 'Bearer', expires_in: 3600 },
  expiresAt: 1_800_000_000_000,
  staleAt: 1_799_999_640_000,
};
const EXPIRES = expirySeconds(ENTRY.expiresAt);

/** A value in the sealed format (version, IV, ciphertext, tag; AAD = label, item key, expiry) around any plaintext. */
function sealRaw(keys: ReturnType<typeof entryKeys>, plaintext: string, expires = EXPIRES): Buffer {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', keys.sealKey, iv);
  cipher.setAAD(Buffer.from(`token-exchange/shared-token-cache/v1\0${keys.itemKey}\0${expires}`));
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([Buffer.of(1), iv, ciphertext, cipher.getAuthTag()]);
}

describe('entryKeys', () => {
  it('derives a 32-byte item key and a 32-byte seal key, the same for the same secret and fields', () => {
    const keys = entryKeys(SECRET, FIELDS);

    expect(Buffer.from(keys.itemKey, 'base64url')).toHaveLength(32);
    expect(keys.sealKey).toHaveLength(32);
    expect(entryKeys(SECRET, FIELDS)).toEqual(keys);
  });

  it('gives another secret another item and another key, so a wrong secret never even reads the right entry', () => {
    const right = entryKeys(SECRET, FIELDS);
    const wrong = entryKeys(`${SECRET}x`, FIELDS);

    expect(wrong.itemKey).not.toBe(right.itemKey);
    expect(wrong.sealKey.equals(right.sealKey)).toBe(false);
  });

  it('gives other fields another item and another key', () => {
    const other = entryKeys(SECRET, FIELDS.replace('read', 'write'));

    expect(other.itemKey).not.toBe(entryKeys(SECRET, FIELDS).itemKey);
  });

  it('derives the same keys in every version: items outlive a deployment, so the derivation is a stored format', () => {
    // Taken from the first release of the shared tier. A change here strands every item in the table.
    const keys = entryKeys(SECRET, FIELDS);

    expect(keys.itemKey).toBe('6vspBgkP1VljwEgCmMaR-mETuUX2KW5hP07OCROCnrk');
    expect(keys.sealKey.toString('hex')).toBe('2436c76beaf2634ee26a473c1d0497a3af7127491f66a7b8405f889d6b229da5');
  });

  it('derives keys for an empty secret too (a public client), from the fields alone', () => {
    expect(entryKeys('', FIELDS).sealKey).toHaveLength(32);
  });
});

describe('sealEntry and openEntry', () => {
  const keys = entryKeys(SECRET, FIELDS);

  it('opens what it sealed, with the same keys', () => {
    const sealed = sealEntry(keys, ENTRY);

    expect(openEntry(keys, sealed, EXPIRES)).toEqual(ENTRY);
  });

  it('seals with a fresh IV each time', () => {
    expect(sealEntry(keys, ENTRY).equals(sealEntry(keys, ENTRY))).toBe(false);
  });

  it('holds neither the token nor anything else of the entry in the clear', () => {
    const sealed = sealEntry(keys, ENTRY).toString('latin1');

    expect(sealed).not.toContain('sealed.token');
    expect(sealed).not.toContain('Bearer');
    expect(sealed).not.toContain('access_token');
  });

  it('pads to 256-byte blocks, so tokens of nearly the same length seal to the same length', () => {
    const short = sealEntry(keys, { ...ENTRY, token: { access_token: 'a' } });
    const longer = sealEntry(keys, { ...ENTRY, token: { access_token: 'a'.repeat(100) } });

    expect(short.length).toBe(longer.length);
    expect((short.length - 1 - 12 - 16) % 256).toBe(0);
  });

  it('pads a JSON of exactly 256 bytes to one block and one of 257 to two', () => {
    const sealedOfJsonLength = (length: number): number => {
      const bare = JSON.stringify({ token: { access_token: '' }, expiresAt: ENTRY.expiresAt, staleAt: ENTRY.staleAt }).length;
      return sealEntry(keys, { ...ENTRY, token: { access_token: 'a'.repeat(length - bare) } }).length - 1 - 12 - 16;
    };

    expect([sealedOfJsonLength(256), sealedOfJsonLength(257)]).toEqual([256, 512]);
  });

  it('opens a value sealed in the format by other code (version, IV, ciphertext, tag; AAD: label, item key, expiry)', () => {
    const plaintext = `${JSON.stringify(ENTRY)}   `;

    expect(openEntry(keys, sealRaw(keys, plaintext), EXPIRES)).toEqual(ENTRY);
  });

  it('does not open under another secret', () => {
    expect(openEntry(entryKeys('another-secret', FIELDS), sealEntry(keys, ENTRY), EXPIRES)).toBeUndefined();
  });

  it('does not open with another clear expiry (the TTL attribute is authenticated)', () => {
    expect(openEntry(keys, sealEntry(keys, ENTRY), EXPIRES + 1)).toBeUndefined();
  });

  it('does not open under another item key with the same seal key', () => {
    expect(openEntry({ ...keys, itemKey: entryKeys(SECRET, `${FIELDS} `).itemKey }, sealEntry(keys, ENTRY), EXPIRES)).toBeUndefined();
  });

  it('opens nothing from another format version', () => {
    const sealed = sealEntry(keys, ENTRY);
    sealed[0] = 2;

    expect(openEntry(keys, sealed, EXPIRES)).toBeUndefined();
  });

  it('opens nothing from any change of a single byte, or any truncation', () => {
    const sealed = sealEntry(keys, ENTRY);
    fc.assert(
      fc.property(
        fc.nat({ max: sealed.length - 1 }),
        fc.integer({ min: 1, max: 255 }),
        fc.nat({ max: sealed.length - 1 }),
        (at, flip, cut) => {
          const changed = Buffer.from(sealed);
          changed[at] = (changed[at] as number) ^ flip;
          return openEntry(keys, changed, EXPIRES) === undefined && openEntry(keys, sealed.subarray(0, cut), EXPIRES) === undefined;
        },
      ),
      { numRuns: 300 },
    );
  });

  it('round-trips any token object with a string access_token', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1 }), fc.dictionary(fc.string(), fc.jsonValue()), fc.string(), (accessToken, extra, secret) => {
        const entryKeysOf = entryKeys(secret, FIELDS);
        const token = { ...extra, access_token: accessToken };
        const opened = openEntry(entryKeysOf, sealEntry(entryKeysOf, { ...ENTRY, token }), EXPIRES);
        return JSON.stringify(opened?.token) === JSON.stringify(token);
      }),
      { numRuns: 200 },
    );
  });

  it.each([
    ['not JSON', 'not json'],
    ['nothing', ''],
  ])('opens nothing from a sealed value holding %s', (_case, plaintext) => {
    expect(openEntry(keys, sealRaw(keys, plaintext), EXPIRES)).toBeUndefined();
  });
});
