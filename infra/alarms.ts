import { Stack } from 'aws-cdk-lib';
import { Alarm, ComparisonOperator, type IMetric, MathExpression, TreatMissingData } from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import type { ITable } from 'aws-cdk-lib/aws-dynamodb';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import type { ITopic } from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';
import { IDP_FAILURE_OUTCOMES, METRIC_PERIOD, type ServiceMetrics } from './service-metrics';
import type { SettingProblem } from './setting-problems';
import { tableOperationsSum } from './table-metrics';
import type { ApiMetrics } from './token-api';

/** When each alarm fires; every count and rate is over one 5-minute period. */
export interface AlarmThresholds {
  /** Failed invocations (a crash or a Lambda timeout: the handler itself never fails one). @default 1 */
  readonly functionErrors?: number;
  /** Invocations Lambda refused for want of concurrency. @default 1 */
  readonly functionThrottles?: number;
  /** The API's 5xx answers, in percent of its requests, two periods in a row. @default 5 */
  readonly serverErrorPercent?: number;
  /** Requests answered `upstream_error`, `upstream_timeout` or `upstream_throttled`, in percent of all, two periods in a row. @default 10 */
  readonly idpFailurePercent?: number;
  /** p99 of the API's latency in milliseconds, two periods in a row. @default half of upstreamTimeoutMs */
  readonly latencyP99Ms?: number;
  /** Requests answered `internal_error` (a bug). @default 1 */
  readonly internalErrors?: number;
  /** With the shared cache: requests whose table call failed (`CacheErrors`). @default 5 */
  readonly cacheErrors?: number;
  /** With the shared cache: the table's system errors (DynamoDB 5xx) on the function's operations. @default 1 */
  readonly tableErrors?: number;
  /** With the shared cache: the function's table requests DynamoDB throttled. @default 1 */
  readonly tableThrottles?: number;
  /** The rate and latency alarms judge only a period with at least this many requests. @default 20 */
  readonly minRequests?: number;
}

/** The defaults of the thresholds that do not depend on another setting. */
export const ALARM_THRESHOLD_DEFAULTS = {
  functionErrors: 1,
  functionThrottles: 1,
  serverErrorPercent: 5,
  idpFailurePercent: 10,
  internalErrors: 1,
  cacheErrors: 5,
  tableErrors: 1,
  tableThrottles: 1,
  minRequests: 20,
} as const satisfies AlarmThresholds;

/** No answer through the HTTP API takes longer than its 30-second integration limit. */
const MAX_LATENCY_THRESHOLD_MS = 30_000;
const PERCENT_THRESHOLDS: readonly (keyof AlarmThresholds)[] = ['serverErrorPercent', 'idpFailurePercent'];

/** One message per threshold out of its range, naming it: percentages, a latency, whole counts. */
export function alarmThresholdProblems(thresholds: AlarmThresholds): SettingProblem[] {
  const problems: SettingProblem[] = [];
  for (const [threshold, value] of Object.entries(thresholds) as [keyof AlarmThresholds, number | undefined][]) {
    if (value === undefined) continue;
    const prop = `alarmThresholds.${threshold}`;
    if (PERCENT_THRESHOLDS.includes(threshold)) {
      if (!(Number.isFinite(value) && value > 0 && value <= 100)) {
        problems.push((name) => `${name(prop)} must be a percentage above 0 and at most 100, got ${value}`);
      }
    } else if (threshold === 'latencyP99Ms') {
      if (!(Number.isInteger(value) && value >= 1 && value <= MAX_LATENCY_THRESHOLD_MS)) {
        problems.push((name) => `${name(prop)} must be a whole number of milliseconds from 1 to ${MAX_LATENCY_THRESHOLD_MS}, got ${value}`);
      }
    } else if (!(Number.isInteger(value) && value >= 1)) {
      problems.push((name) => `${name(prop)} must be a whole number of at least 1, got ${value}`);
    }
  }
  return problems;
}

export interface ServiceAlarmsProps {
  readonly metrics: ServiceMetrics;
  readonly handler: IFunction;
  /** The API's own metrics (an HTTP API, or a REST API's stage). */
  readonly api: ApiMetrics;
  /** With the shared cache: its table, whose errors and throttles get alarms too. */
  readonly table?: ITable;
  readonly thresholds: Required<AlarmThresholds>;
  /** Told when an alarm fires and when it is OK again. None: the alarms only show in CloudWatch. */
  readonly topic?: ITopic;
}

const SEE = 'See docs/OPERATIONS.md, Alarms.';

/**
 * The service's alarms, named `<stack>-<Alarm>`: the function failing or throttled, the API's 5xx and
 * latency, the IdPs failing, bugs, and with the shared cache its table. Missing data (no traffic) is
 * never a breach.
 */
export class ServiceAlarms extends Construct {
  readonly alarms: Alarm[] = [];

