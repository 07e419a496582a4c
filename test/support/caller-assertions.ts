import {
  createHmac,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type JsonWebKey,
  type KeyObject,
  randomUUID,
  sign,
  verify,
} from 'node:crypto';
import type { ClientMetadata, JWK } from 'oidc-provider';

/** An EC P-256 key pair of a `private_key_jwt` caller: the IdP gets the public JWK, the caller signs. */
export interface CallerKey {
  readonly privateKey: KeyObject;
  readonly publicJwk: JWK;
}

export function generateCallerKey(kid: string = randomUUID()): CallerKey {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return { privateKey, publicJwk: { ...publicKey.export({ format: 'jwk' }), kid, alg: 'ES256', use: 'sig' } as JWK };
}

/** The key as a private JWK in JSON: how global setup hands it to the test workers. */
export function exportCallerKey(key: CallerKey): string {
  return JSON.stringify({ ...key.privateKey.export({ format: 'jwk' }), kid: key.publicJwk.kid });
}

export function importCallerKey(json: string): CallerKey {
  const { kid, ...jwk } = JSON.parse(json) as JsonWebKey & { kid: string };
  const privateKey = createPrivateKey({ key: jwk, format: 'jwk' });
  const publicJwk = { ...createPublicKey(privateKey).export({ format: 'jwk' }), kid, alg: 'ES256', use: 'sig' } as JWK;
  return { privateKey, publicJwk };
}

/** A `private_key_jwt` client as the IdP registers it: only the caller's public key. */
export function privateKeyJwtClient(clientId: string, publicJwk: JWK): ClientMetadata {
  return {
    client_id: clientId,
    token_endpoint_auth_method: 'private_key_jwt',
    token_endpoint_auth_signing_alg: 'ES256',
    jwks: { keys: [publicJwk] },
    grant_types: ['client_credentials'],
    response_types: [],
    redirect_uris: [],
    scope: 'read write',
  };
}

const segment = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');

/** RFC 7523 claims as a caller makes them: iss = sub = client id, aud = the token URL, fresh jti, 60 s. */
export function assertionClaims(clientId: string, audience: string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  const now = Math.floor(Date.now() / 1000);
  return { iss: clientId, sub: clientId, aud: audience, jti: randomUUID(), iat: now, exp: now + 60, ...overrides };
}

/** Sign claims as a `private_key_jwt` caller does: an ES256 compact JWS (RFC 7515, RFC 7518 3.4). */
export function signEs256(key: CallerKey, claims: Record<string, unknown>): string {
  const input = `${segment({ alg: 'ES256', typ: 'JWT', kid: key.publicJwk.kid })}.${segment(claims)}`;
  const signature = sign('sha256', Buffer.from(input), { key: key.privateKey, dsaEncoding: 'ieee-p1363' });
  return `${input}.${signature.toString('base64url')}`;
}

/** A compact JWS of any header and payload, with a made-up signature: for shape checks only. */
export function unsignedShape(header: unknown, payload: unknown): string {
  return `${segment(header)}.${segment(payload)}.${Buffer.from('not-a-signature').toString('base64url')}`;
}

/** The header and claims of a compact JWS, read without verifying. */
export function decodeJws(jws: string): { header: Record<string, unknown>; claims: Record<string, unknown> } {
  const [header = '', claims = ''] = jws.split('.');
  const read = (part: string) => JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as Record<string, unknown>;
  return { header: read(header), claims: read(claims) };
}

/** Whether an HS256 JWS verifies under a secret, as an IdP checks a client_secret_jwt assertion. */
export function verifiesHs256(jws: string, secret: string): boolean {
  const [header, claims, signature] = jws.split('.');
  const expected = createHmac('sha256', secret).update(`${header}.${claims}`).digest('base64url');
  return signature === expected;
}

/** Whether an RS256 JWS verifies under one of a JWK Set's keys (the IdP's published `jwks`). */
export function verifiesRs256(jws: string, jwks: { keys: JWK[] }): boolean {
  const [header = '', claims = '', signature = ''] = jws.split('.');
  const { kid } = decodeJws(jws).header;
  return jwks.keys
    .filter((jwk) => jwk.kid === kid)
    .some((jwk) =>
      verify('sha256', Buffer.from(`${header}.${claims}`), { key: jwk as JsonWebKey, format: 'jwk' }, Buffer.from(signature, 'base64url')),
    );
}
