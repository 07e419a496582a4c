// What the measured processes do: the handler invoked as the Lambda runtime invokes it, and the
// same token request made with no library (the baselines). Node modules are passed in, so the cold
// worker can time their first load itself.
import { writeSync } from 'node:fs';
import type * as Https from 'node:https';
import { tokenEvent } from '../../test/support/events';

export type Call = () => Promise<void>;

const CLIENT_ID = 'bench-client';
const CLIENT_SECRET = 'bench-secret';
/** What the bench's token server answers; every measured call must come back with it. */
export const BENCH_TOKEN = 'bench-access-token';

// The request simple-oauth2 sends for a client_secret_basic client-credentials grant.
const FORM_BODY = 'grant_type=client_credentials';
const FORM_HEADERS = {
  authorization: `Basic ${Buffer.from(`${CLIENT_ID}:${CLIENT_SECRET}`).toString('base64')}`,
  accept: 'application/json',
  'content-type': 'application/x-www-form-urlencoded',
  'user-agent': 'token-exchange-service',
};

/** A setting the bench passes in the worker's environment. */
export function setting(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`bench worker needs ${name}`);
  return value;
}

/** Baseline: node:https with one keep-alive Agent, the answer read and parsed. */
export function httpsCall(https: typeof Https): Call {
  const agent = new https.Agent({ keepAlive: true });
  const url = new URL(setting('BENCH_TOKEN_URL'));
  const options = { hostname: url.hostname, port: url.port, path: url.pathname, method: 'POST', agent, headers: FORM_HEADERS };
  return () =>
    new Promise((resolve, reject) => {
      const request = https.request(options, (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('error', reject);
        response.on('end', () => {
          try {
            resolve(expectToken(response.statusCode, JSON.parse(Buffer.concat(chunks).toString('utf8'))));
          } catch (error) {
            reject(error);
          }
        });
      });
      request.on('error', reject);
      request.end(FORM_BODY);
    });
}

/** Baseline of the performance target: one `fetch` (its global dispatcher keeps connections alive). */
export function fetchCall(): Call {
  const tokenUrl = setting('BENCH_TOKEN_URL');
  return async () => {
    const response = await fetch(tokenUrl, { method: 'POST', headers: FORM_HEADERS, body: FORM_BODY });
    expectToken(response.status, await response.json());
  };
}

type BundleHandler = (
  event: unknown,
  context: unknown,
) => Promise<{ statusCode?: number; headers?: Record<string, unknown>; body?: string }>;

/** Load the deployed bundle; each call invokes its handler with a payload 2.0 event and checks the answer. */
export function handlerCall(expectCache?: 'hit' | 'miss'): Call {
  const { handler } = require(setting('BENCH_BUNDLE')) as { handler: BundleHandler };
  const event = tokenEvent({ client_id: CLIENT_ID, client_secret: CLIENT_SECRET, access_token_url: setting('BENCH_TOKEN_URL') });
  const context = {
    functionName: 'token-exchange',
    functionVersion: '$LATEST',
    invokedFunctionArn: 'arn:aws:lambda:eu-west-1:123456789012:function:token-exchange',
    memoryLimitInMB: '256',
    awsRequestId: 'bench-invocation',
    logGroupName: '/aws/lambda/token-exchange',
    logStreamName: 'bench',
    getRemainingTimeInMillis: () => 10_000,
  };
  return async () => {
    const result = await handler(event, context);
    expectToken(result.statusCode, JSON.parse(result.body ?? 'null'));
    const cache = result.headers?.['x-token-cache'];
    if (expectCache !== undefined && cache !== expectCache) throw new Error(`expected a cache ${expectCache}, got ${String(cache)}`);
  };
}

// A timing of a failed call would be worthless, so every call must have produced the token.
function expectToken(status: number | undefined, body: unknown): void {
  if (status !== 200 || (body as { access_token?: unknown } | null)?.access_token !== BENCH_TOKEN) {
    throw new Error(`expected the bench token, got status ${status}`);
  }
}

/**
 * Hand the result to the bench on fd 3 (stdout carries the handler's logs) and end the process:
 * kept-alive sockets would otherwise hold it open.
 */
export function report(result: unknown): never {
  writeSync(3, JSON.stringify(result));
  process.exit(0);
}

/** Say why (never with a response body: it could hold a token) and end the process. */
export function fail(error: unknown): never {
  process.stderr.write(`bench worker failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
}
