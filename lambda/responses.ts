import type { APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { ExchangeError, INTERNAL_ERROR_DESCRIPTION, UpstreamThrottled } from './errors';

// RFC 6749 5.1: token responses must not be cached. Errors carry the same headers so no
// intermediary stores any answer of this endpoint.
const HEADERS = {
  'content-type': 'application/json',
  'cache-control': 'no-store',
  pragma: 'no-cache',
} as const;

/** A structured result (never the "simple response" form) whose status is always set. */
export type Response = APIGatewayProxyStructuredResultV2 & { statusCode: number };

/** A JSON answer with the contract's headers. */
export function jsonResponse(statusCode: number, body: unknown, extraHeaders: Record<string, string> = {}): Response {
  return { statusCode, headers: { ...HEADERS, ...extraHeaders }, body: JSON.stringify(body) };
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
  };
}

/** API Gateway's own answer for a route it does not have; the local server gives the same. */
export function notFoundResponse(): Response {
  return jsonResponse(404, { message: 'Not Found' });
}
