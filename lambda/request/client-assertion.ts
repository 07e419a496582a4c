import { createHmac, randomUUID } from 'node:crypto';

/** RFC 7523 2.2: the `client_assertion_type` of a JWT client assertion. */
export const JWT_BEARER_ASSERTION_TYPE = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';

/** Largest caller-signed assertion accepted; a JWT with a certificate chain in its header fits. */
const MAX_CLIENT_ASSERTION_CHARS = 8 * 1024;

/** Lifetime of the assertions the service signs: RFC 7523 3 wants it short; the API promises at most 60 s. */
const CLIENT_ASSERTION_LIFETIME_S = 60;

const HS256_HEADER = base64url({ alg: 'HS256', typ: 'JWT' });
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

/**
 * A `client_secret_jwt` assertion (RFC 7523 2.2, OIDC Core 9): a JWT MACed with HS256 under the
 * client secret, `iss` = `sub` = the client id, `aud` = the token URL, a random `jti`, `exp` 60 s
 * after `iat`. A fresh one per request, so the IdP's replay check never sees a `jti` twice.
 */
export function signClientSecretJwt(clientId: string, clientSecret: string, tokenUrl: string, now: number): string {
  const signingInput = `${HS256_HEADER}.${base64url(clientAssertionClaims(clientId, tokenUrl, now))}`;
  // OIDC Core 10.1: the MAC key is the octets of the UTF-8 representation of the client secret.
  const signature = createHmac('sha256', Buffer.from(clientSecret, 'utf8')).update(signingInput).digest('base64url');
  return `${signingInput}.${signature}`;
}

/**
 * The claims of an assertion the service signs (RFC 7523 3): `iss` = `sub` = the client id, `aud` =
 * the token URL, a random `jti`, `exp` 60 s after `iat` (`now`, epoch ms).
 */
export function clientAssertionClaims(clientId: string, tokenUrl: string, now: number): Record<string, string | number> {
  const iat = Math.floor(now / 1000);
  return { iss: clientId, sub: clientId, aud: tokenUrl, jti: randomUUID(), iat, exp: iat + CLIENT_ASSERTION_LIFETIME_S };
}

/**
 * What is wrong with the shape of a caller's `client_assertion`, or `undefined` when it is a
 * compact JWS (RFC 7515 7.1) whose header is a JSON object naming a signing `alg` and whose payload
 * is a JSON object (RFC 7519 7.2). The signature is the IdP's to verify; the service holds no key.
 */
export function clientAssertionProblem(assertion: string): string | undefined {
  if (assertion.length > MAX_CLIENT_ASSERTION_CHARS) return `must be at most ${MAX_CLIENT_ASSERTION_CHARS} characters`;
  if (!COMPACT_JWS.test(assertion)) return 'must be a compact JWS: three non-empty base64url segments separated by dots';
  const [header, payload] = assertion.split('.') as [string, string, string];
  const alg = decodeSegment(header)?.alg;
  // RFC 7523 3: the JWT MUST be signed or MACed, so an unsecured (`none`) one can never pass.
  if (typeof alg !== 'string' || alg === '' || alg.toLowerCase() === 'none') {
    return 'must have a JOSE header that is a JSON object with a signing alg';
  }
  if (decodeSegment(payload) === undefined) return 'must have a payload that is a JSON object (the JWT claims)';
  return undefined;
}

function decodeSegment(segment: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'));
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** A JOSE segment: the value's JSON, base64url-encoded (RFC 7515 2). */
export function base64url(value: object): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
}
