import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';
import type { IdpToken } from './exchange';
import type { Lifetime } from './token-cache';

// Every derivation and every seal is bound to this label, so nothing made here can be confused with
// a value of another purpose or of a later format.
const DOMAIN = 'token-exchange/shared-token-cache/v1';
const FORMAT_VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;
// The plaintext is padded to a multiple of this, so a sealed item's length says little about the token's.
const PAD_BYTES = 256;

/** The two values derived for one request: where its token lives in the table, and the key that seals it. */
export interface EntryKeys {
  /** The item's partition key (base64url, 32 bytes). */
  readonly itemKey: string;
  /** The AES-256-GCM key of the item's sealed token. */
  readonly sealKey: Buffer;
}

/** A token as the shared tier keeps it: the IdP's object and its lifetime. */
export interface SealedEntry extends Lifetime {
  readonly token: IdpToken;
}

/**
 * Derive the item key and the seal key of a request (HKDF-SHA-256, RFC 5869): the client secret is
 * the input keying material, a domain-separated SHA-256 of the token-shaping fields the salt. Neither
 * output reveals the secret or the fields, and without the secret neither can be computed, so a
 * reader of the table cannot even tell which client an item belongs to.
 */
export function entryKeys(clientSecret: string, fields: string): EntryKeys {
  const salt = createHash('sha256').update(`${DOMAIN}/fields\0`).update(fields).digest();
  const okm = Buffer.from(hkdfSync('sha256', clientSecret, salt, `${DOMAIN}/keys`, 64));
  return { sealKey: okm.subarray(0, 32), itemKey: okm.subarray(32).toString('base64url') };
}

/** The DynamoDB TTL value (epoch seconds) of an entry: kept in the clear, and bound into its seal. */
export function expirySeconds(expiresAt: number): number {
  return Math.ceil(expiresAt / 1000);
}

/**
 * Seal an entry with AES-256-GCM under its seal key: version byte, random 96-bit IV, ciphertext,
 * 128-bit tag. The item key and the clear expiry are authenticated too, so an item moved to another
 * key or given another TTL does not open.
 */
export function sealEntry(keys: EntryKeys, entry: SealedEntry): Buffer {
  const iv = randomBytes(IV_BYTES);
  // GCM's tag is TAG_BYTES long unless asked otherwise.
  const cipher = createCipheriv('aes-256-gcm', keys.sealKey, iv);
  cipher.setAAD(associatedData(keys.itemKey, expirySeconds(entry.expiresAt)));
  const json = Buffer.from(JSON.stringify({ token: entry.token, expiresAt: entry.expiresAt, staleAt: entry.staleAt }));
  // JSON ignores trailing spaces, so padding needs no length field.
  const plaintext = Buffer.alloc(Math.ceil(json.length / PAD_BYTES) * PAD_BYTES, ' ');
  json.copy(plaintext);
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([Buffer.of(FORMAT_VERSION), iv, ciphertext, cipher.getAuthTag()]);
}

/**
 * Open a sealed entry, or `undefined` for anything that is not one this key sealed for this item and
 * expiry: a wrong secret, a tampered, truncated or foreign value. Never throws.
 */
export function openEntry(keys: EntryKeys, sealed: Uint8Array, expiresAtSeconds: number): SealedEntry | undefined {
  // No length check: a value too short to hold an IV and a tag fails GCM's check below like any
  // other forgery (the decipher takes a tag of TAG_BYTES only, so it is never a truncated one).
  if (sealed[0] !== FORMAT_VERSION) return undefined;
  const iv = sealed.subarray(1, 1 + IV_BYTES);
  const ciphertext = sealed.subarray(1 + IV_BYTES, sealed.length - TAG_BYTES);
  try {
    const decipher = createDecipheriv('aes-256-gcm', keys.sealKey, iv, { authTagLength: TAG_BYTES });
    decipher.setAAD(associatedData(keys.itemKey, expiresAtSeconds));
    decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
    const plaintext = Buffer.concat([decipher.update(ciphertext), decipher.final()]).toString('utf8');
    // What opens was sealed by sealEntry under this key, so it is an entry as sealEntry wrote it; a
    // later format gets another FORMAT_VERSION.
    return JSON.parse(plaintext) as SealedEntry;
  } catch {
    return undefined;
  }
}

function associatedData(itemKey: string, expiresAtSeconds: number): Buffer {
  return Buffer.from(`${DOMAIN}\0${itemKey}\0${expiresAtSeconds}`);
}
