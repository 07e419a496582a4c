import { ExchangeError, INTERNAL_ERROR_DESCRIPTION, UpstreamThrottled } from './errors';
import type { PayloadFormat } from './request/gateway-event';

// RFC 6749 5.1: token responses must not be cached. Errors carry the same headers so no
// intermediary stores any answer of this endpoint.
const HEADERS = {
  'content-type': 'application/json',
  'cache-control': 'no-store',
  pragma: 'no-cache',
} as const;

/**
 * What the function answers, in the one shape both payload formats read alike: the HTTP API's
 * structured result (never its "simple response" form) and a REST API proxy integration's result.
 * Each header has one value (2.0 has no `multiValueHeaders`), and the body is text, said explicitly.
 */
export interface Response {
  readonly statusCode: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
  readonly isBase64Encoded: false;
}

/** A JSON answer with the contract's headers. */
export function jsonResponse(statusCode: number, body: unknown, extraHeaders: Record<string, string> = {}): Response {
  return { statusCode, headers: { ...HEADERS, ...extraHeaders }, body: JSON.stringify(body), isBase64Encoded: false };
}

/**
 * The one place an error becomes a response: an {@link ExchangeError} shows its code and fixed
 * description (a 503 says when to retry, RFC 9110 10.2.3); anything else is a bug and becomes a bare
 * 500, its message never sent.
 */
export function errorResponse(error: unknown): Response {
  const known = error instanceof ExchangeError ? error : new ExchangeError('internal_error', INTERNAL_ERROR_DESCRIPTION);
  const retryAfter = known instanceof UpstreamThrottled ? { 'retry-after': String(known.retryAfterSeconds) } : undefined;
  return jsonResponse(known.statusCode, { code: known.code, description: known.description }, retryAfter);
}

/**
 * A public document that callers may cache for `maxAgeSeconds` (RFC 9111 5.2.2.1): the JWKS, which
 * IdPs fetch and keep. The only answer without `no-store`: it holds nothing secret.
 */
export function publicJsonResponse(body: unknown, maxAgeSeconds: number): Response {
  return {
    statusCode: 200,
    headers: { 'content-type': 'application/json', 'cache-control': `public, max-age=${maxAgeSeconds}` },
    body: JSON.stringify(body),
    isBase64Encoded: false,
  };
}

/**
 * API Gateway's own answer for a route it does not have, as the event's API gives it: the HTTP
 * API's `404 Not Found`, the REST API's `403 Missing Authentication Token`.
 */
export function noRouteResponse(format: PayloadFormat): Response {
  return format === '1.0' ? jsonResponse(403, { message: 'Missing Authentication Token' }) : jsonResponse(404, { message: 'Not Found' });
}
