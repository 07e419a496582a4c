import { createCipheriv, createDecipheriv, createHash, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import { type ItemState, usefulUntil } from '../core/item';

// Every derivation and every seal is bound to this label, so nothing made here can be confused with
// a value of another purpose. The version byte keeps items of another format shut: they never open.
const DOMAIN = 'token-exchange/shared-token-cache/v2';
// 4: claims carry echoes, outcomes name the kept token, the memo how long its tokens live.
const FORMAT_VERSION = 7;
const IV_BYTES = 12;
const TAG_BYTES = 16;
// The plaintext is padded to a multiple of this, so an item's length says little about what it holds.
const PAD_BYTES = 256;

/** Where an item lives in the table, and the key that seals it. */
export interface ItemKeys {
  /** The partition key (base64url, 32 bytes). */
  readonly itemKey: string;
  /** The AES-256-GCM key of the item's sealed state. */
  readonly sealKey: Buffer;
}

/**
 * The keys of a request's item (HKDF-SHA-256, RFC 5869): the client secret is the input keying
 * material, and the salt an HMAC of the request text under the pepper, a server-side secret that is
 * never in the table. Without the pepper a copy of the table cannot test a single guess of a secret;
 * without the secret neither output can be computed either. A stored credential's request has no
 * secret of the caller's (`null`): its keys come from the pepper alone.
 */
export function requestItemKeys(pepper: Buffer, clientSecret: string | null, requestText: string): ItemKeys {
  const salt = createHmac('sha256', pepper).update(`${DOMAIN}/request\0`).update(requestText).digest();
  // A stored credential's text names the credential, which no caller's text does: its keys never meet a caller's.
  return split(hkdfSync('sha256', clientSecret ?? pepper, salt, `${DOMAIN}/request-keys`, 64));
}

/**
 * The keys of the hold item of one client id at one token URL: derived from the pepper alone, so
 * every request of that client finds the hold whatever its secret, and nobody without the pepper can
 * write one that opens.
 */
export function holdItemKeys(pepper: Buffer, holdKey: string): ItemKeys {
  const salt = createHash('sha256').update(`${DOMAIN}/hold\0`).update(holdKey).digest();
  return split(hkdfSync('sha256', pepper, salt, `${DOMAIN}/hold-keys`, 64));
}

function split(okm: ArrayBuffer): ItemKeys {
  const bytes = Buffer.from(okm);
  return { sealKey: bytes.subarray(0, 32), itemKey: bytes.subarray(32).toString('base64url') };
}

/**
 * Seal a JSON value under the item's key with AES-256-GCM: version byte, random 96-bit IV, ciphertext,
 * 128-bit tag. The item key and the clear expiry are authenticated too, so a value moved to another
 * item or given another TTL does not open.
 */
export function seal(keys: ItemKeys, expiresSeconds: number, value: unknown): Buffer {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', keys.sealKey, iv);
  cipher.setAAD(associatedData(keys.itemKey, expiresSeconds));
  const json = Buffer.from(JSON.stringify(value));
  // JSON ignores trailing spaces, so padding needs no length field.
  const plaintext = Buffer.alloc(Math.ceil(json.length / PAD_BYTES) * PAD_BYTES, ' ');
  json.copy(plaintext);
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([Buffer.of(FORMAT_VERSION), iv, ciphertext, cipher.getAuthTag()]);
}

/**
 * The value sealed under this key for this item and expiry, or `undefined` for anything else: another
 * key, a tampered, truncated or foreign value, another format. Never throws.
 */
export function open(keys: ItemKeys, expiresSeconds: number, sealed: Uint8Array): unknown {
  // No length check: a value too short to hold an IV and a tag fails GCM's check like any forgery.
  if (sealed[0] !== FORMAT_VERSION) return undefined;
  try {
    const decipher = createDecipheriv('aes-256-gcm', keys.sealKey, sealed.subarray(1, 1 + IV_BYTES), { authTagLength: TAG_BYTES });
    decipher.setAAD(associatedData(keys.itemKey, expiresSeconds));
    decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
    const plaintext = Buffer.concat([decipher.update(sealed.subarray(1 + IV_BYTES, sealed.length - TAG_BYTES)), decipher.final()]);
    return JSON.parse(plaintext.toString('utf8'));
  } catch {
    return undefined;
  }
}

function associatedData(itemKey: string, expiresSeconds: number): Buffer {
  return Buffer.from(`${DOMAIN}\0${itemKey}\0${expiresSeconds}`);
}

/** An item as written: its sealed state and its DynamoDB TTL (epoch seconds, bound into the seal). */
export interface SealedState {
  readonly sealed: Buffer;
  readonly expiresSeconds: number;
}

/** Seal a state for its item, with the TTL at which nothing in it is of use any more, to any reader. */
export function sealState(keys: ItemKeys, state: ItemState, rejectionFloorMs: number): SealedState {
  const expiresSeconds = Math.ceil(usefulUntil(state, rejectionFloorMs) / 1000);
  return { sealed: seal(keys, expiresSeconds, state), expiresSeconds };
}

/**
 * The state sealed in an item, or undefined for anything that does not open with these keys: what
 * opens was sealed by this service under the same pepper and format, so its shape is the one written.
 */
export function openState(keys: ItemKeys, expiresSeconds: number | undefined, sealed: Uint8Array | undefined): ItemState | undefined {
  if (expiresSeconds === undefined || sealed === undefined) return undefined;
  return open(keys, expiresSeconds, sealed) as ItemState | undefined;
}
