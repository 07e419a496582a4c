import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2, Context } from 'aws-lambda';
import { type Config, loadConfig } from './config';
import { ExchangeError } from './errors';
import { exchangeToken, type IdpToken, type UpstreamReport } from './exchange';
import type { MetadataReport } from './issuer-metadata';
import { describeError, type Observability, powertoolsObservability, type RequestRecord } from './observability';
import { errorResponse, jsonResponse, notFoundResponse, type Response } from './responses';
import { isTokenRoute } from './routes';
import type { TableReport } from './shared-token-cache';
import { cacheable } from './token-cache';
import { createTokenCacheTiers } from './token-cache-tiers';
import { createEndpointResolver } from './token-endpoint';
import { parseTokenRequest } from './token-request';

/**
 * The Lambda handler. Typed as API Gateway calls it, but a direct invoke can pass any JSON value,
 * so nothing here trusts the event's shape: parsing checks it.
 */
export type TokenHandler = (event: APIGatewayProxyEventV2, context?: Context) => Promise<APIGatewayProxyStructuredResultV2>;

/**
 * Build the Lambda handler for a configuration: parse the request, resolve its token URL (by the
 * issuer's metadata when it names an issuer) under the token URL policy, exchange (through the cache
 * when it is on), and turn the result or the error into the response.
 */
export function createHandler(config: Config, observability: Observability = powertoolsObservability(config.logLevel)): TokenHandler {
  const cache = createTokenCacheTiers(config);
  const resolveEndpoint = createEndpointResolver(config.allowlist);

  return async (event: unknown, context) => {
    if (!isTokenRoute(event)) return notFoundResponse();
    const started = performance.now();
    // One deadline for the whole request: the issuer's metadata, then the token request.
    const deadline = started + config.upstreamTimeoutMs;
    const metadata: MetadataReport = {};
    const upstream: UpstreamReport = {};
    const table: TableReport = {};
    const record: Partial<RequestRecord> = {};
    let response: Response;
    try {
      const { request, target } = await resolveEndpoint(parseTokenRequest(event), deadline, metadata);
      record.idp_host = target.url.hostname;
      // The cache passes what is left of its own deadline, which began after the metadata step.
      const exchange = (timeoutMs = Infinity): Promise<IdpToken> =>
        exchangeToken(request, target, Math.min(timeoutMs, deadline - performance.now()), upstream);
      if (cache && cacheable(request)) {
        record.cache = 'miss'; // until a tier answers; a failed exchange stays a miss
        const { token, tier } = await cache.resolve(request, target.url.href, exchange, table);
        record.cache = tier;
        response = jsonResponse(200, token, { 'x-token-cache': tier === 'miss' ? 'miss' : 'hit' });
      } else {
        response = jsonResponse(200, await exchange());
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
      cache_table_latency_ms: table.latencyMs,
      cache_error: table.error,
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
