import { Duration } from 'aws-cdk-lib';
import { Metric, type MetricOptions } from 'aws-cdk-lib/aws-cloudwatch';
import { ERROR_STATUS, type ErrorCode } from '../lambda/errors';

// The function's own metrics, as its EMF lines publish them (Powertools Metrics): written from the
// observability contract rather than read from lambda/observability.ts, so the dashboard and alarms
// say what the function promises to emit. The outcomes are the error table's codes.

/** The `service` dimension every metric of the function carries. */
export const SERVICE_NAME = 'token-exchange';

/** The `outcome` dimension: `ok` or the error code the request was answered with. */
export const OUTCOMES: readonly Outcome[] = ['ok', ...(Object.keys(ERROR_STATUS) as ErrorCode[])];
export type Outcome = 'ok' | ErrorCode;

/** The outcomes that say the IdP failed the request: unreachable or broken, asking to wait, or too slow. */
export const IDP_FAILURE_OUTCOMES = ['upstream_error', 'upstream_timeout', 'upstream_throttled'] as const satisfies readonly Outcome[];

/** The `tier` dimension of the cache's line: which tier answered, or `miss` (the IdP did), or `stale`. */
export type CacheTier = 'memory' | 'shared' | 'miss' | 'stale';

/** The cache's per-request counters, dimensioned by `service` alone. */
export type CacheEvent = 'CacheErrors' | 'CacheRefreshesAhead' | 'CacheRememberedFailures' | 'CacheHolds';

/** The period every widget and alarm of the stack works in. */
export const METRIC_PERIOD = Duration.minutes(5);

/** The function's metrics in its namespace (the stack's `metricsNamespace`). */
export class ServiceMetrics {
  constructor(readonly namespace: string) {}

  /** `Requests`: one per request, by the outcome it was answered with. */
  requests(outcome: Outcome, options: MetricOptions = {}): Metric {
    return this.metric('Requests', { outcome }, { statistic: 'Sum', ...options });
  }

  /** `IdpLatency` (ms) of the requests that called the IdP and ended with `outcome`. */
  idpLatency(outcome: Outcome, statistic: string): Metric {
    return this.metric('IdpLatency', { outcome }, { statistic, label: `IdP ${statistic}` });
  }

  /** `MetadataLatency` (ms) of issuer metadata fetches, for requests that ended with `outcome`. */
  metadataLatency(outcome: Outcome, statistic: string): Metric {
    return this.metric('MetadataLatency', { outcome }, { statistic, label: `metadata ${statistic}` });
  }

  /** `CacheHits` (tier memory or shared), `CacheMisses` (miss) or `CacheStale` (stale): one per answer of a cached request. */
  cacheAnswers(tier: CacheTier): Metric {
    const name = tier === 'miss' ? 'CacheMisses' : tier === 'stale' ? 'CacheStale' : 'CacheHits';
    return this.metric(name, { tier }, { statistic: 'Sum', label: tier });
  }

  /** `CacheTableLatency` (ms): time spent in shared-table calls by a request the table answered. */
  cacheTableLatency(statistic: string): Metric {
    return this.metric('CacheTableLatency', { tier: 'shared' }, { statistic, label: `table ${statistic}` });
  }

  /** One of the cache's counters (`CacheErrors`: a shared-table call failed). */
  cacheEvents(name: CacheEvent): Metric {
    return this.metric(name, {}, { statistic: 'Sum' });
  }

  /** Powertools' `ColdStart`, once per instance, dimensioned by the function's name. */
  coldStarts(functionName: string): Metric {
    return new Metric({
      namespace: this.namespace,
      metricName: 'ColdStart',
      dimensionsMap: { service: SERVICE_NAME, function_name: functionName },
      statistic: 'Sum',
      period: METRIC_PERIOD,
      label: 'cold starts',
    });
  }

  /**
   * A SEARCH over every `outcome` of a metric (for the dashboard; alarms cannot search): one line per
   * outcome that has data, so an outcome added later shows without a change here.
   */
  searchByOutcome(metricName: string, statistic: string): string {
    const namespace = JSON.stringify(this.namespace);
    return `SEARCH('{${namespace},outcome,service} MetricName="${metricName}" service="${SERVICE_NAME}"', '${statistic}', ${METRIC_PERIOD.toSeconds()})`;
  }

  private metric(metricName: string, dimensions: Record<string, string>, options: MetricOptions): Metric {
    return new Metric({
      namespace: this.namespace,
      metricName,
      dimensionsMap: { service: SERVICE_NAME, ...dimensions },
      period: METRIC_PERIOD,
      ...options,
    });
  }
}
