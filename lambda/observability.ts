import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { LogLevel } from './config';
import { causeChain, type ErrorCode } from './errors';
import type { CacheTier } from './token-cache';

const SERVICE_NAME = 'token-exchange';
const DEFAULT_NAMESPACE = 'TokenExchange';

/** Everything logged about one request. Only codes, statuses, host names and timings: no secret, token or body. */
export interface RequestRecord {
  requestId: string;
  route: string;
  outcome: 'ok' | ErrorCode;
  status: number;
  latencyMs: number;
  idpHost?: string;
  idpStatus?: number;
  idpLatencyMs?: number;
  /** With TOKEN_CACHE on: the tier that answered (`memory`, `shared`) or `miss` (the IdP did). */
  cache?: CacheTier;
  /** Time spent in shared-table calls, polls included. */
  cacheTableLatencyMs?: number;
  /** The failed shared-table call's error name: the request went on to the IdP without the table. */
  cacheError?: string;
  /** For a 500: the error's class name and errno-style codes of its causes, never a message. */
  errorName?: string;
  errorCodes?: string[];
}

/** Writes one structured log line and the EMF metrics of each request. */
export interface Observability {
  record(entry: RequestRecord): void;
}

/**
 * Powertools Logger and Metrics: one JSON line per request, and EMF metrics (a count per outcome,
 * the IdP's latency) in the namespace from POWERTOOLS_METRICS_NAMESPACE, which the stack sets.
 */
export function powertoolsObservability(logLevel: LogLevel, namespace = process.env.POWERTOOLS_METRICS_NAMESPACE): Observability {
  const logger = new Logger({ serviceName: SERVICE_NAME, logLevel });
  const metrics = new Metrics({ serviceName: SERVICE_NAME, namespace: namespace || DEFAULT_NAMESPACE });
  return {
    record(entry) {
      const line = {
        request_id: entry.requestId,
        route: entry.route,
        outcome: entry.outcome,
        status: entry.status,
        latency_ms: entry.latencyMs,
        idp_host: entry.idpHost,
        idp_status: entry.idpStatus,
        idp_latency_ms: entry.idpLatencyMs,
        cache: entry.cache,
        cache_table_latency_ms: entry.cacheTableLatencyMs,
        cache_error: entry.cacheError,
        error_name: entry.errorName,
        error_codes: entry.errorCodes,
      };
      if (entry.status >= 500 && entry.outcome === 'internal_error') logger.error('token request', line);
      else if (entry.status >= 500) logger.warn('token request', line);
      else logger.info('token request', line);

      metrics.addDimension('outcome', entry.outcome);
      metrics.addMetric('Requests', MetricUnit.Count, 1);
      if (entry.idpLatencyMs !== undefined) metrics.addMetric('IdpLatency', MetricUnit.Milliseconds, entry.idpLatencyMs);
      metrics.publishStoredMetrics();
      if (entry.cache) publishCacheMetrics(metrics, entry);
    },
  };
}

/**
 * The cache's own EMF line, dimensioned by the tier that answered: `CacheHits` (tier `memory` or
 * `shared`), `CacheMisses` (tier `miss`), `CacheErrors` when the shared table failed (the request then
 * went to the IdP, so always tier `miss`), and the table's latency when it was called.
 */
function publishCacheMetrics(metrics: Metrics, entry: RequestRecord): void {
  metrics.addDimension('tier', entry.cache as CacheTier);
  metrics.addMetric(entry.cache === 'miss' ? 'CacheMisses' : 'CacheHits', MetricUnit.Count, 1);
  if (entry.cacheError !== undefined) metrics.addMetric('CacheErrors', MetricUnit.Count, 1);
  if (entry.cacheTableLatencyMs !== undefined) metrics.addMetric('CacheTableLatency', MetricUnit.Milliseconds, entry.cacheTableLatencyMs);
  metrics.publishStoredMetrics();
}

/** Name and codes along an error's cause chain: enough to find a bug, never a message that could hold input. */
export function describeError(error: unknown): Pick<RequestRecord, 'errorName' | 'errorCodes'> {
  const codes = causeChain(error)
    .map((cause) => (cause as { code?: unknown }).code)
    .filter((code): code is string => typeof code === 'string');
  const errorName = error instanceof Error ? error.name : typeof error;
  return codes.length > 0 ? { errorName, errorCodes: codes } : { errorName };
}
