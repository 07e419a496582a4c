import { Match, type Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { propsFromContext } from '../../infra/app';
import { OUTCOMES } from '../../infra/service-metrics';
import { TokenExchangeStack, type TokenExchangeStackProps } from '../../infra/token-exchange-stack';
import { CONTRACT_ERROR_STATUS } from '../support/contract';
import { newApp, synthesize, withTokenUrlChoice } from './stack-fixture';

type Resource = { Properties: Record<string, unknown> };
type Widget = { type: string; properties: { title?: string; metrics?: unknown[][]; alarms?: unknown[] } };

const TOPIC_ARN = 'arn:aws:sns:eu-west-1:123456789012:ops-alarms';
const NO_CACHE_ALARMS = ['FunctionErrors', 'FunctionThrottles', 'IdpFailureRate', 'InternalErrors', 'LatencyP99', 'ServerErrorRate'];

let defaults: Template;
let shared: Template;
let emailed: { stack: TokenExchangeStack; template: Template };

beforeAll(() => {
  defaults = synthesize().template;
  shared = synthesize({ tokenCache: 'shared' }).template;
  emailed = synthesize({ tokenCache: 'shared', alarmEmail: 'ops@example.com' });
});

function alarms(template: Template): Record<string, Record<string, unknown>> {
  return Object.fromEntries(
    Object.values(template.findResources('AWS::CloudWatch::Alarm')).map((alarm) => {
      const properties = (alarm as Resource).Properties;
      return [String(properties.AlarmName).replace(/^TokenExchangeTest-/, ''), properties];
    }),
  );
}

/** The dashboard's body with every CloudFormation reference replaced by `<ref>`, parsed. */
function dashboardWidgets(template: Template): Widget[] {
  const [dashboard] = Object.values(template.findResources('AWS::CloudWatch::Dashboard')) as Resource[];
  const body = dashboard?.Properties.DashboardBody as { 'Fn::Join': [string, unknown[]] };
  const text = body['Fn::Join'][1].map((part) => (typeof part === 'string' ? part : '<ref>')).join('');
  return (JSON.parse(text) as { widgets: Widget[] }).widgets;
}

const titles = (template: Template): string[] => dashboardWidgets(template).flatMap((widget) => widget.properties.title ?? []);

/** Every metric line of the dashboard as `namespace metric dimension=value...`, dimensions sorted by name. */
function dashboardMetrics(template: Template): string[] {
  return dashboardWidgets(template)
    .flatMap((widget) => widget.properties.metrics ?? [])
    .filter((line) => typeof line[0] === 'string' && line[0] !== '...')
    .map((line) => {
      const [namespace, name, ...rest] = line.filter((part) => typeof part === 'string') as string[];
      const dimensions = [];
      for (let i = 0; i + 1 < rest.length; i += 2) dimensions.push(`${rest[i]}=${rest[i + 1]}`);
      return [namespace, name, ...dimensions.sort()].join(' ');
    });
}

describe('the alarms', () => {
  it('are six without a shared cache, each named after the stack', () => {
    expect(Object.keys(alarms(defaults)).sort()).toEqual(NO_CACHE_ALARMS);
  });

  it("add the cache's table errors, throttles and CacheErrors with the shared cache", () => {
    expect(Object.keys(alarms(shared)).sort()).toEqual([...NO_CACHE_ALARMS, 'CacheErrors', 'TableErrors', 'TableThrottles'].sort());
  });

  it('notify nobody when neither alarmEmail nor alarmTopicArn is set', () => {
    for (const alarm of Object.values(alarms(defaults))) {
      expect([alarm.AlarmActions, alarm.OKActions]).toEqual([undefined, undefined]);
    }
  });

  it('never count missing data (no traffic) as a breach', () => {
    for (const alarm of Object.values(alarms(shared))) expect(alarm.TreatMissingData).toBe('notBreaching');
  });

  it('fire on one failed invocation, one throttle and one internal_error in 5 minutes by default', () => {
    const { FunctionErrors, FunctionThrottles, InternalErrors } = alarms(defaults);

    for (const alarm of [FunctionErrors, FunctionThrottles, InternalErrors]) {
      expect(alarm).toMatchObject({ Threshold: 1, Period: 300, EvaluationPeriods: 1, ComparisonOperator: 'GreaterThanOrEqualToThreshold' });
    }
    expect(InternalErrors).toMatchObject({
      Namespace: 'TokenExchange',
      MetricName: 'Requests',
      Statistic: 'Sum',
      Dimensions: [
        { Name: 'outcome', Value: 'internal_error' },
        { Name: 'service', Value: 'token-exchange' },
      ],
    });
  });

  it('take the IdP failures (upstream_error, upstream_timeout, upstream_throttled) as a percentage of invocations, judged from 20 requests', () => {
    const { IdpFailureRate } = alarms(defaults);

    expect(IdpFailureRate).toMatchObject({
      Threshold: 10,
      EvaluationPeriods: 2,
      DatapointsToAlarm: 2,
      ComparisonOperator: 'GreaterThanThreshold',
    });
    const metrics = IdpFailureRate?.Metrics as { Id: string; Expression?: string; MetricStat?: { Metric: Record<string, unknown> } }[];
    expect(metrics.find((metric) => metric.Expression)?.Expression).toBe(
      'IF(requests >= 20, 100 * (FILL(upstream_error, 0) + FILL(upstream_timeout, 0) + FILL(upstream_throttled, 0)) / requests, 0)',
    );
    expect(metrics.find((metric) => metric.Id === 'requests')?.MetricStat?.Metric).toMatchObject({
      Namespace: 'AWS/Lambda',
      MetricName: 'Invocations',
    });
    expect(metrics.find((metric) => metric.Id === 'upstream_throttled')?.MetricStat?.Metric).toEqual({
      Namespace: 'TokenExchange',
      MetricName: 'Requests',
      Dimensions: [
        { Name: 'outcome', Value: 'upstream_throttled' },
        { Name: 'service', Value: 'token-exchange' },
      ],
    });
  });

  it("take the API's 5xx as a percentage of its requests", () => {
    const metrics = alarms(defaults).ServerErrorRate?.Metrics as {
      Id: string;
      Expression?: string;
      MetricStat?: { Metric: Record<string, unknown> };
    }[];

    expect(metrics.find((metric) => metric.Expression)?.Expression).toBe('IF(requests >= 20, 100 * FILL(errors, 0) / requests, 0)');
    expect(metrics.find((metric) => metric.Id === 'errors')?.MetricStat?.Metric).toMatchObject({
      Namespace: 'AWS/ApiGateway',
      MetricName: '5xx',
    });
  });

  it("put the API's p99 latency threshold at half the upstream deadline by default", () => {
    const { template } = synthesize({ upstreamTimeoutMs: 8000, functionTimeout: undefined });
    const fast = alarms(template).LatencyP99;

    expect(alarms(defaults).LatencyP99?.Threshold).toBe(2500);
    expect(fast?.Threshold).toBe(4000);
  });

  it('take every threshold from alarmThresholds', () => {
    const { template } = synthesize({
      tokenCache: 'shared',
      alarmThresholds: {
        functionErrors: 3,
        functionThrottles: 4,
        serverErrorPercent: 2.5,
        idpFailurePercent: 25,
        latencyP99Ms: 1200,
        internalErrors: 2,
        cacheErrors: 50,
        tableErrors: 6,
        tableThrottles: 7,
        minRequests: 100,
      },
    });
    const found = alarms(template);

    expect(Object.fromEntries(Object.entries(found).map(([name, alarm]) => [name, alarm.Threshold]))).toEqual({
      FunctionErrors: 3,
      FunctionThrottles: 4,
      ServerErrorRate: 2.5,
      IdpFailureRate: 25,
      LatencyP99: 1200,
      InternalErrors: 2,
      CacheErrors: 50,
      TableErrors: 6,
      TableThrottles: 7,
    });
    expect(JSON.stringify(found.IdpFailureRate?.Metrics)).toContain('IF(requests >= 100,');
  });

  it("watch the table's system errors and throttled requests on the function's three operations", () => {
    const metrics = alarms(shared).TableThrottles?.Metrics as {
      MetricStat?: { Metric: { MetricName: string; Dimensions: { Name: string; Value: unknown }[] } };
    }[];

    const operations = metrics.flatMap(
      (metric) => metric.MetricStat?.Metric.Dimensions.find((dimension) => dimension.Name === 'Operation')?.Value ?? [],
    );
    expect(operations).toEqual(['GetItem', 'PutItem']);
    expect(metrics.flatMap((metric) => metric.MetricStat?.Metric.MetricName ?? [])).toEqual(Array(2).fill('ThrottledRequests'));
  });

  it('describe what they mean and what to check first', () => {
    for (const [name, alarm] of Object.entries(alarms(shared))) {
      expect({ name, description: alarm.AlarmDescription }).toEqual({
        name,
        description: expect.stringMatching(/First check: .+docs\/OPERATIONS\.md/),
      });
    }
  });

  it('use the metrics namespace of the stack', () => {
    const { template } = synthesize({ metricsNamespace: 'Acme/Tokens' });

    expect(alarms(template).InternalErrors?.Namespace).toBe('Acme/Tokens');
  });
});

describe('alarmEmail', () => {
  it('creates a topic encrypted with a rotating key of its own, and subscribes the address', () => {
    const key = Object.keys(emailed.template.findResources('AWS::KMS::Key'));

    expect(key).toHaveLength(1);
    emailed.template.hasResourceProperties('AWS::KMS::Key', { EnableKeyRotation: true });
    emailed.template.hasResourceProperties('AWS::SNS::Topic', { KmsMasterKeyId: { 'Fn::GetAtt': [key[0], 'Arn'] } });
    emailed.template.hasResourceProperties('AWS::SNS::Subscription', { Protocol: 'email', Endpoint: 'ops@example.com' });
  });

  it('lets CloudWatch alarms of this account use the key and publish to the topic, over TLS only', () => {
    emailed.template.hasResourceProperties('AWS::KMS::Key', {
      KeyPolicy: {
        Statement: Match.arrayWith([
          Match.objectLike({
            Principal: { Service: 'cloudwatch.amazonaws.com' },
            Action: ['kms:Decrypt', 'kms:GenerateDataKey*'],
            Condition: Match.objectLike({ StringEquals: { 'aws:SourceAccount': { Ref: 'AWS::AccountId' } } }),
          }),
        ]),
      },
    });
    emailed.template.hasResourceProperties('AWS::SNS::TopicPolicy', {
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
          Match.objectLike({ Effect: 'Allow', Principal: { Service: 'cloudwatch.amazonaws.com' }, Action: 'sns:Publish' }),
        ]),
      },
    });
  });

  it('wires every alarm to the topic, when it fires and when it is OK again', () => {
    const topic = Object.keys(emailed.template.findResources('AWS::SNS::Topic'))[0];

    for (const [name, alarm] of Object.entries(alarms(emailed.template))) {
      expect({ name, actions: [alarm.AlarmActions, alarm.OKActions] }).toEqual({ name, actions: [[{ Ref: topic }], [{ Ref: topic }]] });
    }
  });

  it('passes the AwsSolutions checks with nothing more acknowledged', () => {
    expect(new AwsSolutionsChecks().validateScope(emailed.stack).violations.map((violation) => violation.ruleName)).toEqual([]);
  });
});

