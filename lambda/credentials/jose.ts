import { createHash, createPublicKey } from 'node:crypto';
import { sourceError } from './aws-sources';

/** The JWS algorithms the broker signs with, and what each needs of a key. */
export type SigningAlg = 'RS256' | 'ES256';

/** A public key as a JWK (RFC 7517), as the JWKS route publishes it. */
export type PublicJwk = { readonly kid: string; readonly use: 'sig'; readonly alg: SigningAlg } & (
  | { readonly kty: 'RSA'; readonly n: string; readonly e: string }
  | { readonly kty: 'EC'; readonly crv: 'P-256'; readonly x: string; readonly y: string }
);

/**
 * The public JWK of a DER SubjectPublicKeyInfo (what KMS's GetPublicKey returns), with `kid` its
 * RFC 7638 thumbprint: the SHA-256 of the required members in lexicographic order, so an IdP that
 * computes it itself gets the same value.
 */
export function publicJwk(spki: Uint8Array, alg: SigningAlg): PublicJwk {
  const jwk = createPublicKey({ key: Buffer.from(spki), format: 'der', type: 'spki' }).export({ format: 'jwk' });
  const required = alg === 'RS256' ? { e: jwk.e, kty: 'RSA', n: jwk.n } : { crv: jwk.crv, kty: 'EC', x: jwk.x, y: jwk.y };
  if (required.kty !== jwk.kty || (alg === 'ES256' && jwk.crv !== 'P-256')) throw sourceError('KeyNotForAlgorithm');
  const kid = createHash('sha256').update(JSON.stringify(required)).digest('base64url');
  return { ...required, kid, use: 'sig', alg } as PublicJwk;
}

/**
 * RFC 7518 3.4: an ES256 signature is R and S as two 32-octet big-endian integers. KMS returns the
 * DER `SEQUENCE { INTEGER r, INTEGER s }` of X9.62 instead; anything else in its place is refused.
 */
export function derToJose(der: Uint8Array, octets = 32): Buffer {
  if (der[0] !== 0x30 || der[1] !== der.length - 2) throw sourceError('SignatureUnusable');
  const r = readInteger(der, 2, octets);
  const s = readInteger(der, r.next, octets);
  if (s.next !== der.length) throw sourceError('SignatureUnusable');
  return Buffer.concat([r.value, s.value]);
}

function readInteger(der: Uint8Array, at: number, octets: number): { value: Buffer; next: number } {
  const length = der[at + 1] ?? 0;
  const next = at + 2 + length;
  if (der[at] !== 0x02 || length === 0 || next > der.length) throw sourceError('SignatureUnusable');
  // DER adds a zero octet before a high bit: drop it (and any other leading zero), then pad to size.
  let value = der.subarray(at + 2, next);
  while (value[0] === 0) value = value.subarray(1);
  if (value.length > octets) throw sourceError('SignatureUnusable');
  return { value: Buffer.concat([Buffer.alloc(octets - value.length), value]), next };
}
