import type { Agent, ClientRequest, IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import './simple-oauth2-debug';
import type { AccessToken, Token } from 'simple-oauth2';
import { Client } from 'simple-oauth2/lib/client';
import ClientCredentialsGrantType from 'simple-oauth2/lib/client-credentials-grant-type';
import type { Deadline } from '../clock';
import { causeChain, type ExchangeError, tokenUrlNotAllowed, upstreamFailure } from '../errors';
import { grantConfig, tokenParams } from './grant-config';
import { AddressNotAllowedError, agentFor } from './guarded-agents';
import { isRecord } from '../type-guards';
import type { TokenRequest } from '../request/token-request';
import { addressNotAllowed, type TokenTarget } from '../policy/token-url-policy';

/** The IdP's token answer exactly as it was parsed: a JSON object with a string `access_token`. */
export type IdpToken = Record<string, unknown> & { access_token: string };

/**
 * Why the token endpoint gave no token, for logs: what happened on the wire, never the IdP's answer.
 * Before an answer: its name did not resolve (`dns`), nothing listened (`refused`), no route or
 * another connect error (`unreachable`), the guard refused the address (`address_not_allowed`), the
 * TLS handshake failed (`tls`), or the connection closed first (`closed`). With an answer: a 3xx
 * (`redirect`), a 429 or a 503 with Retry-After (`throttled`), another 4xx (`rejected`), a 5xx
 * (`status`), or a 2xx cut short (`closed`), over 1 MiB (`too_large`), not a JSON object
 * (`not_json`) or without a string `access_token` (`no_access_token`). Or no whole answer in time (`timeout`).
 */
export type IdpFailure =
  | 'dns'
  | 'refused'
  | 'unreachable'
  | 'address_not_allowed'
  | 'tls'
  | 'closed'
  | 'redirect'
  | 'throttled'
  | 'rejected'
  | 'status'
  | 'too_large'
  | 'not_json'
  | 'no_access_token'
  | 'timeout';

/** What one exchange did upstream, for logs and metrics: never a secret, a token or a body. */
export interface UpstreamReport {
  /** The IdP's HTTP status, when it answered. */
  status?: number;
  /** Connect to last byte, in milliseconds. */
  latencyMs?: number;
  /** Why it gave no token, when it gave none. */
  failure?: IdpFailure;
}

/** The part of Node's agent interface a request uses to get its socket. */
type RequestHandoff = (request: ClientRequest, options: object) => void;

/**
 * One HTTP attempt against the IdP. simple-oauth2 resolves with the parsed body only, so the
 * attempt gives it an agent of its own and records the request Node hands that agent: its
 * 'response' event carries the real status (a 3xx carrying JSON must not pass as a token), and it
 * is what the deadline aborts.
 */
class UpstreamAttempt {
  request?: ClientRequest;
  response?: IncomingMessage;
  status?: number;
  retryAfter?: string;
  timedOut = false;
  /** The attempt's connection, and whether it got as far as TCP (a reused one had). */
  socket?: Socket;
  connected = false;
  /**
   * The pooled agent seen through this attempt. Every `http.request` hands its request to its
   * agent's `addRequest` (the method every agent implementation provides); this view records the
   * request and passes it on, so sockets still come from, and return to, the shared pool. It
   * inherits everything else from the pooled agent, which is also why simple-oauth2's deep clone of
   * its options (@hapi/hoek keeps prototypes) still reaches the same pool.
   */
  readonly agent: Agent;

  constructor(pooled: Agent) {
    const handOff = (pooled as Agent & { addRequest: RequestHandoff }).addRequest.bind(pooled);
    const addRequest: RequestHandoff = (request, options) => {
      this.track(request);
      handOff(request, options);
    };
    this.agent = Object.create(pooled, { addRequest: { value: addRequest } }) as Agent;
  }

  private track(request: ClientRequest): void {
    this.request = request;
    request.once('socket', (socket: Socket) => {
      this.socket = socket;
      if (request.reusedSocket) this.connected = true;
      else socket.once('connect', () => (this.connected = true));
    });
    request.once('response', (response: IncomingMessage) => {
      this.response = response;
      this.status = response.statusCode;
      this.retryAfter = response.headers['retry-after'];
    });
  }

  abort(): void {
    this.timedOut = true;
    this.request?.destroy();
  }
}

/**
 * simple-oauth2 turns the parsed answer into an AccessToken, adding `expires_at` and rewriting an
 * IdP's own `expires_at` into a Date. The contract returns the IdP's object untouched, so keep the
 * object as parsed, before that conversion.
 */
class RawAnswerClientCredentials extends ClientCredentialsGrantType {
  answer: unknown;

  override createToken(token: Token): AccessToken {
    this.answer = token;
    return super.createToken(token);
  }
}

/**
 * Run the client-credentials exchange (RFC 6749 4.4) against the target the policy accepted, and
 * return the IdP's token object. Every failure is an {@link ExchangeError} classified by what the
 * IdP really did: a 429, or a 503 with `Retry-After`, is `upstream_throttled`; any other 4xx is
 * `unauthorized`; a 3xx, 5xx, unusable or oversized answer, or no connection is `upstream_error`;
 * no complete answer in time is `upstream_timeout`.
 */
export async function exchangeToken(
  request: TokenRequest,
  target: TokenTarget,
  deadline: Deadline,
  report: UpstreamReport,
): Promise<IdpToken> {
  const { clock } = deadline;
  const started = clock.mono();
  // Nothing is sent once the deadline has passed: the caller has its 504 already due.
  if (deadline.passed()) {
    report.failure = 'timeout';
    throw upstreamFailure('upstream_timeout');
  }
  try {
    // Each stale pooled socket fails once and is destroyed, so this ends on a fresh connection,
    // an answer, or the deadline.
    for (;;) {
      const token = await attemptOnce(request, target, deadline, report);
      if (token) return token;
    }
  } finally {
    report.latencyMs = Math.round((clock.mono() - started) * 10) / 10;
  }
}

/** One HTTP exchange; `undefined` when it failed on a stale kept-alive socket and may be retried. */
async function attemptOnce(
  request: TokenRequest,
  target: TokenTarget,
  deadline: Deadline,
  report: UpstreamReport,
): Promise<IdpToken | undefined> {
  const attempt = new UpstreamAttempt(agentFor(target.url.protocol, target.permit));
  const config = grantConfig(request, target, deadline);
  const client = new RawAnswerClientCredentials(config, new Client(config));
  const params = tokenParams(request);

  const cancel = deadline.whenPassed(() => attempt.abort());
  try {
    await client.getToken(params, { agent: attempt.agent });
  } catch (error) {
    report.status = attempt.status;
    if (request.authMethod !== 'private_key_jwt' && isStaleSocket(error, attempt)) return undefined;
    const [failure, refusal] = classifyFailure(error, attempt, deadline, target);
    report.failure = failure;
    throw refusal;
  } finally {
    cancel();
  }
  report.status = attempt.status;
  const unusable = unusableAnswer(client.answer, attempt.status as number);
  if (unusable === undefined) return client.answer as IdpToken;
  report.failure = unusable;
  throw upstreamError();
}

/** Why a resolved answer (so one with a recorded status) is no token, or undefined for a token. */
function unusableAnswer(answer: unknown, status: number): IdpFailure | undefined {
  // A 3xx (redirects are not followed) is no token, whatever its body. No 1xx gets here: Node hands
  // 100 and 102-199 to 'information', and gives a 101 an empty body (what follows belongs to the
  // protocol switched to), which simple-oauth2 refuses before this.
  if (status >= 300) return 'redirect';
  // simple-oauth2 has already refused a null, false, 0 or empty answer; any other JSON value that is
  // not an object (an array, a string, a number, true) is no token answer at all.
  if (!isRecord(answer)) return 'not_json';
  const accessToken = answer.access_token;
  return typeof accessToken === 'string' && accessToken !== '' ? undefined : 'no_access_token';
}

/**
 * Classify by what happened on the wire, never by simple-oauth2's Boom status: it reports a non-JSON
 * answer as 406, a socket error as 502 and its own timeout as 504, whatever the IdP said. Any
 * failure once the deadline has passed is a timeout: on a loaded event loop wreck's backstop timer,
 * or a socket error, can be handled before the deadline's own timer runs, and the caller still got
 * no complete answer within UPSTREAM_TIMEOUT_MS.
 */
function classifyFailure(error: unknown, attempt: UpstreamAttempt, deadline: Deadline, target: TokenTarget): [IdpFailure, ExchangeError] {
  if (attempt.timedOut || deadline.passed()) return ['timeout', upstreamFailure('upstream_timeout')];
  // The guard's refusal is the request's own error, which wreck and simple-oauth2 pass on as it is
  // (Boom decorates it in place), so no cause chain needs walking.
  if (error instanceof AddressNotAllowedError) return ['address_not_allowed', tokenUrlNotAllowed(addressNotAllowed(target.field))];
  const status = attempt.status;
  if (status === undefined) return [failureBeforeAnswer(error, attempt), upstreamError()];
  // RFC 6585 4 and RFC 9110 15.6.4: the IdP asks to wait; that says nothing about the credentials.
  if (status === 429 || (status === 503 && attempt.retryAfter !== undefined)) {
    return ['throttled', upstreamFailure('upstream_throttled', retryAfterSeconds(attempt.retryAfter, deadline.clock.epoch()))];
  }
  if (status >= 400 && status < 500) return ['rejected', upstreamFailure('unauthorized')];
  // A 5xx, or a 101 that switched to another protocol.
  if (status >= 500 || status < 200) return ['status', upstreamError()];
  if (status >= 300) return ['redirect', upstreamError()];
  return [failureOfBody(attempt.response as IncomingMessage), upstreamError()];
}

/**
 * How an attempt that got no answer failed: by how far its connection got, then by its error. A TLS
 * socket is `authorized` once its handshake has verified the IdP (the agent rejects any other).
 */
function failureBeforeAnswer(error: unknown, attempt: UpstreamAttempt): IdpFailure {
  if (attempt.connected) {
    const tls = attempt.socket as TLSSocket;
    return tls.encrypted && !tls.authorized ? 'tls' : 'closed';
  }
  const cause = causeChain(error).find((link): link is NodeJS.ErrnoException => typeof (link as { code?: unknown }).code === 'string');
  if (cause?.syscall === 'getaddrinfo') return 'dns';
  return cause?.code === 'ECONNREFUSED' ? 'refused' : 'unreachable';
}

/**
 * Why a 2xx answer's body gave nothing: read to its end, it is no JSON or a value simple-oauth2
 * refuses; given up before its end, either the connection broke (Node then destroys the answer with
 * an error) or wreck stopped reading at the 1 MiB cap (it destroys the answer without one).
 */
function failureOfBody(response: IncomingMessage): IdpFailure {
  if (!response.readableAborted) return 'not_json';
  return response.errored ? 'closed' : 'too_large';
}

const upstreamError = (): ExchangeError => upstreamFailure('upstream_error');

/**
 * RFC 9110 10.2.3: `Retry-After` is whole seconds or an HTTP date; the seconds to wait from `now`
 * (rounded up), or 1 when there is no usable value. The caller holds it between 1 and 60.
 */
export function retryAfterSeconds(value: string | undefined, now: number): number {
  // Node has trimmed the header's value; an absent one ("undefined") reads as neither form.
  const text = String(value);
  if (/^\d+$/.test(text)) return Number(text);
  const date = Date.parse(text);
  return Number.isNaN(date) ? 1 : Math.ceil((date - now) / 1000);
}

const STALE_SOCKET_CODES = new Set<string | undefined>(['ECONNRESET', 'EPIPE', 'ECONNABORTED']);

// A kept-alive socket the IdP closed while the function was frozen fails on first use with a
// reset before any answer. Retrying on a fresh socket is safe even if the first request did reach
// the IdP: a client-credentials token issued twice only leaves one unused. Not with a caller's
// private_key_jwt assertion: resending its `jti` would read as a replay to an IdP that checks. Never once the IdP has
// answered: today wreck reports a body cut short without the socket's error code, so the codes
// alone would not match, but only because Node emits its deprecated 'aborted' event before 'error'.
function isStaleSocket(error: unknown, attempt: UpstreamAttempt): boolean {
  if (attempt.timedOut || attempt.status !== undefined || !attempt.request?.reusedSocket) return false;
  return causeChain(error).some((cause) => STALE_SOCKET_CODES.has((cause as NodeJS.ErrnoException).code));
}
