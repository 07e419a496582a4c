import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { Context } from 'aws-lambda';
import type { LogLevel } from './config';
import { causeChain, type ErrorCode } from './errors';
import type { IdpFailure } from './upstream/exchange';
import type { MetadataFailure } from './upstream/issuer-metadata';
import type { CacheTier } from './cache/report';

const SERVICE_NAME = 'token-exchange';

/**
 * Everything logged about one request, under the keys of the log line. Only codes, statuses, host
 * names and timings: no secret, token or body.
 */
export interface RequestRecord {
  route: string;
  outcome: 'ok' | ErrorCode;
  status: number;
  latency_ms: number;
  /** The token endpoint's host; for a request by issuer that got no endpoint, the issuer's. */
  idp_host?: string;
  /** By issuer: the HTTP status of the last metadata answer. */
  metadata_status?: number;
  /** By issuer: time spent waiting for metadata from the network; absent when the instance's kept copy answered. */
  metadata_latency_ms?: number;
  /** By issuer: why the metadata step gave no usable token endpoint. */
  metadata_error?: MetadataFailure;
  idp_status?: number;
  idp_latency_ms?: number;
  /** Why the token endpoint gave no token (`refused`, `tls`, `not_json`, ...). */
  idp_error?: IdpFailure;
  /** With TOKEN_CACHE on: the tier that answered (`memory`, `shared`), `miss` (the IdP did, or nobody), or `stale`. */
  cache?: CacheTier;
  /** A remembered failure or a hold answered instead of the IdP. */
  cache_remembered?: 'failure' | 'hold';
  /** This request refreshed its kept token ahead of its going stale. */
  cache_refresh?: 'ahead';
  /** The request asked for a new token (`cache-control: no-cache`). */
  no_cache?: true;
  /** Time spent in shared-table calls, reads while waiting included. */
  cache_table_latency_ms?: number;
  /** The failed shared-table (or pepper) call's error name: the request went on without the table. */
  cache_error?: string;
  /** A stored credential's request: the name asked for. */
  credential?: string;
  /** A stored credential's request: the caller's IAM ARN, as API Gateway verified it. */
  caller?: string;
  /**
   * Why a stored credential got no secret, key or signature: the Secrets Manager or KMS error's name, or the
   * broker's. On the JWKS route, `NAME: ERROR` for each key left out, by a credential's name, never the key's ARN.
   */
  credential_error?: string;
  /** For a 500: the error's class name and errno-style codes of its causes, never a message. */
  error_name?: string;
  error_codes?: string[];
}

/** Writes one structured log line and the EMF metrics of each request. */
export interface Observability {
  record(entry: RequestRecord, context?: Context): void;
}

/**
 * Powertools Logger and Metrics: one JSON line per request carrying the Lambda context
 * (`function_request_id`, `cold_start`, ...), and EMF metrics (a count per outcome, the IdP's
 * latency, the metadata step's latency and failures, the cache's line, requests by stored credential,
 * and Powertools' own ColdStart) in the namespace Powertools reads from
 * POWERTOOLS_METRICS_NAMESPACE, which the stack sets.
 */
export function powertoolsObservability(logLevel: LogLevel): Observability {
  const logger = new Logger({ serviceName: SERVICE_NAME, logLevel });
  const metrics = new Metrics({ serviceName: SERVICE_NAME });
  return {
    record(entry, context) {
      if (context) {
        logger.addContext(context);
        // Emits once per instance, on its first request.
        metrics.captureColdStartMetric(context.functionName);
      }
      // A bug is an ERROR; the IdP failing, throttling or not answering is a WARN; the rest is INFO.
      if (entry.outcome === 'internal_error') logger.error('token request', { ...entry });
      else if (UPSTREAM_FAILURES.has(entry.outcome)) logger.warn('token request', { ...entry });
      else logger.info('token request', { ...entry });

      metrics.addDimension('outcome', entry.outcome);
      metrics.addMetric('Requests', MetricUnit.Count, 1);
      if (entry.idp_latency_ms !== undefined) metrics.addMetric('IdpLatency', MetricUnit.Milliseconds, entry.idp_latency_ms);
      if (entry.metadata_latency_ms !== undefined) metrics.addMetric('MetadataLatency', MetricUnit.Milliseconds, entry.metadata_latency_ms);
      if (entry.metadata_error !== undefined) metrics.addMetric('MetadataFailures', MetricUnit.Count, 1);
      metrics.publishStoredMetrics();
      if (entry.cache) publishCacheMetrics(metrics, entry);
      // Past the access policy the name is a configured one: a caller cannot mint a metric by asking for any name.
      if (entry.credential !== undefined && entry.outcome !== 'credential_not_allowed') {
        metrics.addDimensions({ credential: entry.credential, outcome: entry.outcome });
        metrics.addMetric('CredentialRequests', MetricUnit.Count, 1);
        metrics.publishStoredMetrics();
      }
    },
  };
}

const UPSTREAM_FAILURES: ReadonlySet<string> = new Set(['upstream_error', 'upstream_throttled', 'upstream_timeout']);

const TIER_METRIC: Record<CacheTier, string> = { memory: 'CacheHits', shared: 'CacheHits', miss: 'CacheMisses', stale: 'CacheStale' };

/**
 * The cache's two EMF lines. By the tier that answered: `CacheHits` (tier `memory` or `shared`),
 * `CacheMisses` (tier `miss`), `CacheStale` (tier `stale`), and the table's latency when it was
 * called. Then, undimensioned so one alarm sees them all: `CacheErrors` (a table or pepper call
 * failed; the request went on without the table), `CacheRefreshesAhead`, and answers that came from
 * a remembered failure (`CacheRememberedFailures`) or a hold (`CacheHolds`).
 */
function publishCacheMetrics(metrics: Metrics, entry: RequestRecord): void {
  const tier = entry.cache as CacheTier;
  metrics.addDimension('tier', tier);
  metrics.addMetric(TIER_METRIC[tier], MetricUnit.Count, 1);
  if (entry.cache_table_latency_ms !== undefined) {
    metrics.addMetric('CacheTableLatency', MetricUnit.Milliseconds, entry.cache_table_latency_ms);
  }
  metrics.publishStoredMetrics();
  const events = [
    entry.cache_error !== undefined && 'CacheErrors',
    entry.cache_refresh !== undefined && 'CacheRefreshesAhead',
    entry.cache_remembered === 'failure' && 'CacheRememberedFailures',
    entry.cache_remembered === 'hold' && 'CacheHolds',
  ].filter((name): name is string => name !== false);
  if (events.length === 0) return;
  for (const name of events) metrics.addMetric(name, MetricUnit.Count, 1);
  metrics.publishStoredMetrics();
}

/** Name and codes along an error's cause chain: enough to find a bug, never a message that could hold input. */
export function describeError(error: unknown): Pick<RequestRecord, 'error_name' | 'error_codes'> {
  const codes = causeChain(error)
    .map((cause) => (cause as { code?: unknown }).code)
    .filter((code): code is string => typeof code === 'string');
  const errorName = error instanceof Error ? error.name : typeof error;
  return codes.length > 0 ? { error_name: errorName, error_codes: codes } : { error_name: errorName };
}
