import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { Context } from 'aws-lambda';
import type { LogLevel } from './config';
import { causeChain, type ErrorCode } from './errors';

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
  idp_host?: string;
  idp_status?: number;
  idp_latency_ms?: number;
  cache?: 'hit' | 'miss';
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
 * latency, cache hits, and Powertools' own ColdStart) in the namespace Powertools reads from
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
      if (entry.outcome === 'internal_error') logger.error('token request', { ...entry });
      else if (entry.status >= 500) logger.warn('token request', { ...entry });
      else logger.info('token request', { ...entry });

      metrics.addDimension('outcome', entry.outcome);
      metrics.addMetric('Requests', MetricUnit.Count, 1);
      if (entry.idp_latency_ms !== undefined) metrics.addMetric('IdpLatency', MetricUnit.Milliseconds, entry.idp_latency_ms);
      if (entry.cache === 'hit') metrics.addMetric('CacheHits', MetricUnit.Count, 1);
      metrics.publishStoredMetrics();
    },
  };
}

/** Name and codes along an error's cause chain: enough to find a bug, never a message that could hold input. */
export function describeError(error: unknown): Pick<RequestRecord, 'error_name' | 'error_codes'> {
  const codes = causeChain(error)
    .map((cause) => (cause as { code?: unknown }).code)
    .filter((code): code is string => typeof code === 'string');
  const errorName = error instanceof Error ? error.name : typeof error;
  return codes.length > 0 ? { error_name: errorName, error_codes: codes } : { error_name: errorName };
}
