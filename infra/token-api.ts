import { Duration } from 'aws-cdk-lib';
import type { DomainName } from 'aws-cdk-lib/aws-apigatewayv2';
import type { Metric, MetricOptions } from 'aws-cdk-lib/aws-cloudwatch';
import type { ILogGroup } from 'aws-cdk-lib/aws-logs';
import type { Construct } from 'constructs';

/** Which API Gateway fronts the function: an HTTP API (payload 2.0) or a REST API (payload 1.0). */
export type ApiKind = 'http' | 'rest';
export const API_KINDS: readonly ApiKind[] = ['http', 'rest'];

/** The API's own metrics, as both kinds of API (the HTTP API, the REST API's stage) give them. */
export interface ApiMetrics {
  metricCount(options?: MetricOptions): Metric;
  metricClientError(options?: MetricOptions): Metric;
  metricServerError(options?: MetricOptions): Metric;
  metricLatency(options?: MetricOptions): Metric;
  metricIntegrationLatency(options?: MetricOptions): Metric;
}

/** What the rest of the stack needs of the API, whichever kind it is. */
export interface TokenApi {
  readonly kind: ApiKind;
  /** The stage's URL, ending with `/`. */
  readonly url: string;
  readonly metrics: ApiMetrics;
  /** API Gateway's JSON access log of every request. */
  readonly accessLogs: ILogGroup;
  /** The token routes' ARNs a caller needs `execute-api:Invoke` on. */
  readonly invokeArns: readonly string[];
  /** Map the stage to a custom domain, as `id` under `scope`. */
  mapDomain(scope: Construct, id: string, domain: DomainName): void;
}

/** API Gateway answers on its own after this long, whatever the function does: the function must finish first. */
export const INTEGRATION_LIMITS: Readonly<Record<ApiKind, { limit: Duration; words: string }>> = {
  http: { limit: Duration.seconds(30), words: "the HTTP API's 30 s integration limit" },
  rest: { limit: Duration.seconds(29), words: "the REST API's 29 s integration timeout" },
};

/**
 * The access log's fields common to both APIs: who called which route, what came back, and what the
 * function and API Gateway reported. No headers, query or body, so nothing a caller sent can leak
 * into the logs. `routeKey` is `METHOD /path` on both, so the saved queries read either.
 */
export const ACCESS_LOG_FIELDS = {
  requestId: '$context.requestId',
  requestTime: '$context.requestTime',
  sourceIp: '$context.identity.sourceIp',
  userAgent: '$context.identity.userAgent',
  protocol: '$context.protocol',
  httpMethod: '$context.httpMethod',
  status: '$context.status',
  responseLength: '$context.responseLength',
  responseLatency: '$context.responseLatency',
  integrationStatus: '$context.integration.status',
  integrationLatency: '$context.integration.latency',
  integrationError: '$context.integration.error',
  errorMessage: '$context.error.message',
} as const;

/** With IAM callers, the principal and account API Gateway verified. */
export const CALLER_LOG_FIELDS = { callerArn: '$context.identity.userArn', callerAccountId: '$context.identity.accountId' } as const;
