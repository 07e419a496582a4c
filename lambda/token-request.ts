import { ExchangeError, invalidRequest } from './errors';
import { isRecord } from './routes';

export type AuthMethod = 'client_secret_basic' | 'client_secret_post';

/** A validated token request: what the caller asked for, before the token URL policy is applied. */
export interface TokenRequest {
  readonly clientId: string;
  readonly clientSecret: string;
  readonly accessTokenUrl: string;
  readonly grantType: string;
  readonly scope?: string;
  readonly audience?: string;
  readonly authMethod: AuthMethod;
}

export const MAX_BODY_BYTES = 64 * 1024;

const PRINTABLE_ASCII = /^[\x20-\x7E]*$/;
// RFC 6749 A.10: grant-name = 1*name-char, or an absolute URI (RFC 3986 characters only).
const GRANT_NAME = /^[-._A-Za-z0-9]+$/;
const ABSOLUTE_URI = /^[A-Za-z][A-Za-z0-9+.-]*:[A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=%]+$/;
// RFC 6749 3.3: scope = scope-token *( SP scope-token ), scope-token = 1*NQCHAR.
const SCOPE = /^[\x21\x23-\x5B\x5D-\x7E]+( [\x21\x23-\x5B\x5D-\x7E]+)*$/;
const AUTH_METHODS: readonly AuthMethod[] = ['client_secret_basic', 'client_secret_post'];
const FIELDS = ['client_id', 'client_secret', 'access_token_url', 'grant_type', 'scope', 'audience', 'token_endpoint_auth_method'] as const;
type Field = (typeof FIELDS)[number];
type Fields = Partial<Record<Field, unknown>>;

/** The parts of a payload 2.0 event a token request is read from, as API Gateway always sends them. */
interface EventParts {
  readonly body: string | undefined;
  readonly isBase64Encoded: boolean;
  readonly headers: Readonly<Record<string, string>>;
}

/**
 * Turn an API Gateway payload 2.0 event into a {@link TokenRequest}: check the event is shaped as
 * API Gateway sends it, decode the body (base64 when flagged), enforce the 64 KiB limit, read JSON
 * or form fields, and validate each field.
 */
export function parseTokenRequest(event: unknown): TokenRequest {
  const parts = eventParts(event);
  const body = decodeBody(parts.body, parts.isBase64Encoded);
  const mediaType = mediaTypeOf(headerValue(parts.headers, 'content-type') ?? '');
  let fields: Fields;
  if (mediaType === '' || mediaType === 'application/json') {
    fields = readJson(body);
  } else if (mediaType === 'application/x-www-form-urlencoded') {
    fields = readForm(body);
  } else {
    throw invalidRequest('content-type must be application/json or application/x-www-form-urlencoded');
  }
  return validate(fields);
}

/** `application/json; charset=utf-8` -> `application/json` */
function mediaTypeOf(contentType: string): string {
  const semicolon = contentType.indexOf(';');
  return (semicolon === -1 ? contentType : contentType.slice(0, semicolon)).trim().toLowerCase();
}

/**
 * A direct invoke (console, SDK, another function) can send any JSON; API Gateway always sends a
 * request context, string headers, and a string body or none. Anything else is the caller's mistake.
 */
function eventParts(event: unknown): EventParts {
  const notFromApiGateway = (what: string) => invalidRequest(`The event is not an API Gateway HTTP API request: ${what}`);
  if (!isRecord(event) || !isRecord(event.requestContext)) throw notFromApiGateway('requestContext must be an object');
  const { headers, body, isBase64Encoded } = event;
  if (!isRecord(headers) || !Object.values(headers).every((value) => typeof value === 'string')) {
    throw notFromApiGateway('headers must be an object of strings');
  }
  if (body !== undefined && body !== null && typeof body !== 'string') throw notFromApiGateway('body must be a string');
  if (isBase64Encoded !== undefined && typeof isBase64Encoded !== 'boolean') throw notFromApiGateway('isBase64Encoded must be a boolean');
  return { headers: headers as Record<string, string>, body: body ?? undefined, isBase64Encoded: isBase64Encoded === true };
}

function decodeBody(body: string | undefined, isBase64Encoded: boolean): string {
  if (body === undefined) return '';
  // Refuse before decoding: base64 is 4/3 the size, so this bounds the work an oversized body costs.
  if (isBase64Encoded) {
    if (Math.floor((body.length * 3) / 4) > MAX_BODY_BYTES + 2) throw tooLarge();
    const decoded = Buffer.from(body, 'base64');
    if (decoded.length > MAX_BODY_BYTES) throw tooLarge();
    return decoded.toString('utf8');
  }
  if (body.length > MAX_BODY_BYTES || Buffer.byteLength(body, 'utf8') > MAX_BODY_BYTES) throw tooLarge();
  return body;
}

