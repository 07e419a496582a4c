import { type IncomingMessage, request as sendRequest } from 'node:http';
import { type Clock, type Deadline, systemClock } from '../clock';
import { ExchangeError, tokenUrlNotAllowed, UPSTREAM_ERROR_DESCRIPTION, UPSTREAM_TIMEOUT_DESCRIPTION } from '../errors';
import { AddressNotAllowedError, agentFor } from './guarded-agents';
import type { SecretMethod } from '../request/token-request';
import { metadataUrls } from './well-known';
import { type AddressPermit, addressNotAllowed, type AllowlistEntry, checkTokenUrl, type TokenTarget } from '../policy/token-url-policy';

/** What an issuer's metadata gives a token request: where to post, and the method for a request that names none. */
export interface TokenEndpoint {
  /** `token_endpoint` as the metadata names it. */
  readonly url: string;
  /** The endpoint as the token URL policy accepted it. */
  readonly target: TokenTarget;
  readonly authMethod: SecretMethod;
}

/** Why the metadata step gave no token endpoint, for logs: a fixed word, never the IdP's answer. */
export type MetadataFailure =
  | 'unreachable'
  | 'timeout'
  | 'address_not_allowed'
  | 'http_error'
  | 'too_large'
  | 'not_json'
  | 'issuer_mismatch'
  | 'no_token_endpoint'
  | 'token_endpoint_not_allowed';

/** What the metadata step of one request did, for logs and metrics: never a secret or a body. */
export interface MetadataReport {
  /** The issuer's host, once the policy accepted the issuer. */
  host?: string;
  /** The HTTP status of the last metadata answer, when one came. */
  status?: number;
  /** Time spent waiting for metadata from the network (its own fetch, or one it joined); absent when the kept copy answered. */
  latencyMs?: number;
  failure?: MetadataFailure;
}

/** How much metadata is kept, and for how long. */
export interface KeepingPolicy {
  readonly ttlMs: number;
  readonly maxIssuers: number;
}

/**
 * Ten minutes: a fetch per issuer per instance every ten minutes costs the IdP and the callers
 * nothing measurable, and a moved endpoint or a changed method list reaches every instance within
 * that. Five hundred issuers, least recently used out first: a few hundred bytes each, so at most a
 * few hundred KB, and far more IdPs than one deployment serves.
 */
const DEFAULT_KEEPING: KeepingPolicy = { ttlMs: 10 * 60_000, maxIssuers: 500 };

/** Real documents are 1 to 10 KiB; anything past this is not metadata worth reading. */
const MAX_METADATA_BYTES = 64 * 1024;

/** RFC 8414 2: the metadata's method list, in the contract's order of preference. */
const SECRET_METHODS: readonly SecretMethod[] = ['client_secret_basic', 'client_secret_post', 'client_secret_jwt'];
const ENDPOINT_FIELD = "the issuer's token_endpoint";
const USER_AGENT = 'token-exchange-service';

interface Kept {
  readonly endpoint: TokenEndpoint;
  readonly expiresAt: number;
}

/** What a fetch has learnt so far, for the report of every request waiting on it. */
interface Progress {
  status?: number;
  failure?: MetadataFailure;
}

/** One fetch of one issuer's metadata, shared by every request that arrives while it runs. */
interface Fetch {
  readonly done: Promise<TokenEndpoint>;
  readonly progress: Progress;
}

/**
 * The token endpoints of the issuers one function instance has asked, read from their metadata
 * (RFC 8414, OpenID Connect Discovery 1.0) and kept for a while. Only usable metadata is kept: a
 * failure is never kept, and an expired copy is never answered.
 */
export class IssuerMetadata {
  private readonly kept = new Map<string, Kept>();
  private readonly fetches = new Map<string, Fetch>();

  constructor(
    private readonly allowlist: readonly AllowlistEntry[],
    private readonly keeping: KeepingPolicy = DEFAULT_KEEPING,
    private readonly clock: Clock = systemClock(),
  ) {}

