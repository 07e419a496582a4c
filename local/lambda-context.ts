import type { Context } from 'aws-lambda';

/**
 * The Lambda context the runtime would pass with an event, for running the handler outside Lambda:
 * Powertools takes the request id, function name and memory size for each log line from it.
 */
export function localLambdaContext(requestId: string, functionName = 'token-exchange-local'): Context {
  return {
    awsRequestId: requestId,
    functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:local:000000000000:function:${functionName}`,
    memoryLimitInMB: '256',
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: 'local',
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => 30_000,
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}