  constructor(
    scope: Construct,
    id: string,
    private readonly props: ServiceAlarmsProps,
  ) {
    super(scope, id);
    const { metrics, handler, api, table, thresholds: t } = props;
    const period = { period: METRIC_PERIOD };
    // Rates and percentiles judge only a period with enough requests: one failure out of three is no outage.
    const enough = `requests >= ${t.minRequests}`;

    this.count('FunctionErrors', handler.metricErrors({ ...period, statistic: 'Sum' }), t.functionErrors, {
      what: 'Invocations of the function failed: it crashed, ran out of memory or hit its timeout (the handler answers every request, so this is never an IdP answer).',
      check: 'the function log group for REPORT lines with "Status: error" or "timeout", then the last deploy',
    });
    this.count('FunctionThrottles', handler.metricThrottles({ ...period, statistic: 'Sum' }), t.functionThrottles, {
      what: "Lambda refused invocations for want of concurrency; those callers got API Gateway's own 5xx, not the function's answer.",
      check:
        'ConcurrentExecutions against reservedConcurrency or the account limit, and whether a burst or a slow IdP holds instances busy',
    });
    this.rate(
      'ServerErrorRate',
      `IF(${enough}, 100 * FILL(errors, 0) / requests, 0)`,
      { requests: api.metricCount({ ...period, statistic: 'Sum' }), errors: api.metricServerError({ ...period, statistic: 'Sum' }) },
      t.serverErrorPercent,
      {
        what: `More than ${t.serverErrorPercent}% of the API's answers were 5xx: the function's 502/504 (an IdP failing, which IdpFailureRate tells apart), its 500, or API Gateway's own 500/503.`,
        check: 'the access log for status and integrationError, then IdpFailureRate and FunctionErrors',
      },
    );
    this.rate(
      'IdpFailureRate',
      `IF(${enough}, 100 * (${IDP_FAILURE_OUTCOMES.map((outcome) => `FILL(${outcome}, 0)`).join(' + ')}) / requests, 0)`,
      {
        // Every request is one invocation: with 3 outcomes beside it, the expression stays within an alarm's 10 metrics.
        requests: handler.metricInvocations({ ...period, statistic: 'Sum' }),
        ...Object.fromEntries(IDP_FAILURE_OUTCOMES.map((outcome) => [outcome, metrics.requests(outcome)])),
      },
      t.idpFailurePercent,
      {
        what: `More than ${t.idpFailurePercent}% of requests ended in ${IDP_FAILURE_OUTCOMES.join(', ')}: an IdP is down, slow past UPSTREAM_TIMEOUT_MS or throttling the service.`,
        check: "the Logs Insights query failures-by-idp for the idp_host and idp_status, then that IdP's status page",
      },
    );
    this.rate(
      'LatencyP99',
      `IF(${enough}, latency, 0)`,
      { requests: api.metricCount({ ...period, statistic: 'Sum' }), latency: api.metricLatency({ ...period, statistic: 'p99' }) },
      t.latencyP99Ms,
      {
        what: `The API's p99 latency was over ${t.latencyP99Ms} ms: an IdP is slow (timeouts come next), or cold starts pile up.`,
        check: "the Logs Insights query slow-idps, then the dashboard's IdP latency and cold starts",
      },
    );
    this.count('InternalErrors', metrics.requests('internal_error'), t.internalErrors, {
      what: 'Requests were answered 500 internal_error: a bug.',
      check: 'the Logs Insights query internal-errors for error_name and error_codes, then the last deploy (roll back if it is new)',
    });

    if (table) {
      this.count('CacheErrors', metrics.cacheEvents('CacheErrors'), t.cacheErrors, {
        what: 'Calls to the shared cache table failed; those requests went to the IdP instead (no caller saw an error).',
        check:
          'cache_error in the Logs Insights query cache-behaviour (AccessDeniedException, ResourceNotFoundException, TimeoutError...), then TableErrors and TableThrottles',
      });
      this.count('TableErrors', tableOperationsSum(table, 'SystemErrors', 'system errors'), t.tableErrors, {
        what: "DynamoDB answered the cache table's calls with internal errors (5xx).",
        check: 'the AWS Health Dashboard for DynamoDB in this region; the cache falls back to the IdP meanwhile',
      });
      this.count('TableThrottles', tableOperationsSum(table, 'ThrottledRequests', 'throttled requests'), t.tableThrottles, {
        what: "DynamoDB throttled the cache table's calls (an on-demand table past its account or partition limits).",
        check: "the table's consumed capacity and the account's on-demand limits; a hot key is one token requested very often",
      });
    }
  }

  /** Fires when a count reaches its threshold in one period. */
  private count(name: string, metric: IMetric, threshold: number, text: { what: string; check: string }): void {
    this.add(name, metric, threshold, 1, ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD, text);
  }

  /** Fires when a metric math rate (or a percentile) is over its threshold two periods in a row. */
  private rate(
    name: string,
    expression: string,
    usingMetrics: Record<string, IMetric>,
    threshold: number,
    text: { what: string; check: string },
  ) {
    const math = new MathExpression({
      expression,
      usingMetrics,
      period: METRIC_PERIOD,
      label: name,
    });
    this.add(name, math, threshold, 2, ComparisonOperator.GREATER_THAN_THRESHOLD, text);
  }

  private add(
    name: string,
    metric: IMetric,
    threshold: number,
    periods: number,
    comparisonOperator: ComparisonOperator,
    text: { what: string; check: string },
  ): void {
    const alarm = new Alarm(this, name, {
      alarmName: `${Stack.of(this).stackName}-${name}`,
      alarmDescription: `${text.what} First check: ${text.check}. ${SEE}`,
      metric,
      threshold,
      comparisonOperator,
      evaluationPeriods: periods,
      datapointsToAlarm: periods,
      treatMissingData: TreatMissingData.NOT_BREACHING,
    });
    if (this.props.topic) {
      alarm.addAlarmAction(new SnsAction(this.props.topic));
      alarm.addOkAction(new SnsAction(this.props.topic));
    }
    this.alarms.push(alarm);
  }
}
