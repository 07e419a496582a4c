import { invalidRequest } from '../errors';
import { isRecord } from '../type-guards';

/**
 * Which API Gateway payload an event is: the HTTP API's `2.0`, or `1.0`, what a REST API's proxy
 * integration sends. A direct invoke can send anything: it is read as 1.0 only when it carries 1.0's
 * top-level `httpMethod` and not 2.0's `version`, and every part of it (route, headers, body, caller)
 * is then read from that format's place alone, never from the other's.
 */
export type PayloadFormat = '1.0' | '2.0';

export function payloadFormat(event: unknown): PayloadFormat {
  return isRecord(event) && typeof event.httpMethod === 'string' && event.version !== '2.0' ? '1.0' : '2.0';
}

/** The parts of an event a token request is read from, the same whichever format carried them. */
export interface EventParts {
  /** Empty when the request had none. */
  readonly body: string;
  readonly isBase64Encoded: boolean;
  /** As the HTTP API gives them: repeated headers joined by commas. */
  readonly headers: Readonly<Record<string, string>>;
}

/**
 * A token route event's headers, body and its base64 flag. API Gateway always sends a request
 * context, string headers (an object, or on 1.0 possibly none) and a string body or none; anything
 * else is a direct invoke's mistake, a `400` naming the part.
 */
export function eventParts(event: unknown): EventParts {
  const format = payloadFormat(event);
  const notFromApiGateway = (what: string) =>
    invalidRequest(`The event is not an API Gateway ${format === '1.0' ? 'REST' : 'HTTP'} API request: ${what}`);
  if (!isRecord(event) || !isRecord(event.requestContext)) throw notFromApiGateway('requestContext must be an object');
  const { body, isBase64Encoded } = event;
  const headers = format === '1.0' ? restHeaders(event.multiValueHeaders, event.headers) : stringsOf(event.headers);
  if (typeof headers === 'string') throw notFromApiGateway(headers);
  if (body !== undefined && body !== null && typeof body !== 'string') throw notFromApiGateway('body must be a string');
  if (isBase64Encoded !== undefined && typeof isBase64Encoded !== 'boolean') throw notFromApiGateway('isBase64Encoded must be a boolean');
  return { headers, body: body ?? '', isBase64Encoded: isBase64Encoded === true };
}

/** Headers as 2.0 gives them, names as sent; what is wrong with them otherwise. */
function stringsOf(headers: unknown): Record<string, string> | string {
  if (!isRecord(headers) || !Object.values(headers).every((value) => typeof value === 'string'))
    return 'headers must be an object of strings';
  return headers as Record<string, string>;
}

/**
 * A REST event's headers as the HTTP API would give them: lower-case names, the values of a
 * repeated header joined by commas. Its `headers` keeps only a repeated header's last value, so
 * `multiValueHeaders` is read when present; both are null for a request without headers.
 */
function restHeaders(multi: unknown, single: unknown): Record<string, string> | string {
  let lists: [string, unknown][];
  if (multi !== undefined && multi !== null) {
    if (!isRecord(multi)) return 'multiValueHeaders must be an object of string arrays';
    lists = Object.entries(multi);
    if (!lists.every(([, values]) => Array.isArray(values) && values.every((value) => typeof value === 'string'))) {
      return 'multiValueHeaders must be an object of string arrays';
    }
  } else {
    const headers = single === undefined || single === null ? {} : stringsOf(single);
    if (typeof headers === 'string') return headers;
    lists = Object.entries(headers).map(([name, value]) => [name, [value]]);
  }
  const joined = new Map<string, string>();
  for (const [name, values] of lists as [string, string[]][]) {
    const key = name.toLowerCase();
    const before = joined.get(key);
    joined.set(key, before === undefined ? values.join(',') : `${before},${values.join(',')}`);
  }
  return Object.fromEntries(joined);
}

/**
 * The ARN of the IAM principal API Gateway verified (`callerAuthorization=iam`), from its format's
 * place alone: `requestContext.authorizer.iam.userArn` on 2.0, `requestContext.identity.userArn` on
 * 1.0. Unchecked: whatever is there, or undefined.
 */
export function callerArnOf(event: unknown): unknown {
  const context = isRecord(event) ? event.requestContext : undefined;
  if (!isRecord(context)) return undefined;
  if (payloadFormat(event) === '1.0') return isRecord(context.identity) ? context.identity.userArn : undefined;
  const iam = isRecord(context.authorizer) ? context.authorizer.iam : undefined;
  return isRecord(iam) ? iam.userArn : undefined;
}

/**
 * The route as the log line names it, the same on either format: 2.0's route key
 * (`POST /v1/oauth/token`, `$default`), or 1.0's method and resource (`POST /v1/oauth/token`,
 * `POST /{proxy+}`). A direct invoke's own value only if it is a string of at most 64 characters, else `-`.
 */
export function routeKeyOf(event: unknown): string {
  const record = isRecord(event) ? event : {};
  const key =
    payloadFormat(event) === '1.0'
      ? typeof record.resource === 'string'
        ? `${record.httpMethod as string} ${record.resource}`
        : undefined
      : record.routeKey;
  return typeof key === 'string' && key.length <= 64 ? key : '-';
}