describe('alarmTopicArn', () => {
  it('wires every alarm to that topic and creates none', () => {
    const { template } = synthesize({ alarmTopicArn: TOPIC_ARN });

    template.resourceCountIs('AWS::SNS::Topic', 0);
    for (const alarm of Object.values(alarms(template))) expect([alarm.AlarmActions, alarm.OKActions]).toEqual([[TOPIC_ARN], [TOPIC_ARN]]);
  });
});

describe('the dashboard', () => {
  it('is one, named after the stack and its region (names are global to an account), and its URL is an output', () => {
    defaults.resourceCountIs('AWS::CloudWatch::Dashboard', 1);
    defaults.hasResourceProperties('AWS::CloudWatch::Dashboard', {
      DashboardName: { 'Fn::Join': ['', ['TokenExchangeTest-', { Ref: 'AWS::Region' }]] },
    });
    expect(JSON.stringify(defaults.findOutputs('DashboardUrl'))).toContain('"#dashboards/dashboard/",{"Ref":"MonitoringDashboard');
  });

  it('shows every alarm in one status widget', () => {
    const status = dashboardWidgets(shared).find((widget) => widget.type === 'alarm');

    expect(status?.properties.alarms).toHaveLength(9);
  });

  it('shows requests and answers by status class, IdP latency and failures, and the function, without a cache', () => {
    expect(titles(defaults)).toEqual([
      'Alarms',
      'Requests and answers by status class (API Gateway)',
      'Answers by outcome (function)',
      'IdP failures by outcome',
      'IdP latency of successful calls (ms)',
      'API latency (ms)',
      'Issuer metadata: fetch latency (ms) and failures by outcome',
      'Function duration (ms)',
      'Concurrency and throttles',
      'Invocations, errors and cold starts',
    ]);
  });

  it('graphs the API Gateway metrics Count, 4xx and 5xx of the API', () => {
    const lines = dashboardMetrics(defaults).filter((line) => line.startsWith('AWS/ApiGateway '));

    expect(lines).toEqual(
      expect.arrayContaining(['AWS/ApiGateway Count ApiId=<ref>', 'AWS/ApiGateway 4xx ApiId=<ref>', 'AWS/ApiGateway 5xx ApiId=<ref>']),
    );
  });

  it("graphs every outcome of the function's Requests, and the IdP's latency of successful calls", () => {
    const lines = dashboardMetrics(defaults);

    for (const outcome of OUTCOMES) expect(lines).toContain(`TokenExchange Requests outcome=${outcome} service=token-exchange`);
    expect(lines).toContain('TokenExchange IdpLatency outcome=ok service=token-exchange');
  });

  it('graphs cold starts by the function name Powertools gives them', () => {
    expect(dashboardMetrics(defaults)).toContain('TokenExchange ColdStart function_name=<ref> service=token-exchange');
  });

  it('adds the cache answers by tier and its events with the memory cache', () => {
    const { template } = synthesize({ tokenCache: 'memory' });
    const lines = dashboardMetrics(template);

    expect(titles(template)).toEqual(
      expect.arrayContaining(['Cache answers by tier', 'Cache: refreshes ahead, remembered failures, holds']),
    );
    expect(lines).toEqual(
      expect.arrayContaining([
        'TokenExchange CacheHits service=token-exchange tier=memory',
        'TokenExchange CacheMisses service=token-exchange tier=miss',
        'TokenExchange CacheStale service=token-exchange tier=stale',
        'TokenExchange CacheHolds service=token-exchange',
      ]),
    );
    expect(lines).not.toContain('TokenExchange CacheHits service=token-exchange tier=shared');
    expect(titles(template)).not.toContain('Shared table: latency (ms) and errors');
  });

  it("adds the shared tier's hits and the table's latency and errors with the shared cache", () => {
    const lines = dashboardMetrics(shared);

    expect(titles(shared)).toContain('Shared table: latency (ms) and errors');
    expect(lines).toEqual(
      expect.arrayContaining([
        'TokenExchange CacheHits service=token-exchange tier=shared',
        'TokenExchange CacheTableLatency service=token-exchange tier=shared',
        'TokenExchange CacheErrors service=token-exchange',
      ]),
    );
  });

  it('shows no cache widget without a cache', () => {
    expect(dashboardMetrics(defaults).filter((line) => line.includes(' Cache'))).toEqual([]);
  });
});

