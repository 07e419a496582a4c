import { Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import { PolicyStatement, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { Key } from 'aws-cdk-lib/aws-kms';
import { Topic } from 'aws-cdk-lib/aws-sns';
import { EmailSubscription } from 'aws-cdk-lib/aws-sns-subscriptions';
import { Construct } from 'constructs';

export interface AlarmTopicProps {
  /** Where the alarms go; AWS sends a confirmation mail first, and nothing arrives until it is confirmed. */
  readonly email: string;
}

/**
 * The SNS topic the alarms notify when the stack is given `alarmEmail`: encrypted at rest with a key of
 * its own (CloudWatch cannot use the AWS managed SNS key), reachable over TLS only, and open to
 * CloudWatch alarms of this account and region alone.
 */
export class AlarmTopic extends Construct {
  readonly topic: Topic;

  constructor(scope: Construct, id: string, props: AlarmTopicProps) {
    super(scope, id);
    const { account, region, partition } = Stack.of(this);
    const fromOurAlarms = {
      StringEquals: { 'aws:SourceAccount': account },
      ArnLike: { 'aws:SourceArn': `arn:${partition}:cloudwatch:${region}:${account}:alarm:*` },
    };
    const cloudWatch = new ServicePrincipal('cloudwatch.amazonaws.com');

    const key = new Key(this, 'Key', {
      description: `Encrypts the alarm notifications of ${Stack.of(this).stackName} in SNS`,
      enableKeyRotation: true,
      // It protects notifications in transit through SNS, nothing kept: it goes with the stack.
      removalPolicy: RemovalPolicy.DESTROY,
      pendingWindow: Duration.days(7),
    });
    key.addToResourcePolicy(
      new PolicyStatement({
        sid: 'CloudWatchAlarmsPublishEncrypted',
        principals: [cloudWatch],
        actions: ['kms:Decrypt', 'kms:GenerateDataKey*'],
        resources: ['*'],
        conditions: fromOurAlarms,
      }),
    );

    this.topic = new Topic(this, 'Topic', {
      displayName: `${Stack.of(this).stackName} alarms`,
      masterKey: key,
      enforceSSL: true,
    });
    // The TLS-only policy replaces SNS's default topic policy, so CloudWatch is allowed explicitly.
    this.topic.addToResourcePolicy(
      new PolicyStatement({
        sid: 'CloudWatchAlarmsPublish',
        principals: [cloudWatch],
        actions: ['sns:Publish'],
        resources: [this.topic.topicArn],
        conditions: fromOurAlarms,
      }),
    );
    this.topic.addSubscription(new EmailSubscription(props.email));
  }
}
