import type { APIGatewayProxyEventV2 } from 'aws-lambda';

/** What the local server read off the wire for one request. */
export interface ReceivedHttpRequest {
  readonly method: string;
  /** The request target as sent: path and query string. */
  readonly target: string;
  /** Node's `rawHeaders`: names and values alternating, in the order received. */
  readonly rawHeaders: readonly string[];
  readonly httpVersion: string;
  readonly sourceIp: string;
  readonly localPort: number;
  readonly body: Buffer;
}

/** What API Gateway decides for a request before invoking the function. */
export interface GatewayDecision {
  /** The matched route, e.g. `POST /v1/oauth/token`. */
  readonly routeKey: string;
  readonly requestId: string;
  readonly receivedAt?: Date;
}

// HTTP APIs pass text as it is and base64-encode every other body, form bodies included. A request
// without a content type is treated as binary, the safe side: the handler decodes either way.
const TEXT_MEDIA_TYPE = /^(text\/[^;]+|application\/([-.\w]+\+)?(json|xml))\s*(;|$)/i;
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'] as const;

/**
 * Turn an HTTP request into the event an API Gateway HTTP API hands a Lambda function (payload
 * format 2.0): lower-case header names with repeated headers comma-joined, cookies in their own
 * array, and the body base64-encoded unless its content type is text or JSON.
 */
export function toApiGatewayEvent(request: ReceivedHttpRequest, decision: GatewayDecision): APIGatewayProxyEventV2 {
  const queryAt = request.target.indexOf('?');
  const rawPath = queryAt === -1 ? request.target : request.target.slice(0, queryAt);
  const rawQueryString = queryAt === -1 ? '' : request.target.slice(queryAt + 1);
  const { headers, cookies } = readHeaders(request);
  const receivedAt = decision.receivedAt ?? new Date();
  const domainName = headers.host ?? 'localhost';
  const queryStringParameters = readQuery(rawQueryString);
  const text = TEXT_MEDIA_TYPE.test(headers['content-type'] ?? '');
  const hasBody = request.body.length > 0;

  return {
    version: '2.0',
    routeKey: decision.routeKey,
    rawPath,
    rawQueryString,
    ...(cookies.length > 0 ? { cookies } : {}),
    headers,
    ...(queryStringParameters ? { queryStringParameters } : {}),
    requestContext: {
      accountId: '123456789012',
      apiId: 'local',
      domainName,
      domainPrefix: domainName.split(/[.:]/)[0] ?? domainName,
      http: {
        method: request.method,
        path: rawPath,
        protocol: `HTTP/${request.httpVersion}`,
        sourceIp: request.sourceIp,
        userAgent: headers['user-agent'] ?? '',
      },
      requestId: decision.requestId,
      routeKey: decision.routeKey,
      stage: '$default',
      time: formatTime(receivedAt),
      timeEpoch: receivedAt.getTime(),
    },
    ...(hasBody ? { body: request.body.toString(text ? 'utf8' : 'base64') } : {}),
    isBase64Encoded: hasBody && !text,
  };
}

function readHeaders(request: ReceivedHttpRequest): { headers: Record<string, string>; cookies: string[] } {
  const headers: Record<string, string> = {};
  const cookies: string[] = [];
  for (let i = 0; i + 1 < request.rawHeaders.length; i += 2) {
    const name = (request.rawHeaders[i] ?? '').toLowerCase();
    const value = request.rawHeaders[i + 1] ?? '';
    if (name === 'cookie') {
      cookies.push(
        ...value
          .split(';')
          .map((cookie) => cookie.trim())
          .filter((cookie) => cookie !== ''),
      );
    } else {
      headers[name] = headers[name] === undefined ? value : `${headers[name]},${value}`;
    }
  }
  // As API Gateway does: the client's address is appended to any forwarded chain, port and proto are its own.
  headers['x-forwarded-for'] = headers['x-forwarded-for'] ? `${headers['x-forwarded-for']}, ${request.sourceIp}` : request.sourceIp;
  headers['x-forwarded-port'] = String(request.localPort);
  headers['x-forwarded-proto'] = 'http';
  return { headers, cookies };
}

function readQuery(rawQueryString: string): Record<string, string> | undefined {
  if (rawQueryString === '') return undefined;
  const parameters: Record<string, string> = {};
  for (const [name, value] of new URLSearchParams(rawQueryString)) {
    parameters[name] = parameters[name] === undefined ? value : `${parameters[name]},${value}`;
  }
  return parameters;
}

/** API Gateway's `requestContext.time`, e.g. `12/Mar/2020:19:03:58 +0000`. */
function formatTime(date: Date): string {
  const two = (n: number): string => String(n).padStart(2, '0');
  return `${two(date.getUTCDate())}/${MONTHS[date.getUTCMonth()]}/${date.getUTCFullYear()}:${two(date.getUTCHours())}:${two(
    date.getUTCMinutes(),
  )}:${two(date.getUTCSeconds())} +0000`;
}
