import { Stack } from 'aws-cdk-lib';
import {
  type Alarm,
  AlarmStatusWidget,
  Dashboard,
  GraphWidget,
  type IMetric,
  MathExpression,
  TextWidget,
  type IWidget,
} from 'aws-cdk-lib/aws-cloudwatch';
import type { ITable } from 'aws-cdk-lib/aws-dynamodb';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import { Construct } from 'constructs';
import type { TokenCacheMode } from '../lambda/config';
import { type CacheTier, IDP_FAILURE_OUTCOMES, METRIC_PERIOD, OUTCOMES, type ServiceMetrics } from './service-metrics';
import { tableOperationsSum } from './table-metrics';
import type { ApiMetrics } from './token-api';

export interface ServiceDashboardProps {
  readonly metrics: ServiceMetrics;
  readonly handler: IFunction;
  /** The API's own metrics (an HTTP API, or a REST API's stage). */
  readonly api: ApiMetrics;
  readonly tokenCache: TokenCacheMode;
  /** With the shared cache: its table. */
  readonly table?: ITable;
  /** Shown at the top, in one status widget. */
  readonly alarms: readonly Alarm[];
}

const WIDTH = 8;
const HEIGHT = 6;
const period = { period: METRIC_PERIOD };

/**
 * One CloudWatch dashboard named after the stack and its region: alarms, then what callers got (the API's status
 * classes, the function's outcomes, IdP failures), how long the IdPs take, the cache with a cache,
 * and the function's duration, concurrency and throttles. Every graph is in 5-minute periods.
 */
export class ServiceDashboard extends Construct {
  readonly dashboard: Dashboard;

  constructor(scope: Construct, id: string, props: ServiceDashboardProps) {
    super(scope, id);
    const { metrics, handler, api, tokenCache, table } = props;
    // Dashboard names are global to an account: the region keeps a second region's stack from taking this one.
    const { stackName, region } = Stack.of(this);
    this.dashboard = new Dashboard(this, 'Dashboard', { dashboardName: `${stackName}-${region}` });

    this.dashboard.addWidgets(
      new TextWidget({
        width: 24,
        height: 2,
        markdown: [
          `# ${Stack.of(this).stackName}: OAuth 2.0 token exchange`,
          'What each alarm means and what to check first, the Logs Insights queries and troubleshooting by status: docs/OPERATIONS.md in the service repository.',
        ].join('\n'),
      }),
    );
    this.dashboard.addWidgets(new AlarmStatusWidget({ title: 'Alarms', alarms: [...props.alarms], width: 24, height: 3 }));

    this.dashboard.addWidgets(
      graph('Requests and answers by status class (API Gateway)', [
        api.metricCount({ ...period, statistic: 'Sum', label: 'requests' }),
        api.metricClientError({ ...period, statistic: 'Sum', label: '4xx' }),
        api.metricServerError({ ...period, statistic: 'Sum', label: '5xx' }),
      ]),
      graph(
        'Answers by outcome (function)',
        OUTCOMES.map((outcome) => metrics.requests(outcome, { label: outcome })),
        { stacked: true },
      ),
      graph(
        'IdP failures by outcome',
        IDP_FAILURE_OUTCOMES.map((outcome) => metrics.requests(outcome, { label: outcome })),
        { stacked: true },
      ),
    );

    this.dashboard.addWidgets(
      graph('IdP latency of successful calls (ms)', [metrics.idpLatency('ok', 'p50'), metrics.idpLatency('ok', 'p99')]),
      graph('API latency (ms)', [
        api.metricLatency({ ...period, statistic: 'p50', label: 'p50' }),
        api.metricLatency({ ...period, statistic: 'p99', label: 'p99' }),
        api.metricIntegrationLatency({ ...period, statistic: 'p99', label: 'integration p99' }),
      ]),
      graph(
        'Issuer metadata: fetch latency (ms) and failures by outcome',
        [metrics.metadataLatency('ok', 'p50'), metrics.metadataLatency('ok', 'p99')],
        {
          right: [new MathExpression({ expression: metrics.searchByOutcome('MetadataFailures', 'Sum'), ...period, label: 'failures' })],
        },
      ),
    );

    if (tokenCache !== 'off') this.dashboard.addWidgets(...cacheWidgets(metrics, tokenCache, table));

    this.dashboard.addWidgets(
      graph('Function duration (ms)', [
        handler.metricDuration({ ...period, statistic: 'p50', label: 'p50' }),
        handler.metricDuration({ ...period, statistic: 'p99', label: 'p99' }),
        handler.metricDuration({ ...period, statistic: 'Maximum', label: 'max' }),
      ]),
      graph(
        'Concurrency and throttles',
        [handler.metric('ConcurrentExecutions', { ...period, statistic: 'Maximum', label: 'concurrent executions (max)' })],
        { right: [handler.metricThrottles({ ...period, statistic: 'Sum', label: 'throttles' })] },
      ),
      graph('Invocations, errors and cold starts', [
        handler.metricInvocations({ ...period, statistic: 'Sum', label: 'invocations' }),
        handler.metricErrors({ ...period, statistic: 'Sum', label: 'errors' }),
        metrics.coldStarts(handler.functionName),
      ]),
    );
  }
}

function cacheWidgets(metrics: ServiceMetrics, tokenCache: TokenCacheMode, table: ITable | undefined): IWidget[] {
  const tiers: CacheTier[] = tokenCache === 'shared' ? ['memory', 'shared', 'miss', 'stale'] : ['memory', 'miss', 'stale'];
  const widgets: IWidget[] = [
    graph(
      'Cache answers by tier',
      tiers.map((tier) => metrics.cacheAnswers(tier)),
      { stacked: true },
    ),
    graph('Cache: refreshes ahead, remembered failures, holds', [
      metrics.cacheEvents('CacheRefreshesAhead'),
      metrics.cacheEvents('CacheRememberedFailures'),
      metrics.cacheEvents('CacheHolds'),
    ]),
  ];
  if (table) {
    widgets.push(
      graph('Shared table: latency (ms) and errors', [metrics.cacheTableLatency('p50'), metrics.cacheTableLatency('p99')], {
        right: [
          metrics.cacheEvents('CacheErrors'),
          tableOperationsSum(table, 'SystemErrors', 'table system errors'),
          tableOperationsSum(table, 'ThrottledRequests', 'throttled table requests'),
        ],
      }),
    );
  }
  return widgets;
}

function graph(title: string, left: IMetric[], options: { right?: IMetric[]; stacked?: boolean } = {}): GraphWidget {
  return new GraphWidget({ title, left, right: options.right, stacked: options.stacked, width: WIDTH, height: HEIGHT, ...period });
}
