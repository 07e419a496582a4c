import type { APIGatewayProxyEvent, APIGatewayProxyEventV2 } from 'aws-lambda';
import type { Observability, RequestRecord } from '../../lambda/observability';

export interface EventOptions {
  path?: string;
  method?: string;
  contentType?: string | null;
  /** Send the body base64-encoded, as API Gateway does for form bodies. */
  base64?: boolean;
  /** The IAM principal API Gateway verified (callerAuthorization=iam), as `requestContext.authorizer.iam.userArn`. */
  iamCaller?: string;
}

/** A payload 2.0 event as API Gateway sends it for a token route; `body` objects are JSON-encoded. */
export function tokenEvent(body: unknown, options: EventOptions = {}): APIGatewayProxyEventV2 {
  const path = options.path ?? '/v1/oauth/token';
  const method = options.method ?? 'POST';
  const text = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
  const headers: Record<string, string> = { host: 'abc123.execute-api.eu-west-1.amazonaws.com' };
  const contentType = options.contentType === undefined ? 'application/json' : options.contentType;
  if (contentType !== null) headers['content-type'] = contentType;
  return {
    version: '2.0',
    routeKey: `${method} ${path}`,
    rawPath: path,
    rawQueryString: '',
    headers,
    requestContext: {
      accountId: '123456789012',
      apiId: 'abc123',
      domainName: 'abc123.execute-api.eu-west-1.amazonaws.com',
      domainPrefix: 'abc123',
      http: { method, path, protocol: 'HTTP/1.1', sourceIp: '192.0.2.10', userAgent: 'jest' },
      requestId: 'test-request-id',
      routeKey: `${method} ${path}`,
      stage: '$default',
      time: '22/Nov/2026:02:00:00 +0000',
      timeEpoch: 1795312800000,
      ...(options.iamCaller === undefined ? {} : { authorizer: { iam: iamAuthorizer(options.iamCaller) } }),
    },
    ...(text === undefined ? {} : { body: options.base64 ? Buffer.from(text).toString('base64') : text }),
    isBase64Encoded: options.base64 ?? false,
  };
}

/** What API Gateway's IAM authorization puts in the request context for a verified caller. */
function iamAuthorizer(userArn: string) {
  return {
    accessKey: 'ASIAEXAMPLEKEY',
    accountId: userArn.split(':')[4] ?? '',
    callerId: 'AROAEXAMPLEID:session',
    cognitoIdentity: null,
    principalOrgId: null,
    userArn,
    userId: 'AROAEXAMPLEID:session',
  };
}

/** A form-encoded token event, base64-encoded as API Gateway delivers it. */
export function formEvent(fields: Record<string, string>, options: EventOptions = {}): APIGatewayProxyEventV2 {
  return tokenEvent(new URLSearchParams(fields).toString(), {
    contentType: 'application/x-www-form-urlencoded',
    base64: true,
    ...options,
  });
}

/**
 * The same request as a REST API's proxy integration hands it over (payload 1.0): the resource the
 * route key names (`/{proxy+}` for `$default`), the path without the stage, each header also as a
 * list, and the verified IAM caller in `requestContext.identity`, where the REST API puts it. Header
 * names stay as the 2.0 event has them (a REST API keeps the caller's case; the handler reads either).
 */
export function restEventOf(event: APIGatewayProxyEventV2): APIGatewayProxyEvent {
  const { http, stage, requestId, accountId, apiId } = event.requestContext;
  const { authorizer } = event.requestContext as { authorizer?: { iam?: { userArn?: string } } };
  const space = event.routeKey.indexOf(' ');
  const resource = space === -1 ? '/{proxy+}' : event.routeKey.slice(space + 1);
  const path = http.path.startsWith(`/${stage}/`) ? http.path.slice(stage.length + 1) : http.path;
  const headers = { ...event.headers } as Record<string, string>;
  const userArn = authorizer?.iam?.userArn ?? null;
  return {
    resource,
    path,
    httpMethod: http.method,
    headers,
    multiValueHeaders: Object.fromEntries(Object.entries(headers).map(([name, value]) => [name, [value]])),
    queryStringParameters: null,
    multiValueQueryStringParameters: null,
    pathParameters: null,
    stageVariables: null,
    requestContext: {
      accountId,
      apiId,
      authorizer: null,
      httpMethod: http.method,
      identity: {
        accessKey: userArn === null ? null : 'ASIAEXAMPLEKEY',
        accountId: typeof userArn === 'string' ? (userArn.split(':')[4] ?? null) : null,
        apiKey: null,
        apiKeyId: null,
        caller: userArn === null ? null : 'AROAEXAMPLEID:session',
        clientCert: null,
        cognitoAuthenticationProvider: null,
        cognitoAuthenticationType: null,
        cognitoIdentityId: null,
        cognitoIdentityPoolId: null,
        principalOrgId: null,
        sourceIp: http.sourceIp,
        user: userArn === null ? null : 'AROAEXAMPLEID:session',
        userAgent: http.userAgent,
        userArn,
      },
      path: `/${stage}${path}`,
      protocol: http.protocol,
      requestId,
      requestTimeEpoch: event.requestContext.timeEpoch,
      resourceId: 'abc123',
      resourcePath: resource,
      stage,
    },
    body: event.body ?? null,
    isBase64Encoded: event.isBase64Encoded,
  };
}

/** One of the handler's payload formats: how a 2.0 test event becomes that format's event for the same request, and API Gateway's answer there for a route it does not have. */
export interface PayloadFormatCase {
  readonly name: string;
  readonly as: (event: APIGatewayProxyEventV2) => APIGatewayProxyEventV2 | APIGatewayProxyEvent;
  readonly noRoute: { readonly status: number; readonly body: { readonly message: string } };
}

/** The HTTP API's payload 2.0 and the REST API's 1.0: what `describe.each` runs the contract's tests through. */
export const PAYLOAD_FORMATS: readonly PayloadFormatCase[] = [
  { name: 'HTTP API (payload 2.0)', as: (event) => event, noRoute: { status: 404, body: { message: 'Not Found' } } },
  { name: 'REST API (payload 1.0)', as: restEventOf, noRoute: { status: 403, body: { message: 'Missing Authentication Token' } } },
];

/** A parsed client-secret request, for tests that drive the cache without the handler (no IdP is reached at this URL). */
export const SECRET_REQUEST = {
  clientId: 'c',
  clientSecret: 's',
  accessTokenUrl: 'https://idp.example/t',
  grantType: 'g',
  authMethod: 'client_secret_post',
} as const;

/** Observability that keeps each request's record in memory instead of printing it. */
export function recordingObservability(): Observability & { records: RequestRecord[] } {
  const records: RequestRecord[] = [];
  return { records, record: (entry) => records.push(entry) };
}

/** Parse a handler result's JSON body. */
export function bodyOf(result: { body?: string }): Record<string, unknown> {
  return JSON.parse(result.body ?? 'null') as Record<string, unknown>;
}
