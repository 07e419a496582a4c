import type { APIGatewayProxyEvent, APIGatewayProxyEventV2, Context } from 'aws-lambda';
import { noCacheRequested } from './request/cache-control';
import type { CacheReport } from './cache/report';
import { randomBytes } from 'node:crypto';
import { createTokenCache, type TokenCache } from './cache/shell/token-cache';
import { type Clock, Deadline, type EpochMs, systemClock } from './clock';
import { type Config, loadConfigAtStart } from './config';
import { type CredentialReport, type PublishedKeys, StoredCredentials } from './credentials/stored-credentials';
import { ExchangeError } from './errors';
import { exchangeToken, type IdpToken, type UpstreamReport } from './upstream/exchange';
import type { MetadataReport } from './upstream/issuer-metadata';
import { describeError, type Observability, powertoolsObservability, type RequestRecord } from './observability';
import { errorResponse, jsonResponse, noRouteResponse, publicJsonResponse, type Response } from './responses';
import { eventParts, payloadFormat, routeKeyOf } from './request/gateway-event';
import { isJwksRoute, isTokenRoute } from './request/routes';
import { parseTokenRequest } from './request/token-request';
import { createEndpointResolver, type EndpointResolver } from './upstream/token-endpoint';

/**
 * The Lambda handler. Typed as API Gateway calls it, from an HTTP API (payload 2.0) or a REST API
 * (1.0), with the same answers; but a direct invoke can pass any JSON value, so nothing here trusts
 * the event's shape: parsing checks it.
 */
export type TokenHandler = (event: APIGatewayProxyEventV2 | APIGatewayProxyEvent, context?: Context) => Promise<Response>;

/** IdPs may keep the JWKS this long (the contract allows at most 5 minutes): a new key is published at least this long before it signs. */
const JWKS_MAX_AGE_SECONDS = 300;
/** A JWKS without a key KMS would not give is kept only this long: the key is back soon after KMS gives it. */
const PARTIAL_JWKS_MAX_AGE_SECONDS = 30;

/**
 * Build the Lambda handler for a configuration: parse the request (for a stored credential, check
 * that its caller may use it), resolve its token URL (by the issuer's metadata when it names an
 * issuer) under the token URL policy, exchange (through the cache when it is on), and turn the result
 * or the error into the response; or answer the JWKS route. `clock` is every part's time and timers,
 * from the request's deadline to the socket's.
 */
export function createHandler(
  config: Config,
  observability: Observability = powertoolsObservability(config.logLevel),
  clock: Clock = systemClock(),
): TokenHandler {
  const id = () => randomBytes(9).toString('base64url');
  const cache = createTokenCache(config.tokenCache, config.upstreamTimeoutMs, { ...clock, instance: id(), id });
  const resolveEndpoint = createEndpointResolver(config.allowlist, clock);
  const credentials = new StoredCredentials(config.storedCredentials, clock);
  const parts: Parts = { cache, resolveEndpoint, credentials };

  return async (event: unknown, context) => {
    const jwks = credentials.publishesKeys && isJwksRoute(event);
    if (!jwks && !isTokenRoute(event)) return noRouteResponse(payloadFormat(event));
    const started = clock.mono();
    const arrivedAt = clock.epoch();
    // One deadline for everything the request does: the issuer's metadata, table calls, waits and the IdP.
    const deadline = Deadline.after(clock, config.upstreamTimeoutMs);
    const reports: Reports = { metadata: {}, upstream: {}, cached: {}, stored: {}, record: {} };
    const { metadata, upstream, cached, stored, record } = reports;
    let response: Response;
    try {
      response = jwks
        ? publishedKeys(await credentials.jwks(deadline, stored))
        : await answerToken(parts, event, { arrivedAt, deadline }, reports);
      record.outcome = 'ok';
    } catch (error) {
      response = errorResponse(error);
      record.outcome = error instanceof ExchangeError ? error.code : 'internal_error';
      if (record.outcome === 'internal_error') Object.assign(record, describeError(error));
    }
    const entry: RequestRecord = {
      ...record,
      route: routeKeyOf(event),
      outcome: record.outcome,
      status: response.statusCode,
      latency_ms: Math.round((clock.mono() - started) * 10) / 10,
      // Undefined where that part never ran; a JSON log line has no such key.
      idp_host: record.idp_host ?? metadata.host,
      metadata_status: metadata.status,
      metadata_latency_ms: metadata.latencyMs,
      metadata_error: metadata.failure,
      idp_status: upstream.status,
      idp_latency_ms: upstream.latencyMs,
      idp_error: upstream.failure,
      cache: cached.tier,
      cache_remembered: cached.remembered,
      cache_refresh: cached.refresh,
      cache_table_latency_ms: cached.tableLatencyMs,
      cache_error: cached.tableError,
      credential: stored.credential,
      caller: stored.caller,
      credential_error: stored.failure,
    };
    try {
      observability.record(entry, context);
    } catch {
      // A failure to log must not cost the caller the answer it already has.
    }
    return response;
  };
}

/** What one instance answers token requests with. */
interface Parts {
  readonly cache: TokenCache | undefined;
  readonly resolveEndpoint: EndpointResolver;
  readonly credentials: StoredCredentials;
}

/** What the parts of one request report, for its log line. */
interface Reports {
  readonly metadata: MetadataReport;
  readonly upstream: UpstreamReport;
  readonly cached: CacheReport;
  readonly stored: CredentialReport;
  readonly record: Partial<RequestRecord>;
}

/**
 * The token for a token-route event: a stored credential's only if its caller may use it, then the
 * token endpoint, then the exchange, through the cache when it is on.
 */
async function answerToken(
  parts: Parts,
  event: unknown,
  time: { readonly arrivedAt: EpochMs; readonly deadline: Deadline },
  reports: Reports,
): Promise<Response> {
  const { cache, resolveEndpoint, credentials } = parts;
  const { metadata, upstream, cached, stored, record } = reports;
  const asked = parseTokenRequest(event);
  const parsed = 'credential' in asked ? credentials.authorize(asked, event, stored) : asked;
  const { request, target } = await resolveEndpoint(parsed, time.deadline, metadata);
  record.idp_host = target.url.hostname;
  const exchange = (): Promise<IdpToken> =>
    'credential' in request
      ? credentials.exchange(request, target, time.deadline, upstream, stored)
      : exchangeToken(request, target, time.deadline, upstream);
  if (!cache) return jsonResponse(200, await exchange());
  // parseTokenRequest accepted the event, so its parts can be read.
  const noCache = noCacheRequested(eventParts(event).headers);
  if (noCache) record.no_cache = true;
  const answer = await cache.resolve({ request, tokenUrl: target.url.href, noCache, ...time, exchange, report: cached });
  return jsonResponse(200, answer.token, { 'x-token-cache': answer.header });
}

function publishedKeys({ jwks, complete }: PublishedKeys): Response {
  return publicJsonResponse(jwks, complete ? JWKS_MAX_AGE_SECONDS : PARTIAL_JWKS_MAX_AGE_SECONDS);
}

/** The deployed function: configuration is read once, when the runtime loads the module. */
export const handler: TokenHandler = createHandler(loadConfigAtStart(process.env));
