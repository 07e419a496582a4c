import type { Alarm, Dashboard } from 'aws-cdk-lib/aws-cloudwatch';
import type { ITable } from 'aws-cdk-lib/aws-dynamodb';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import type { ILogGroup } from 'aws-cdk-lib/aws-logs';
import { type ITopic, Topic } from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';
import type { TokenCacheMode } from '../lambda/config';
import { AlarmTopic } from './alarm-topic';
import { type AlarmThresholds, alarmThresholdProblems, ServiceAlarms } from './alarms';
import { ServiceDashboard } from './dashboard';
import { LogQueries } from './log-queries';
import { ServiceMetrics } from './service-metrics';
import type { SettingProblem } from './setting-problems';
import type { ApiMetrics } from './token-api';

export interface MonitoringProps {
  /** The namespace of the function's EMF metrics (`metricsNamespace`). */
  readonly metricsNamespace: string;
  readonly handler: IFunction;
  /** The API's own metrics (an HTTP API, or a REST API's stage). */
  readonly api: ApiMetrics;
  readonly functionLogs: ILogGroup;
  readonly accessLogs: ILogGroup;
  readonly tokenCache: TokenCacheMode;
  /** With `iam`, the access log names each caller's principal. */
  readonly callerAuthorization: 'none' | 'iam';
  /** With the shared cache: its table. */
  readonly table?: ITable;
  readonly thresholds: Required<AlarmThresholds>;
  /** Creates an encrypted topic with this address subscribed, for every alarm. */
  readonly alarmEmail?: string;
  /** An existing topic for every alarm (its policy and key must let CloudWatch publish). */
  readonly alarmTopicArn?: string;
}

/** The monitoring settings of the stack, as the stack's props name them. */
export interface MonitoringSettings {
  readonly monitoring: boolean;
  readonly alarmEmail?: string;
  readonly alarmTopicArn?: string;
  readonly alarmThresholds?: AlarmThresholds;
}

const EMAIL = /^[^\s@,]+@[^\s@,]+\.[^\s@,]+$/;
const SNS_TOPIC_ARN = /^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}$/;

/** One message per problem, naming the setting: the alarms go one way at most, and nowhere with monitoring off. */
export function monitoringSettingProblems({
  monitoring,
  alarmEmail,
  alarmTopicArn,
  alarmThresholds,
}: MonitoringSettings): SettingProblem[] {
  if (!monitoring) {
    const given = [
      ...Object.entries({ alarmEmail, alarmTopicArn })
        .filter(([, value]) => value !== undefined)
        .map(([prop]) => prop),
      ...Object.keys(alarmThresholds ?? {}).map((threshold) => `alarmThresholds.${threshold}`),
    ];
    return given.map((prop) => (name) => `${name(prop)} needs monitoring on (it is off)`);
  }
  const problems: SettingProblem[] = [];
  if (alarmEmail !== undefined && alarmTopicArn !== undefined) {
    problems.push(
      'alarmEmail and alarmTopicArn are two ways to deliver the alarms: give one (alarmEmail creates a topic, alarmTopicArn names yours)',
    );
  }
  if (alarmEmail !== undefined && !EMAIL.test(alarmEmail)) problems.push(`alarmEmail must be one email address, got "${alarmEmail}"`);
  if (alarmTopicArn !== undefined && !SNS_TOPIC_ARN.test(alarmTopicArn)) {
    problems.push(`alarmTopicArn must be a standard SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME), got "${alarmTopicArn}"`);
  }
  return [...problems, ...alarmThresholdProblems(alarmThresholds ?? {})];
}

/** The service's alarms (with their topic, if any), its dashboard and its saved Logs Insights queries. */
export class Monitoring extends Construct {
  readonly alarms: readonly Alarm[];
  readonly dashboard: Dashboard;
  readonly topic?: ITopic;

  constructor(scope: Construct, id: string, props: MonitoringProps) {
    super(scope, id);
    const metrics = new ServiceMetrics(props.metricsNamespace);
    this.topic =
      props.alarmEmail !== undefined
        ? new AlarmTopic(this, 'AlarmTopic', { email: props.alarmEmail }).topic
        : props.alarmTopicArn !== undefined
          ? Topic.fromTopicArn(this, 'AlarmTopic', props.alarmTopicArn)
          : undefined;
    const { handler, api, table, thresholds } = props;
    this.alarms = new ServiceAlarms(this, 'Alarms', { metrics, handler, api, table, thresholds, topic: this.topic }).alarms;
    this.dashboard = new ServiceDashboard(this, 'Dashboard', {
      metrics,
      handler,
      api,
      table,
      tokenCache: props.tokenCache,
      alarms: this.alarms,
    }).dashboard;
    const { functionLogs, accessLogs, tokenCache, callerAuthorization } = props;
    new LogQueries(this, 'Queries', { functionLogs, accessLogs, tokenCache, callerAuthorization });
  }
}
