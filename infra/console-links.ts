import { Aws, CfnCondition, Fn, Stack } from 'aws-cdk-lib';
import type { Construct } from 'constructs';

/** The console's host in each partition with one of its own; every other partition gets the commercial one. */
const CONSOLE_HOSTS = {
  'aws-cn': 'console.amazonaws.cn',
  'aws-us-gov': 'console.amazonaws-us-gov.com',
} as const;
const COMMERCIAL_CONSOLE_HOST = 'console.aws.amazon.com';

/**
 * `https://HOST/PATH` in the AWS console of the partition the stack is deployed to. An
 * environment-agnostic stack learns its partition only at deploy, so the host is chosen there, by
 * one CloudFormation condition per partition.
 */
export function consoleUrl(scope: Construct, path: string): string {
  const stack = Stack.of(scope);
  let host: string = COMMERCIAL_CONSOLE_HOST;
  for (const [partition, partitionHost] of Object.entries(CONSOLE_HOSTS)) {
    const id = `ConsoleIn${partition.replaceAll('-', '')}`;
    const condition =
      (stack.node.tryFindChild(id) as CfnCondition | undefined) ??
      new CfnCondition(stack, id, { expression: Fn.conditionEquals(Aws.PARTITION, partition) });
    host = Fn.conditionIf(condition.logicalId, partitionHost, host).toString();
  }
  return `https://${host}/${path}`;
}
