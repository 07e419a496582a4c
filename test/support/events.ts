import type { APIGatewayProxyEventV2 } from 'aws-lambda';
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

/** Observability that keeps each request's record in memory instead of printing it. */
/** A parsed client-secret request, for tests that drive the cache without the handler (no IdP is reached at this URL). */
export const SECRET_REQUEST = {
  clientId: 'c',
  clientSecret: 's',
  accessTokenUrl: 'https://idp.example/t',
  grantType: 'g',
  authMethod: 'client_secret_post',
} as const;

export function recordingObservability(): Observability & { records: RequestRecord[] } {
  const records: RequestRecord[] = [];
  return { records, record: (entry) => records.push(entry) };
}

/** Parse a handler result's JSON body. */
export function bodyOf(result: { body?: string }): Record<string, unknown> {
  return JSON.parse(result.body ?? 'null') as Record<string, unknown>;
}