  /**
   * The token endpoint of `issuer` (as the caller gave it; `target` is how the policy accepted it):
   * the kept one, or one read from its metadata by a fetch that concurrent requests share. Throws a
   * 502, a 504 once `deadline` passes, or a 403 for an address or an endpoint the policy refuses.
   */
  async tokenEndpoint(issuer: string, target: TokenTarget, deadline: Deadline, report: MetadataReport): Promise<TokenEndpoint> {
    const kept = this.fresh(issuer);
    if (kept) return kept;
    const started = this.clock.mono();
    const { done, progress } = this.fetches.get(issuer) ?? this.start(issuer, target, deadline);
    try {
      // A request that joined a fetch begun earlier waits no longer than its own deadline.
      return await deadline.race(done, timedOut);
    } catch (error) {
      report.failure = progress.failure ?? 'timeout';
      throw error;
    } finally {
      report.status = progress.status;
      report.latencyMs = Math.round((this.clock.mono() - started) * 10) / 10;
    }
  }

  private fresh(issuer: string): TokenEndpoint | undefined {
    const kept = this.kept.get(issuer);
    if (!kept) return undefined;
    this.kept.delete(issuer);
    if (kept.expiresAt <= this.clock.epoch()) return undefined;
    this.kept.set(issuer, kept); // most recently used goes last
    return kept.endpoint;
  }

  private start(issuer: string, target: TokenTarget, deadline: Deadline): Fetch {
    const progress: Progress = {};
    const done = this.discover(issuer, target, deadline, progress)
      .then((endpoint) => {
        this.keep(issuer, endpoint);
        return endpoint;
      })
      .finally(() => this.fetches.delete(issuer));
    // Every waiter may have given up at its own deadline: the outcome must not be an unhandled rejection.
    done.catch(() => undefined);
    const fetch = { done, progress };
    this.fetches.set(issuer, fetch);
    return fetch;
  }

  private keep(issuer: string, endpoint: TokenEndpoint): void {
    this.kept.set(issuer, { endpoint, expiresAt: this.clock.epoch() + this.keeping.ttlMs });
    if (this.kept.size > this.keeping.maxIssuers) this.kept.delete(this.kept.keys().next().value as string);
  }

  /**
   * OpenID Connect Discovery's form first: Entra ID, Keycloak, Cognito, Google and oidc-provider
   * serve it and not always RFC 8414's, so one request does for nearly every IdP. RFC 8414's form
   * only after a 4xx other than 429: the first document is not there (a 404, or the 403 of an object
   * store or gateway for an unknown key). Anything else would fail the same way again (a 5xx, a
   * 429, no connection, the deadline) or must not be worked around (a redirect, a document that is
   * there but wrong: RFC 8414 3.3).
   */
  private async discover(issuer: string, target: TokenTarget, deadline: Deadline, progress: Progress): Promise<TokenEndpoint> {
    const fail = (failure: MetadataFailure, error: ExchangeError = upstreamError()): never => {
      progress.failure = failure;
      throw error;
    };
    let answer: Answer | undefined;
    for (const url of metadataUrls(target.url)) {
      answer = await getDocument(url, target.permit, deadline).catch((error: unknown) => fail(...classify(error, deadline)));
      progress.status = answer.status;
      if (!isAbsent(answer.status)) break;
    }
    // Any status but a 2xx (a redirect too: none is followed) leaves no body; the log has the status.
    const { body } = answer as Answer;
    if (body === undefined) return fail('http_error');
    let metadata: unknown;
    try {
      metadata = JSON.parse(body);
    } catch {
      // Refused below, like any JSON value that is not an object.
    }
    if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) return fail('not_json');
    const { issuer: named, token_endpoint: endpoint, token_endpoint_auth_methods_supported: methods } = metadata as Record<string, unknown>;
    if (named !== issuer) fail('issuer_mismatch');
    if (typeof endpoint !== 'string') return fail('no_token_endpoint');
    let endpointTarget: TokenTarget;
    try {
      endpointTarget = checkTokenUrl(endpoint, this.allowlist, ENDPOINT_FIELD);
    } catch (error) {
      // A refusal is the policy's 403; a string the policy cannot even read as a URL names no endpoint.
      const refusal = error as ExchangeError;
      return refusal.code === 'token_url_not_allowed' ? fail('token_endpoint_not_allowed', refusal) : fail('no_token_endpoint');
    }
    return { url: endpoint, target: endpointTarget, authMethod: methodFromList(methods) };
  }
}

