import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2, Context } from 'aws-lambda';
import { noCacheRequested } from './request/cache-control';
import type { CacheReport } from './cache/report';
import { createTokenCache } from './cache/token-cache';
import { leftUntil, monoMs, realRuntime } from './cache/time';
import { type Config, loadConfig } from './config';
import { ExchangeError } from './errors';
import { exchangeToken, type IdpToken, type UpstreamReport } from './upstream/exchange';
import type { MetadataReport } from './upstream/issuer-metadata';
import { describeError, type Observability, powertoolsObservability, type RequestRecord } from './observability';
import { errorResponse, jsonResponse, notFoundResponse, type Response } from './responses';
import { isTokenRoute } from './request/routes';
import { parseTokenRequest } from './request/token-request';
import { createEndpointResolver } from './upstream/token-endpoint';

/**
 * The Lambda handler. Typed as API Gateway calls it, but a direct invoke can pass any JSON value,
 * so nothing here trusts the event's shape: parsing checks it.
 */
export type TokenHandler = (event: APIGatewayProxyEventV2, context?: Context) => Promise<APIGatewayProxyStructuredResultV2>;

/**
 * Build the Lambda handler for a configuration: parse the request, resolve its token URL (by the
 * issuer's metadata when it names an issuer) under the token URL policy, exchange (through the cache
 * when it is on), and turn the result or the error into the response. `clock` (epoch ms) is the
 * cache's and the request's time.
 */
export function createHandler(
  config: Config,
  observability: Observability = powertoolsObservability(config.logLevel),
  clock: () => number = Date.now,
): TokenHandler {
  const runtime = realRuntime(clock);
  const cache = createTokenCache(config.tokenCache, config.upstreamTimeoutMs, runtime);
  const resolveEndpoint = createEndpointResolver(config.allowlist);

  return async (event: unknown, context) => {
    if (!isTokenRoute(event)) return notFoundResponse();
    const started = runtime.mono();
    const arrivedAt = runtime.epoch();
    // One deadline for everything the request does: the issuer's metadata, table calls, waits and the IdP.
    const deadline = monoMs(started + config.upstreamTimeoutMs);
    const metadata: MetadataReport = {};
    const upstream: UpstreamReport = {};
    const cached: CacheReport = {};
    const record: Partial<RequestRecord> = {};
    let response: Response;
    try {
      const { request, target } = await resolveEndpoint(parseTokenRequest(event), deadline, metadata);
      record.idp_host = target.url.hostname;
      const exchange = (timeoutMs: number): Promise<IdpToken> => exchangeToken(request, target, timeoutMs, upstream);
      if (cache) {
        // parseTokenRequest accepted the event, so its headers are strings.
        const noCache = noCacheRequested((event as { headers: Record<string, string> }).headers);
        if (noCache) record.no_cache = true;
        const answer = await cache.resolve({ request, tokenUrl: target.url.href, noCache, arrivedAt, deadline, exchange, report: cached });
        response = jsonResponse(200, answer.token, { 'x-token-cache': answer.header });
      } else {
        // What is left of the deadline once the issuer's metadata, if any, was read.
        response = jsonResponse(200, await exchange(Math.max(1, leftUntil(deadline, runtime.mono()))));
      }
      record.outcome = 'ok';
    } catch (error) {
      response = errorResponse(error);
      record.outcome = error instanceof ExchangeError ? error.code : 'internal_error';
      if (record.outcome === 'internal_error') Object.assign(record, describeError(error));
    }
    const entry: RequestRecord = {
      ...record,
      route: routeOf(event),
      outcome: record.outcome,
      status: response.statusCode,
      latency_ms: Math.round((performance.now() - started) * 10) / 10,
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
    };
    try {
      observability.record(entry, context);
    } catch {
      // A failure to log must not cost the caller the answer it already has.
    }
    return response;
  };
}

/** The route key as API Gateway names it; a direct invoke's own value is logged only if it is one. */
function routeOf(event: unknown): string {
  const routeKey = (event as { routeKey?: unknown }).routeKey;
  return typeof routeKey === 'string' && routeKey.length <= 64 ? routeKey : '-';
}

/** The deployed function: configuration is read once, when the runtime loads the module. */
export const handler: TokenHandler = createHandler(loadConfig(process.env));
