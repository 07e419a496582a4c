// What the measured processes send. Node modules are passed in rather than imported, so the cold
// worker can time their first require itself.
import type * as Https from 'node:https';
import type { APIGatewayProxyEventV2, Context } from 'aws-lambda';
import { localLambdaContext } from '../local/lambda-context';

export const CLIENT_ID = 'bench-client';
export const CLIENT_SECRET = 'bench-secret';

/** The token request simple-oauth2 sends for a client_secret_basic client-credentials grant. */
export const FORM_BODY = 'grant_type=client_credentials';
const basic = Buffer.from(`${encodeURIComponent(CLIENT_ID)}:${encodeURIComponent(CLIENT_SECRET)}`).toString('base64');
export const FORM_HEADERS = {
  authorization: `Basic ${basic}`,
  accept: 'application/json',
  'content-type': 'application/x-www-form-urlencoded',
  'user-agent': 'token-exchange-service',
} as const;

/** A payload 2.0 event for the token route, as API Gateway hands it to the function. */
export function tokenEvent(tokenUrl: string): APIGatewayProxyEventV2 {
  const path = '/v1/oauth/token';
  return {
    version: '2.0',
    routeKey: `POST ${path}`,
    rawPath: path,
    rawQueryString: '',
    headers: { host: 'abc123.execute-api.eu-west-1.amazonaws.com', 'content-type': 'application/json' },
    requestContext: {
      accountId: '123456789012',
      apiId: 'abc123',
      domainName: 'abc123.execute-api.eu-west-1.amazonaws.com',
      domainPrefix: 'abc123',
      http: { method: 'POST', path, protocol: 'HTTP/1.1', sourceIp: '192.0.2.10', userAgent: 'bench' },
      requestId: 'bench-request',
      routeKey: `POST ${path}`,
      stage: '$default',
      time: '01/Jan/2026:00:00:00 +0000',
      timeEpoch: 1767225600000,
    },
    body: JSON.stringify({ client_id: CLIENT_ID, client_secret: CLIENT_SECRET, access_token_url: tokenUrl }),
    isBase64Encoded: false,
  };
}

export type Call = () => Promise<void>;

/** The floor with node:https: one keep-alive agent, the same form POST, the answer read and parsed. */
export function httpsFloor(https: typeof Https, tokenUrl: string): Call {
  const agent = new https.Agent({ keepAlive: true });
  const url = new URL(tokenUrl);
  const options = { hostname: url.hostname, port: url.port, path: url.pathname, method: 'POST', agent, headers: FORM_HEADERS };
  return () =>
    new Promise<void>((resolve, reject) => {
      const request = https.request(options, (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => {
          try {
            expectToken(response.statusCode, JSON.parse(Buffer.concat(chunks).toString('utf8')));
            resolve();
          } catch (error) {
            reject(error);
          }
        });
        response.on('error', reject);
      });
      request.on('error', reject);
      request.end(FORM_BODY);
    });
}

/** The floor with fetch (undici, whose global dispatcher keeps connections alive). */
export function fetchFloor(tokenUrl: string): Call {
  return async () => {
    const response = await fetch(tokenUrl, { method: 'POST', headers: FORM_HEADERS, body: FORM_BODY });
    expectToken(response.status, await response.json());
  };
}

/** A bench that measured failures would be worthless: every call must have produced the token. */
export function expectToken(status: number | undefined, body: unknown): void {
  const token = (body as { access_token?: unknown } | null)?.access_token;
  if (status !== 200 || token !== 'bench-access-token') throw new Error(`expected the bench token, got status ${status}`);
}

/** The deployed bundle's export. */
export type BundleHandler = (
  event: APIGatewayProxyEventV2,
  context: Context,
) => Promise<{ statusCode?: number; headers?: Record<string, unknown>; body?: string }>;

/** Invoke the handler as the Lambda runtime does, and check the answer (and the cache's verdict when asked). */
export function handlerCall(handler: BundleHandler, tokenUrl: string, expectCache?: 'hit' | 'miss'): Call {
  const event = tokenEvent(tokenUrl);
  const context = localLambdaContext('bench-invocation');
  return async () => {
    const result = await handler(event, context);
    expectToken(result.statusCode, JSON.parse(result.body ?? 'null'));
    if (expectCache !== undefined && result.headers?.['x-token-cache'] !== expectCache) {
      throw new Error(`expected a cache ${expectCache}, got ${String(result.headers?.['x-token-cache'])}`);
    }
  };
}