describe('the Logs Insights queries', () => {
  const names = (template: Template): string[] =>
    Object.values(template.findResources('AWS::Logs::QueryDefinition')).map((query) => String((query as Resource).Properties.Name));

  it('answer which callers fail, which IdPs fail or are slow, and the bugs, in a folder named after the stack', () => {
    expect(names(defaults).sort()).toEqual([
      'TokenExchangeTest/failures-by-caller',
      'TokenExchangeTest/failures-by-idp',
      'TokenExchangeTest/gateway-errors',
      'TokenExchangeTest/internal-errors',
      'TokenExchangeTest/slow-idps',
    ]);
  });

  it('add how the cache answers with a cache', () => {
    expect(names(shared)).toContain('TokenExchangeTest/cache-behaviour');
  });

  it('group the failures of IdPs by host, outcome and status, from the function log group', () => {
    defaults.hasResourceProperties('AWS::Logs::QueryDefinition', {
      Name: 'TokenExchangeTest/failures-by-idp',
      QueryString: Match.stringLikeRegexp(
        'filter outcome != "ok"[\\s\\S]*stats count\\(\\*\\) as failures by idp_host, outcome, status, idp_status',
      ),
      LogGroupNames: [{ Ref: Match.stringLikeRegexp('^FunctionLogs') }],
    });
  });

  it('tell callers apart by source IP and user agent, from the access log (the function logs no client id)', () => {
    defaults.hasResourceProperties('AWS::Logs::QueryDefinition', {
      Name: 'TokenExchangeTest/failures-by-caller',
      QueryString: Match.stringLikeRegexp('by sourceIp, userAgent, status'),
      LogGroupNames: [{ Ref: Match.stringLikeRegexp('^AccessLogs') }],
    });
  });
});