/** RFC 8414 2: the first secret method `token_endpoint_auth_methods_supported` names, or `client_secret_basic`. */
function methodFromList(methods: unknown): SecretMethod {
  return SECRET_METHODS.find((method) => Array.isArray(methods) && methods.includes(method)) ?? 'client_secret_basic';
}

/** A 4xx other than 429: this document is not there, and the other form may be. */
const isAbsent = (status: number): boolean => status >= 400 && status < 500 && status !== 429;

/** One metadata answer: its status, and its body when it is a 2xx. */
interface Answer {
  readonly status: number;
  readonly body?: string;
}

/** Why a metadata request was given up before its answer was complete. */
class TooLarge extends Error {}
class Expired extends Error {}
class CutShort extends Error {}

/**
 * GET one metadata document through the guarded agent of the issuer's permit (the address guard at
 * connect time; node:http never follows a redirect). A body is read only for a 2xx, and only up to
 * {@link MAX_METADATA_BYTES}; the request is given up at `deadline`.
 */
function getDocument(url: URL, permit: AddressPermit, deadline: Deadline): Promise<Answer> {
  return new Promise((resolve, reject) => {
    // node:https's request is this one with an https default agent; the agent given here is the
    // guarded one for the URL's protocol, and it decides whether the connection is TLS.
    // A GET: node:http's default method.
    const request = sendRequest(url, {
      agent: agentFor(url.protocol, permit),
      headers: { accept: 'application/json', 'user-agent': USER_AGENT },
    });
    // Settled first, destroyed after: whatever the destroyed request emits then changes nothing.
    const giveUp = (reason: Error): void => {
      reject(reason);
      request.destroy();
    };
    const cancel = deadline.whenPassed(() => giveUp(new Expired()));
    request.on('close', cancel);
    request.on('error', reject);
    request.on('response', (response: IncomingMessage) => {
      const status = response.statusCode as number;
      // Node hands no 1xx to 'response'. Past a 2xx the status decides and the body is not worth
      // reading; destroying it costs a pooled socket, once per issuer at most.
      if (status >= 300) {
        resolve({ status });
        response.destroy();
        return;
      }
      if (Number(response.headers['content-length']) > MAX_METADATA_BYTES) return giveUp(new TooLarge());
      const chunks: Buffer[] = [];
      let size = 0;
      response.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_METADATA_BYTES) giveUp(new TooLarge());
        else chunks.push(chunk);
      });
      response.on('end', () => resolve({ status, body: Buffer.concat(chunks).toString('utf8') }));
      // A body cut short ends in 'close' without 'end'.
      response.on('close', () => reject(new CutShort()));
    });
    request.end();
  });
}

/**
 * Why a metadata request failed, as the caller and the log see it. Any failure once the deadline
 * has passed is a timeout, as in the exchange: the caller got no answer within UPSTREAM_TIMEOUT_MS.
 */
function classify(error: unknown, deadline: Deadline): [MetadataFailure, ExchangeError] {
  if (error instanceof Expired || deadline.passed()) return ['timeout', timedOut()];
  if (error instanceof AddressNotAllowedError) return ['address_not_allowed', tokenUrlNotAllowed(addressNotAllowed('issuer'))];
  if (error instanceof TooLarge) return ['too_large', upstreamError()];
  return ['unreachable', upstreamError()];
}

const timedOut = (): ExchangeError => new ExchangeError('upstream_timeout', UPSTREAM_TIMEOUT_DESCRIPTION);
const upstreamError = (): ExchangeError => new ExchangeError('upstream_error', UPSTREAM_ERROR_DESCRIPTION);
