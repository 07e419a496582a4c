import * as http from 'node:http';
import * as https from 'node:https';
import type { Clock, Deadline } from '../clock';
import { isRecord } from '../type-guards';
import { type AwsJsonService, serviceEndpoint } from './endpoints';
import { type AwsCredentials, signPost } from './sigv4';

/** A JSON document as AWS answers one: an object. */
export type AwsJson = Record<string, unknown>;

/**
 * A call that failed. `name` says what: AWS's error type (`ConditionalCheckFailedException`), a
 * socket's or TLS's code (`ECONNRESET`, `UNABLE_TO_VERIFY_LEAF_SIGNATURE`), `TimeoutError` when the
 * call's signal fired, or one of ours. The message is the name alone: AWS's messages can hold an ARN
 * or a key. `body` is AWS's error document, when it sent one.
 */
export class AwsCallError extends Error {
  constructor(
    override readonly name: string,
    /** The HTTP status of AWS's answer; undefined when there was none. */
    readonly status: number | undefined = undefined,
    readonly body: AwsJson | undefined = undefined,
  ) {
    super(name);
  }
}

/** The name a failed call is logged under: never a message, which could hold a table name, an ARN or a key. */
export function callErrorName(error: unknown): string {
  const name = (error as { name?: unknown } | undefined)?.name;
  return typeof name === 'string' && /^[A-Za-z0-9_.]{1,64}$/.test(name) ? name : 'Error';
}

/** One service's calls, each a signed POST of a JSON document, given up when its deadline passes. */
export interface AwsJsonClient {
  call(operation: string, input: AwsJson, deadline: Deadline): Promise<AwsJson>;
}

// An answer larger than this is no answer of these calls (an item is at most 400 KB, base64 in JSON).
const MAX_ANSWER_BYTES = 2 * 1024 * 1024;
// A second attempt follows a transient failure after a random pause up to this, as the SDK's standard retries do.
const RETRY_JITTER_MS = 50;
// What the SDK's standard retry strategy retries: sockets that failed, servers that failed, throttling.
const TRANSIENT_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT']);
const THROTTLING =
  /^(Throttl\w*|\w*LimitExceeded\w*|ProvisionedThroughputExceededException|TooManyRequestsException|RequestThrottled\w*|SlowDown)$/;

/**
 * A client for one AWS service's JSON protocol, configured from the environment as the AWS SDK is
 * (lambda/aws/endpoints.ts; the role's credentials from the environment, where Lambda puts them). One
 * retry at most, after a transient failure, within the call's signal. It does what the SDK's client
 * would for these calls at a fraction of its cold start (docs/DESIGN.md).
 */
export function awsJsonClient(service: AwsJsonService, env: NodeJS.ProcessEnv, clock: Clock): AwsJsonClient {
  const target = connectionTarget(service, env);

  const attempt = (operation: string, body: string, signal: AbortSignal): Promise<AwsJson> => {
    if (target instanceof AwsCallError) return Promise.reject(target);
    const credentials = envCredentials(env);
    if (credentials === undefined) return Promise.reject(new AwsCallError('CredentialsMissing'));
    const { url, region, transport, agent } = target;
    const unsigned = { 'content-type': service.contentType, 'x-amz-target': `${service.targetPrefix}.${operation}` };
    const headers = signPost({ host: url.host, headers: unsigned, body }, credentials, service.signingName, region, clock.epoch());
    const options = { method: 'POST', agent, signal, headers: { ...headers, 'content-length': Buffer.byteLength(body) } };
    return new Promise<AwsJson>((resolve, reject) => {
      const request = transport.request(url, options, (response) => {
        const chunks: Buffer[] = [];
        let size = 0;
        response.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_ANSWER_BYTES) request.destroy(new AwsCallError('AnswerTooLarge'));
          else chunks.push(chunk);
        });
        response.on('end', () => {
          const answer = parseJson(Buffer.concat(chunks).toString('utf8'));
          const status = Number(response.statusCode);
          if (status === 200) return answer ? resolve(answer) : reject(new AwsCallError('AnswerNotJson'));
          reject(new AwsCallError(errorType(response.headers['x-amzn-errortype'], answer) ?? `Http${status}`, status, answer));
        });
        response.on('error', failed);
      });
      function failed(error: Error): void {
        if (error instanceof AwsCallError) return reject(error);
        if (signal.aborted) return reject(new AwsCallError('TimeoutError'));
        reject(new AwsCallError(socketFailureName(error)));
      }
      request.on('error', failed);
      request.end(body);
    });
  };

  return {
    async call(operation, input, deadline) {
      const body = JSON.stringify(input);
      const { signal, release } = deadline.signal();
      try {
        return await attempt(operation, body, signal);
      } catch (error) {
        if (!worthRetrying(error as AwsCallError)) throw error;
        // Cut short by the deadline, the pause ends the call: the attempt after it fails at once as timed out.
        await clock.sleep(Math.random() * RETRY_JITTER_MS, signal).catch(() => undefined);
        return await attempt(operation, body, signal);
      } finally {
        release();
      }
    },
  };
}

/** Where a service's calls go, and the keep-alive agent they share; a setting that names no endpoint fails every call. */
function connectionTarget(service: AwsJsonService, env: NodeJS.ProcessEnv) {
  try {
    const { url, region } = serviceEndpoint(service, env);
    const transport = url.protocol === 'https:' ? https : http;
    return { url, region, transport, agent: new transport.Agent({ keepAlive: true }) };
  } catch (error) {
    return new AwsCallError((error as Error).name);
  }
}

/** A failure with no answer, named by its code (`ECONNRESET`, `UNABLE_TO_VERIFY_LEAF_SIGNATURE`) when it has one. */
export function socketFailureName(error: Error & { code?: unknown }): string {
  return typeof error.code === 'string' && /^[A-Z][A-Z0-9_]{2,63}$/.test(error.code) ? error.code : 'NetworkError';
}

/** The role's credentials from the environment, read at each call as the SDK's environment provider does. */
function envCredentials(env: NodeJS.ProcessEnv): AwsCredentials | undefined {
  const { AWS_ACCESS_KEY_ID: accessKeyId, AWS_SECRET_ACCESS_KEY: secretAccessKey, AWS_SESSION_TOKEN: sessionToken } = env;
  if (!accessKeyId || !secretAccessKey) return undefined;
  return { accessKeyId, secretAccessKey, sessionToken: sessionToken || undefined };
}

function parseJson(text: string): AwsJson | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return isRecord(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** AWS's error type, from its header or its document (`prefix#Name`, `Name:detail`), when it is a plain name. */
function errorType(header: string | string[] | undefined, answer: AwsJson | undefined): string | undefined {
  const raw = typeof header === 'string' ? header : answer?.__type;
  const name = typeof raw === 'string' ? raw.split(':')[0]?.split('#').pop() : undefined;
  return name !== undefined && /^[A-Za-z0-9_.]{1,64}$/.test(name) ? name : undefined;
}

/** Whether a failure may pass if tried again: a socket that failed, a server that failed, throttling. */
export function worthRetrying({ name, status }: AwsCallError): boolean {
  return status === undefined ? TRANSIENT_CODES.has(name) : status === 429 || status >= 500 || THROTTLING.test(name);
}
