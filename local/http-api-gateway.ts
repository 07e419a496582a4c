import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { TokenHandler } from '../lambda/handler';
import type { Response } from '../lambda/responses';
import { JWKS_ROUTE_KEY, TOKEN_ROUTE_KEYS } from '../lambda/request/routes';
import { toApiGatewayEvent, toRestApiEvent } from './api-gateway-event';
import { localLambdaContext } from './lambda-context';

/**
 * How a local caller acts as an IAM principal: this header's value becomes the verified caller of
 * the event, as API Gateway's IAM authorization would make it from a SigV4 signature. Only this local
 * gateway reads it, and takes it out of the event's headers; the function never looks at headers for
 * a caller, so sent to a deployed API it is just a header.
 */
export const LOCAL_IAM_CALLER_HEADER = 'x-local-iam-caller';

/** API Gateway's payload limit for HTTP APIs (10 MB); the contract's 64 KiB rule is the handler's. */
export const GATEWAY_MAX_BODY_BYTES = 10 * 1024 * 1024;

/** Which API Gateway the local gateway stands in for: the HTTP API (payload 2.0 events) or a REST API (1.0). */
export type LocalApi = 'http' | 'rest';

export interface HttpApiGatewayOptions {
  readonly handler: TokenHandler;
  /** Default `http`, as the stack deploys by default. */
  readonly api?: LocalApi;
  /** Served at `GET /openapi.yaml` while the file exists. */
  readonly openApiPath: string;
  readonly maxBodyBytes?: number;
}

// API Gateway's own answers, byte for byte. They do not carry the contract's cache headers: those are
// the function's, and the local server shows what a caller of the deployed API really gets.
const NOT_FOUND = { status: 404, body: '{"message":"Not Found"}' };
const TOO_LARGE = { status: 413, body: '{"message":"Request Entity Too Large"}' };
const INTERNAL_ERROR = { status: 500, body: '{"message":"Internal Server Error"}' };

/**
 * A local stand-in for the API Gateway in front of the function: it matches the token and JWKS
 * routes, reads the body within API Gateway's limit, invokes the handler with a payload 2.0 event (or
 * with `api: 'rest'` a 1.0 event, as a REST API's proxy integration) and writes its result. Anything
 * else gets the HTTP API's own answers, whichever it stands in for.
 */
export function createHttpApiGateway(options: HttpApiGatewayOptions): Server {
  const maxBodyBytes = options.maxBodyBytes ?? GATEWAY_MAX_BODY_BYTES;
  return createServer((request, response) => {
    serve(request, response).catch(() => response.destroy());
  });

  async function serve(request: IncomingMessage, response: ServerResponse): Promise<void> {
    // Like API Gateway's `apigw-requestid`, e.g. `JKJaXmPLvHcESHA=`.
    const requestId = randomBytes(11).toString('base64');
    response.setHeader('apigw-requestid', requestId);
    const target = request.url ?? '/';
    const routeKey = `${request.method} ${target.split('?')[0]}`;

    if (routeKey === 'GET /openapi.yaml') return serveFile(response, options.openApiPath);
    if (!TOKEN_ROUTE_KEYS.includes(routeKey) && routeKey !== JWKS_ROUTE_KEY) return send(response, NOT_FOUND);

    const body = await readBody(request, maxBodyBytes);
    if (body === undefined) return send(response, TOO_LARGE);
    const iamCaller = request.headers[LOCAL_IAM_CALLER_HEADER];
    const rawHeaders = request.rawHeaders.filter((_, at, all) => (all[at - (at % 2)] ?? '').toLowerCase() !== LOCAL_IAM_CALLER_HEADER);
    const received = { method: request.method ?? 'POST', target, rawHeaders, body };
    const caller = typeof iamCaller === 'string' ? { iamCaller } : {};
    const event =
      options.api === 'rest'
        ? toRestApiEvent(received, { resource: routeKey.slice(routeKey.indexOf(' ') + 1), requestId, ...caller })
        : toApiGatewayEvent(received, { routeKey, requestId, ...caller });
    let result: Response;
    try {
      result = await options.handler(event, localLambdaContext(requestId));
    } catch {
      return send(response, INTERNAL_ERROR);
    }
    writeResult(response, result);
  }
}

/**
 * Read a request body, holding at most `limit` bytes. Past the limit the rest is read and dropped, so
 * memory stays bounded and the client still receives the 413 rather than a reset; returns undefined.
 */
async function readBody(request: IncomingMessage, limit: number): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size <= limit) chunks.push(chunk as Buffer);
  }
  return size <= limit ? Buffer.concat(chunks, size) : undefined;
}

function writeResult(response: ServerResponse, result: Response): void {
  const body = Buffer.from(result.body, 'utf8');
  for (const [name, value] of Object.entries(result.headers)) response.setHeader(name, value);
  response.setHeader('content-length', body.length);
  response.writeHead(result.statusCode);
  response.end(body);
}

function send(response: ServerResponse, answer: { status: number; body: string }): void {
  response.writeHead(answer.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(answer.body) });
  response.end(answer.body);
}

async function serveFile(response: ServerResponse, path: string): Promise<void> {
  let file: Buffer;
  try {
    file = await readFile(path);
  } catch {
    return send(response, NOT_FOUND);
  }
  response.writeHead(200, { 'content-type': 'application/yaml', 'content-length': file.length });
  response.end(file);
}