describe('monitoring off', () => {
  it('leaves out the dashboard, the alarms and the queries', () => {
    const { template } = synthesize({ monitoring: false });

    template.resourceCountIs('AWS::CloudWatch::Dashboard', 0);
    template.resourceCountIs('AWS::CloudWatch::Alarm', 0);
    template.resourceCountIs('AWS::Logs::QueryDefinition', 0);
    expect(template.findOutputs('DashboardUrl')).toEqual({});
  });

  it('stops the function publishing its custom metrics, which nothing would read and CloudWatch would bill', () => {
    const off = synthesize({ monitoring: false }).template;

    off.hasResourceProperties('AWS::Lambda::Function', {
      Environment: { Variables: Match.objectLike({ POWERTOOLS_METRICS_DISABLED: 'true' }) },
    });
    defaults.hasResourceProperties('AWS::Lambda::Function', {
      Environment: { Variables: Match.objectLike({ POWERTOOLS_METRICS_DISABLED: Match.absent() }) },
    });
  });
});

describe('monitoring settings validation', () => {
  const construct = (props: TokenExchangeStackProps) => () =>
    new TokenExchangeStack(newApp({ bundle: false }), 'AlarmTest', withTokenUrlChoice({ ...props }));

  it.each<[string, TokenExchangeStackProps, RegExp]>([
    [
      'both alarmEmail and alarmTopicArn',
      { alarmEmail: 'ops@example.com', alarmTopicArn: TOPIC_ARN },
      /alarmEmail and alarmTopicArn are two ways to deliver the alarms: give one/,
    ],
    [
      'an alarmEmail that is no address',
      { alarmEmail: 'ops at example.com' },
      /alarmEmail must be one email address, got "ops at example.com"/,
    ],
    ['two addresses', { alarmEmail: 'a@example.com,b@example.com' }, /alarmEmail must be one email address/],
    ['an alarmTopicArn that is no topic ARN', { alarmTopicArn: 'ops-alarms' }, /alarmTopicArn must be a standard SNS topic ARN/],
    [
      'alarmEmail with monitoring off',
      { monitoring: false, alarmEmail: 'ops@example.com' },
      /alarmEmail needs monitoring on \(it is off\)/,
    ],
    [
      'thresholds with monitoring off',
      { monitoring: false, alarmThresholds: { functionErrors: 2 } },
      /alarmThresholds.functionErrors needs monitoring on \(it is off\)/,
    ],
    [
      'a percentage over 100',
      { alarmThresholds: { idpFailurePercent: 101 } },
      /alarmThresholds.idpFailurePercent must be a percentage above 0 and at most 100, got 101/,
    ],
    [
      'a percentage of 0',
      { alarmThresholds: { serverErrorPercent: 0 } },
      /alarmThresholds.serverErrorPercent must be a percentage above 0/,
    ],
    [
      'a latency past the integration limit',
      { alarmThresholds: { latencyP99Ms: 30_001 } },
      /alarmThresholds.latencyP99Ms must be a whole number of milliseconds from 1 to 30000, got 30001/,
    ],
    [
      'a fractional count',
      { alarmThresholds: { functionErrors: 1.5 } },
      /alarmThresholds.functionErrors must be a whole number of at least 1, got 1.5/,
    ],
    [
      'a minimum of 0 requests',
      { alarmThresholds: { minRequests: 0 } },
      /alarmThresholds.minRequests must be a whole number of at least 1, got 0/,
    ],
  ])('refuses %s, naming the setting', (_case, props, message) => {
    expect(construct(props)).toThrow(message);
  });
});