const tooLarge = (): ExchangeError => new ExchangeError('payload_too_large', `The request body must be at most ${MAX_BODY_BYTES} bytes`);

function readJson(body: string): Fields {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    throw invalidRequest('The request body must be a JSON object');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw invalidRequest('The request body must be a JSON object');
  }
  // Own properties only, so a `__proto__` key or an inherited name can never stand in for a field.
  const fields: Fields = {};
  for (const field of FIELDS) {
    if (Object.hasOwn(parsed, field)) fields[field] = (parsed as Record<string, unknown>)[field];
  }
  return fields;
}

function readForm(body: string): Fields {
  // `curl -d '{...}'` sends JSON labelled as a form; say so rather than report every field missing.
  if (body.trimStart().startsWith('{')) {
    throw invalidRequest('The body is JSON but its content-type is application/x-www-form-urlencoded: send content-type: application/json');
  }
  const params = new URLSearchParams(body);
  const fields: Fields = {};
  for (const field of FIELDS) {
    const values = params.getAll(field);
    // RFC 6749 3.2: request parameters MUST NOT be included more than once.
    if (values.length > 1) throw invalidRequest(`${field} must not be repeated`);
    if (values.length === 1) fields[field] = values[0];
  }
  return fields;
}

function validate(fields: Fields): TokenRequest {
  const clientId = requiredString(fields, 'client_id');
  if (clientId.length < 1 || clientId.length > 256 || !PRINTABLE_ASCII.test(clientId)) {
    throw invalidRequest('client_id must be 1 to 256 printable ASCII characters');
  }
  const clientSecret = requiredString(fields, 'client_secret');
  if (clientSecret.length > 1024 || !PRINTABLE_ASCII.test(clientSecret)) {
    throw invalidRequest('client_secret must be at most 1024 printable ASCII characters');
  }
  const accessTokenUrl = requiredString(fields, 'access_token_url');

  const grantType = optionalString(fields, 'grant_type') ?? 'client_credentials';
  if (!GRANT_NAME.test(grantType) && !ABSOLUTE_URI.test(grantType)) {
    throw invalidRequest('grant_type must be a grant name of letters, digits and -._ or an absolute URI (RFC 6749 A.10)');
  }

  const scope = readScope(fields.scope);

  const audience = optionalString(fields, 'audience');
  if (audience !== undefined && (audience.length < 1 || audience.length > 2048 || !PRINTABLE_ASCII.test(audience))) {
    throw invalidRequest('audience must be 1 to 2048 printable ASCII characters');
  }

  const authMethod = optionalString(fields, 'token_endpoint_auth_method') ?? 'client_secret_basic';
  if (!AUTH_METHODS.includes(authMethod as AuthMethod)) {
    throw invalidRequest('token_endpoint_auth_method must be client_secret_basic or client_secret_post');
  }

  return {
    clientId,
    clientSecret,
    accessTokenUrl,
    grantType,
    authMethod: authMethod as AuthMethod,
    ...(scope === undefined ? {} : { scope }),
    ...(audience === undefined ? {} : { audience }),
  };
}

function readScope(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  let scope: string;
  if (typeof value === 'string') {
    scope = value;
  } else if (Array.isArray(value) && value.every((item) => typeof item === 'string')) {
    scope = value.join(' ');
  } else {
    throw invalidRequest('scope must be a string or an array of strings');
  }
  if (!SCOPE.test(scope)) {
    throw invalidRequest('scope must be space-delimited scope tokens of printable ASCII without " or \\ (RFC 6749 3.3)');
  }
  return scope;
}

function requiredString(fields: Fields, field: Field): string {
  const value = fields[field];
  if (value === undefined) throw invalidRequest(`${field} is required`);
  if (typeof value !== 'string') throw invalidRequest(`${field} must be a string`);
  return value;
}

function optionalString(fields: Fields, field: Field): string | undefined {
  const value = fields[field];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw invalidRequest(`${field} must be a string`);
  return value;
}

/** API Gateway lower-cases header names in payload 2.0; callers of the handler may not. */
function headerValue(headers: Readonly<Record<string, string>>, name: string): string | undefined {
  const exact = headers[name];
  if (exact !== undefined) return exact;
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === name) return value;
  }
  return undefined;
}
