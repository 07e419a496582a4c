import type { APIGatewayProxyEvent, APIGatewayProxyEventV2 } from 'aws-lambda';

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

/**
 * A token request with a JSON body (from `iamCaller` if given) as API Gateway hands it to the function, built as `npm start`
 * builds one: what `npm run bench` and `npm run faults` send the instances they measure.
 */
export function tokenEvent(body: Record<string, string>, iamCaller?: string): APIGatewayProxyEventV2 {
  const request = { method: 'POST', target: '/v1/oauth/token', rawHeaders: ['content-type', 'application/json'] };
  const gateway = { routeKey: 'POST /v1/oauth/token', requestId: 'local', iamCaller };
  return toApiGatewayEvent({ ...request, body: Buffer.from(JSON.stringify(body)) }, gateway);
}

/**
 * Turn an HTTP request into the event a REST API's Lambda proxy integration hands a function (payload
 * format 1.0), as far as the handler reads it: the resource matched, method and path; header names as
 * sent, each header's last value in `headers` and all of them in `multiValueHeaders` (cookies
 * included: a REST API keeps them there); the query string likewise; the body as text, as a REST API
 * without binary media types passes it; the stage, request id, and the verified IAM caller in
 * `requestContext.identity` when there is one.
 */
export function toRestApiEvent(
  request: ReceivedHttpRequest,
  gateway: { resource: string; requestId: string; iamCaller?: string },
): APIGatewayProxyEvent {
  const queryAt = request.target.indexOf('?');
  const path = queryAt === -1 ? request.target : request.target.slice(0, queryAt);
  const multiValueHeaders: Record<string, string[]> = {};
  const casing = new Map<string, string>();
  for (let i = 0; i + 1 < request.rawHeaders.length; i += 2) {
    // A repeated header keeps the case it was first sent in.
    const sent = request.rawHeaders[i] ?? '';
    if (!casing.has(sent.toLowerCase())) casing.set(sent.toLowerCase(), sent);
    const name = casing.get(sent.toLowerCase()) as string;
    (multiValueHeaders[name] ??= []).push(request.rawHeaders[i + 1] ?? '');
  }
  const query = new URLSearchParams(queryAt === -1 ? '' : request.target.slice(queryAt + 1));
  const multiValueQuery: Record<string, string[]> = {};
  for (const [name, value] of query) (multiValueQuery[name] ??= []).push(value);
  const last = (lists: Record<string, string[]>) =>
    Object.fromEntries(Object.entries(lists).map(([name, values]) => [name, values.at(-1) as string]));
  const hasQuery = Object.keys(multiValueQuery).length > 0;
  return {
    resource: gateway.resource,
    path,
    httpMethod: request.method,
    headers: last(multiValueHeaders),
    multiValueHeaders,
    queryStringParameters: hasQuery ? last(multiValueQuery) : null,
    multiValueQueryStringParameters: hasQuery ? multiValueQuery : null,
    pathParameters: null,
    stageVariables: null,
    // The type names every field API Gateway sends; these are the ones anything reads.
    requestContext: {
      httpMethod: request.method,
      path,
      resourcePath: gateway.resource,
      requestId: gateway.requestId,
      stage: '$default',
      // What the REST API's IAM authorization puts there once it has verified the SigV4 signature.
      identity: { userArn: gateway.iamCaller ?? null },
    } as APIGatewayProxyEvent['requestContext'],
    body: request.body.length > 0 ? request.body.toString('utf8') : null,
    isBase64Encoded: false,
  };
}