describe('monitoring settings from context', () => {
  it('reads monitoring, where the alarms go and each threshold from its context key', () => {
    const context: Record<string, string> = {
      monitoring: 'on',
      alarmEmail: 'ops@example.com',
      alarmFunctionErrors: '2',
      alarmFunctionThrottles: '3',
      alarmServerErrorPercent: '4.5',
      alarmIdpFailurePercent: '20',
      alarmLatencyP99Ms: '1500',
      alarmInternalErrors: '5',
      alarmCacheErrors: '6',
      alarmTableErrors: '7',
      alarmTableThrottles: '8',
      alarmMinRequests: '50',
    };

    const props = propsFromContext((key) => context[key]);

    expect(props).toMatchObject({
      monitoring: true,
      alarmEmail: 'ops@example.com',
      alarmThresholds: {
        functionErrors: 2,
        functionThrottles: 3,
        serverErrorPercent: 4.5,
        idpFailurePercent: 20,
        latencyP99Ms: 1500,
        internalErrors: 5,
        cacheErrors: 6,
        tableErrors: 7,
        tableThrottles: 8,
        minRequests: 50,
      },
    });
  });

  it('leaves the thresholds to their defaults when no context key sets one', () => {
    expect(propsFromContext(() => undefined).alarmThresholds).toBeUndefined();
  });
});

describe('the metrics contract', () => {
  it("names every code of the function's error table as an outcome", () => {
    expect([...OUTCOMES].sort()).toEqual(['ok', ...Object.keys(CONTRACT_ERROR_STATUS)].sort());
  });
});
