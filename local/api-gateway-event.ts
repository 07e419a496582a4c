import type { APIGatewayProxyEventV2 } from 'aws-lambda';

/** What the local server read off the wire for one request. */
export interface ReceivedHttpRequest {
  readonly method: string;
  /** The request target as sent: path and query string. */
  readonly target: string;
  /** Node's `rawHeaders`: names and values alternating, in the order received. */
  readonly rawHeaders: readonly string[];
  readonly body: Buffer;
}

// HTTP APIs pass text as it is and base64-encode every other body, form bodies included. A request
// without a content type is treated as binary, the safe side: the handler decodes either way.
const TEXT_MEDIA_TYPE = /^(text\/[^;]+|application\/([-.\w]+\+)?(json|xml))\s*(;|$)/i;

/**
 * Turn an HTTP request into the event an API Gateway HTTP API hands a Lambda function (payload
 * format 2.0), as far as the handler reads it: route, path and query, lower-case header names with
 * repeated headers comma-joined, the body base64-encoded unless its content type is text or JSON,
 * the method, stage and request id, and the verified IAM caller when there is one. The rest of API Gateway's request context (account, source IP,
 * time) is read by nothing here, so it is left out.
 */
export function toApiGatewayEvent(
  request: ReceivedHttpRequest,
  gateway: { routeKey: string; requestId: string; iamCaller?: string },
): APIGatewayProxyEventV2 {
  const queryAt = request.target.indexOf('?');
  const rawPath = queryAt === -1 ? request.target : request.target.slice(0, queryAt);
  const headers: Record<string, string> = {};
  for (let i = 0; i + 1 < request.rawHeaders.length; i += 2) {
    const name = (request.rawHeaders[i] ?? '').toLowerCase();
    const value = request.rawHeaders[i + 1] ?? '';
    // API Gateway moves cookies out of the headers (into `cookies`, which the handler never reads).
    if (name !== 'cookie') headers[name] = headers[name] === undefined ? value : `${headers[name]},${value}`;
  }
  const text = TEXT_MEDIA_TYPE.test(headers['content-type'] ?? '');
  const hasBody = request.body.length > 0;
  return {
    version: '2.0',
    routeKey: gateway.routeKey,
    rawPath,
    rawQueryString: queryAt === -1 ? '' : request.target.slice(queryAt + 1),
    headers,
    // The type names every field API Gateway sends; these are the ones anything reads.
    requestContext: {
      http: { method: request.method, path: rawPath },
      requestId: gateway.requestId,
      stage: '$default',
      // What API Gateway's IAM authorization adds once it has verified the SigV4 signature.
      ...(gateway.iamCaller === undefined ? {} : { authorizer: { iam: { userArn: gateway.iamCaller } } }),
    } as APIGatewayProxyEventV2['requestContext'],
    ...(hasBody ? { body: request.body.toString(text ? 'utf8' : 'base64') } : {}),
    isBase64Encoded: hasBody && !text,
  };
}
