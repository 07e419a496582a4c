import { type IMetric, MathExpression } from 'aws-cdk-lib/aws-cloudwatch';
import type { ITable } from 'aws-cdk-lib/aws-dynamodb';
import { METRIC_PERIOD } from './service-metrics';

/** The shared cache's calls: what the function's role may do to its table. */
export const TABLE_OPERATIONS = ['GetItem', 'PutItem'] as const;

/**
 * A DynamoDB metric that AWS/DynamoDB keeps per operation (`SystemErrors`, `ThrottledRequests`), summed
 * over the function's operations. Its ids carry the metric's name, so two such sums can share a graph.
 */
export function tableOperationsSum(table: ITable, metricName: 'SystemErrors' | 'ThrottledRequests', label: string): IMetric {
  const usingMetrics = Object.fromEntries(
    TABLE_OPERATIONS.map((operation) => [
      `${metricName.toLowerCase()}${operation.toLowerCase()}`,
      table.metric(metricName, {
        dimensionsMap: { TableName: table.tableName, Operation: operation },
        statistic: 'Sum',
        period: METRIC_PERIOD,
      }),
    ]),
  );
  return new MathExpression({
    expression: Object.keys(usingMetrics)
      .map((id) => `FILL(${id}, 0)`)
      .join(' + '),
    usingMetrics,
    period: METRIC_PERIOD,
    label,
  });
}
