import type { Signer } from './sigv4';

/** One request of a check, relative to the service's base URL. */
export interface SmokeRequest {
  readonly method: 'POST' | 'GET';
  readonly path: string;
  /** Sent as JSON, or as an empty body when absent. */
  readonly json?: unknown;
}

/** What came back. */
export interface SmokeAnswer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: string;
}

/** Sends a check's request, signed or not; rejects with a {@link ConnectionError} when no answer comes. */
export type Send = (request: SmokeRequest, options?: { sign?: boolean }) => Promise<SmokeAnswer>;

/** No HTTP answer at all: refused, reset, unresolvable, TLS, or no answer in time. */
export class ConnectionError extends Error {
  constructor(readonly reason: string) {
    super(reason);
  }
}

/** A request takes at most API Gateway's 30 s integration limit, and a little more. */
const REQUEST_TIMEOUT_MS = 35_000;

/** Requests to `baseUrl` with fetch, never following a redirect, signed with `signer` when asked. */
export function httpSender(baseUrl: URL, signer?: Signer): Send {
  return async (request, { sign = false } = {}) => {
    const url = new URL(request.path.replace(/^\//, ''), baseUrl);
    const body = request.json === undefined ? '' : JSON.stringify(request.json);
    let headers: Record<string, string> = { 'content-type': 'application/json' };
    if (sign) {
      if (!signer) throw new Error('no SigV4 signer');
      headers = await signer({ method: request.method, url, headers, body });
      delete headers.host; // fetch sets the host it connects to, the one signed
    }
    try {
      const response = await fetch(url, {
        method: request.method,
        headers,
        body: request.method === 'GET' ? undefined : body,
        redirect: 'manual',
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
      return { status: response.status, headers: response.headers, body: await response.text() };
    } catch (error) {
      throw new ConnectionError(connectionFailure(error));
    }
  };
}

function connectionFailure(error: unknown): string {
  if (error instanceof Error && error.name === 'TimeoutError') return `no answer within ${REQUEST_TIMEOUT_MS / 1000} s`;
  const cause = (error as { cause?: { code?: unknown; message?: unknown } }).cause;
  if (cause?.code === 'ECONNREFUSED') return 'connection refused (ECONNREFUSED)';
  if (typeof cause?.code === 'string') return `no answer (${cause.code})`;
  return `no answer (${error instanceof Error ? error.message : String(error)})`;
}
