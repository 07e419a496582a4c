import { clientAssertionProblem, JWT_BEARER_ASSERTION_TYPE } from './client-assertion';
import { ExchangeError, invalidRequest } from '../errors';
import { eventParts } from './gateway-event';

export type AuthMethod = 'client_secret_basic' | 'client_secret_post' | 'client_secret_jwt' | 'private_key_jwt';

/** How `client_secret_basic` puts id and secret in the header: form-encoded first (RFC 6749 2.3.1), or as given. */
export type BasicCredentialsEncoding = 'form' | 'raw';

/**
 * A validated token request with its token URL: as the caller named it, or as an issuer's metadata
 * gave it. What the policy, the cache and the exchange work on.
 */
export type TokenRequest = RequestFields & ClientAuthentication;

/**
 * What a request names: its token URL (then it is a {@link TokenRequest} as it stands), or its
 * issuer, whose metadata gives the token URL and, when the caller named none, the client
 * authentication method.
 */
export type ParsedTokenRequest = TokenRequest | IssuerRequest;

/**
 * A request for a stored credential's token (`credential`): its name and what the token is for. The
 * broker holds the client and knows the IdP, so the caller sends neither.
 */
export interface CredentialAsk {
  readonly credential: string;
  readonly scope?: string;
  readonly audience?: string;
  readonly resource?: readonly string[];
}

/** A request by `issuer`: everything but the token URL, and the method only if the caller named it. */
export interface IssuerRequest extends Omit<RequestFields, 'accessTokenUrl'> {
  /** As given: the metadata's `issuer` must equal it exactly (RFC 8414 3.3). */
  readonly issuer: string;
  readonly authentication: ClientAuthentication | SecretAwaitingMethod;
}

/** The three methods that authenticate with the client secret: the ones an issuer's metadata may choose among. */
export type SecretMethod = Exclude<AuthMethod, 'private_key_jwt'>;

/**
 * No method named by a request by `issuer`: a client secret, to be sent by the method the issuer's
 * metadata leads to (see {@link withMetadataMethod}).
 */
export interface SecretAwaitingMethod {
  readonly authMethod: 'from_metadata';
  readonly clientSecret: string;
  /** As given: it holds only if the metadata leads to `client_secret_basic`. */
  readonly basicCredentialsEncoding?: BasicCredentialsEncoding;
}

interface RequestFields {
  readonly clientId: string;
  readonly accessTokenUrl: string;
  readonly grantType: string;
  readonly scope?: string;
  readonly audience?: string;
  /** RFC 8707 resource indicators, each sent as its own `resource` parameter. */
  readonly resource?: readonly string[];
}

/** One client authentication method per request (RFC 6749 2.3), with exactly what it needs. */
export type ClientAuthentication =
  | {
      readonly authMethod: 'client_secret_basic';
      readonly clientSecret: string;
      /** Absent: `form`. */
      readonly basicCredentialsEncoding?: BasicCredentialsEncoding;
      readonly clientAssertion?: never;
    }
  | {
      readonly authMethod: 'client_secret_post' | 'client_secret_jwt';
      readonly clientSecret: string;
      readonly basicCredentialsEncoding?: never;
      readonly clientAssertion?: never;
    }
  | {
      readonly authMethod: 'private_key_jwt';
      /** The caller's signed assertion, passed through unread: the service holds no key. */
      readonly clientAssertion: string;
      readonly clientSecret?: never;
      readonly basicCredentialsEncoding?: never;
    };

const MAX_BODY_BYTES = 64 * 1024;

const PRINTABLE_ASCII = /^[\x20-\x7E]*$/;
// RFC 6749 A.10: grant-name = 1*name-char, or an absolute URI (RFC 3986 characters only).
const GRANT_NAME = /^[-._A-Za-z0-9]+$/;
const ABSOLUTE_URI = /^[A-Za-z][A-Za-z0-9+.-]*:[A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=%]+$/;
// RFC 6749 3.3: scope = scope-token *( SP scope-token ), scope-token = 1*NQCHAR.
const SCOPE = /^[\x21\x23-\x5B\x5D-\x7E]+( [\x21\x23-\x5B\x5D-\x7E]+)*$/;
/** RFC 6749 3.3: one scope token. */
export const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]+$/;
/** A stored credential's name: what callers send as `credential`, and what logs and metrics show. */
export const CREDENTIAL_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
// RFC 8707 2: an absolute URI (RFC 3986 4.3) that MAY have a query and MUST NOT have a fragment.
export const RESOURCE_URI = /^[A-Za-z][A-Za-z0-9+.-]*:(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?[\]]|%[0-9A-Fa-f]{2})+$/;
const AUTH_METHODS: readonly AuthMethod[] = ['client_secret_basic', 'client_secret_post', 'client_secret_jwt', 'private_key_jwt'];
const BASIC_ENCODINGS: readonly BasicCredentialsEncoding[] = ['form', 'raw'];
/** Every field of a token request, in the contract's order. */
const REQUEST_FIELDS = [
  'client_id',
  'client_secret',
  'access_token_url',
  'issuer',
  'grant_type',
  'scope',
  'audience',
  'token_endpoint_auth_method',
  'client_assertion',
  'client_assertion_type',
  'resource',
  'basic_credentials_encoding',
  'credential',
] as const;
/** What a stored credential holds: the client and its authentication, and the IdP. */
const CLIENT_FIELDS = [
  'client_id',
  'client_secret',
  'client_assertion',
  'client_assertion_type',
  'access_token_url',
  'issuer',
  'token_endpoint_auth_method',
  'basic_credentials_encoding',
] as const satisfies readonly Field[];
type Field = (typeof REQUEST_FIELDS)[number];
type Fields = Partial<Record<Field, unknown>>;

/**
 * Turn an API Gateway event (payload 2.0 or 1.0) into a {@link ParsedTokenRequest}: check the event is
 * shaped as API Gateway sends it, decode the body (base64 when flagged), enforce the 64 KiB limit, read JSON
 * or form fields, and validate each field.
 */
export function parseTokenRequest(event: unknown): ParsedTokenRequest | CredentialAsk {
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

function decodeBody(body: string, isBase64Encoded: boolean): string {
  // API Gateway bounds a body at 10 MB, so decoding before the size check costs a few ms at most.
  if (isBase64Encoded) {
    const decoded = Buffer.from(body, 'base64');
    if (decoded.length > MAX_BODY_BYTES) throw tooLarge();
    return decoded.toString('utf8');
  }
  if (Buffer.byteLength(body, 'utf8') > MAX_BODY_BYTES) throw tooLarge();
  return body;
}

const tooLarge = (): ExchangeError => new ExchangeError('payload_too_large', `The request body must be at most ${MAX_BODY_BYTES} bytes`);

function readJson(body: string): Fields {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    // Not JSON at all: refused below, like any JSON value that is not an object.
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw invalidRequest('The request body must be a JSON object');
  }
  // Own properties only, so a `__proto__` key or an inherited name can never stand in for a field.
  const fields: Fields = {};
  for (const field of REQUEST_FIELDS) {
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
  for (const field of REQUEST_FIELDS) {
    const values = params.getAll(field);
    // RFC 8707 2: `resource` may be repeated, one indicator each; RFC 6749 3.2: no other parameter.
    if (field === 'resource' && values.length > 1) fields[field] = values;
    else if (values.length > 1) throw invalidRequest(`${field} must not be repeated`);
    else if (values.length === 1) fields[field] = values[0];
  }
  return fields;
}

function validate(fields: Fields): ParsedTokenRequest | CredentialAsk {
  if (fields.credential !== undefined) return readCredentialAsk(fields);
  const clientId = requiredString(fields, 'client_id');
  if (clientId.length < 1 || clientId.length > 256 || !PRINTABLE_ASCII.test(clientId)) {
    throw invalidRequest('client_id must be 1 to 256 printable ASCII characters');
  }
  // By issuer with no method named or implied, the method waits for the issuer's metadata.
  const methodAwaitsMetadata =
    fields.issuer !== undefined && fields.token_endpoint_auth_method === undefined && fields.client_assertion === undefined;
  const credentials = methodAwaitsMetadata ? readSecretAwaitingMethod(fields) : readClientAuthentication(fields);
  const idp = readTokenUrlOrIssuer(fields);

  const grantType = optionalString(fields, 'grant_type') ?? 'client_credentials';
  if (!GRANT_NAME.test(grantType) && !ABSOLUTE_URI.test(grantType)) {
    throw invalidRequest('grant_type must be a grant name of letters, digits and -._ or an absolute URI (RFC 6749 A.10)');
  }

  const fieldsAsked = { clientId, grantType, ...tokenShape(fields) };
  if ('issuer' in idp) return { ...fieldsAsked, issuer: idp.issuer, authentication: credentials };
  // A secret awaits a method only in a request by issuer, which returned above.
  return { ...fieldsAsked, ...(credentials as ClientAuthentication), accessTokenUrl: idp.accessTokenUrl };
}

/** What the token is for: `scope`, `audience` and `resource`, each present only when sent. */
function tokenShape(fields: Fields): Pick<RequestFields, 'scope' | 'audience' | 'resource'> {
  const scope = readScope(fields.scope);
  const audience = optionalString(fields, 'audience');
  if (audience !== undefined && (audience.length < 1 || audience.length > 2048 || !PRINTABLE_ASCII.test(audience))) {
    throw invalidRequest('audience must be 1 to 2048 printable ASCII characters');
  }
  const resource = readResource(fields.resource);
  return {
    ...(scope === undefined ? {} : { scope }),
    ...(audience === undefined ? {} : { audience }),
    ...(resource === undefined ? {} : { resource }),
  };
}

/**
 * A stored credential's request: a well-formed name, nothing that names a client or an IdP (the
 * credential holds both), and the client-credentials grant it was registered for.
 */
function readCredentialAsk(fields: Fields): CredentialAsk {
  const credential = optionalString(fields, 'credential') as string;
  if (!CREDENTIAL_NAME.test(credential)) {
    throw invalidRequest('credential must be 1 to 64 letters, digits, . _ or -, starting with a letter or digit');
  }
  const sent = CLIENT_FIELDS.filter((field) => fields[field] !== undefined);
  if (sent.length > 0) {
    throw invalidRequest(`${sent.join(', ')} must not be sent with credential: the stored credential holds the client and names the IdP`);
  }
  const grantType = optionalString(fields, 'grant_type');
  if (grantType !== undefined && grantType !== 'client_credentials') {
    throw invalidRequest('grant_type must be client_credentials with credential (or left out)');
  }
  return { credential, ...tokenShape(fields) };
}

/** Exactly one of the two ways to name the IdP. */
function readTokenUrlOrIssuer(fields: Fields): { readonly accessTokenUrl: string } | { readonly issuer: string } {
  const accessTokenUrl = optionalString(fields, 'access_token_url');
  const issuer = optionalString(fields, 'issuer');
  if (accessTokenUrl !== undefined && issuer !== undefined) {
    throw invalidRequest('access_token_url and issuer must not both be sent: the token URL is either given or read from the issuer');
  }
  if (issuer !== undefined) return { issuer };
  if (accessTokenUrl === undefined) throw invalidRequest('access_token_url or issuer is required');
  return { accessTokenUrl };
}

/**
 * The client authentication (RFC 6749 2.3, RFC 7521 4.2): a secret for the three secret methods,
 * or the caller's own assertion for `private_key_jwt`, which `client_assertion` implies. One
 * method per request: a field that belongs to another method is refused, never silently dropped.
 */
function readClientAuthentication(fields: Fields): ClientAuthentication {
  const assertion = optionalString(fields, 'client_assertion');
  const method =
    optionalString(fields, 'token_endpoint_auth_method') ?? (assertion === undefined ? 'client_secret_basic' : 'private_key_jwt');
  if (!AUTH_METHODS.includes(method as AuthMethod)) {
    throw invalidRequest(`token_endpoint_auth_method must be one of ${AUTH_METHODS.join(', ')}`);
  }
  const authMethod = method as AuthMethod;

  const encoding = readBasicCredentialsEncoding(fields);
  if (encoding !== undefined && authMethod !== 'client_secret_basic') {
    throw invalidRequest('basic_credentials_encoding applies only to token_endpoint_auth_method client_secret_basic');
  }

  if (authMethod === 'private_key_jwt') {
    if (assertion === undefined) throw invalidRequest('client_assertion is required with token_endpoint_auth_method private_key_jwt');
    if (fields.client_secret !== undefined) {
      throw invalidRequest('client_secret must not be sent with client_assertion: private_key_jwt authenticates with the assertion alone');
    }
    const problem = clientAssertionProblem(assertion);
    if (problem !== undefined) throw invalidRequest(`client_assertion ${problem}`);
    const assertionType = optionalString(fields, 'client_assertion_type');
    if (assertionType === undefined) throw invalidRequest('client_assertion_type is required with client_assertion');
    if (assertionType !== JWT_BEARER_ASSERTION_TYPE) throw invalidRequest(`client_assertion_type must be ${JWT_BEARER_ASSERTION_TYPE}`);
    return { authMethod, clientAssertion: assertion };
  }

  if (assertion !== undefined) {
    throw invalidRequest('client_assertion is only for token_endpoint_auth_method private_key_jwt (leave the method out, or send that)');
  }
  const clientSecret = readClientSecret(fields);
  if (authMethod === 'client_secret_jwt' && clientSecret === '') {
    throw invalidRequest('client_secret must not be empty with client_secret_jwt: it is the key the assertion is signed with');
  }
  if (authMethod === 'client_secret_basic') return { authMethod, clientSecret, basicCredentialsEncoding: encoding ?? 'form' };
  return { authMethod, clientSecret };
}

/** A request by issuer that names no method: the secret and the Basic encoding, each as valid as for any method. */
function readSecretAwaitingMethod(fields: Fields): SecretAwaitingMethod {
  const encoding = readBasicCredentialsEncoding(fields);
  const clientSecret = readClientSecret(fields);
  return { authMethod: 'from_metadata', clientSecret, basicCredentialsEncoding: encoding };
}

/**
 * The client authentication of a request by issuer whose method came from its metadata: the rules
 * that tie the secret and the Basic encoding to a method apply once the method is known, and say
 * where it came from.
 */
export function withMetadataMethod(secret: SecretAwaitingMethod, authMethod: SecretMethod): ClientAuthentication {
  const { clientSecret, basicCredentialsEncoding: encoding } = secret;
  if (authMethod === 'client_secret_basic') return { authMethod, clientSecret, basicCredentialsEncoding: encoding ?? 'form' };
  if (encoding !== undefined) {
    throw invalidRequest(
      `basic_credentials_encoding applies only to client_secret_basic, and the issuer's metadata leads to ${authMethod}: send token_endpoint_auth_method client_secret_basic to use it`,
    );
  }
  if (authMethod === 'client_secret_jwt' && clientSecret === '') {
    throw invalidRequest(
      "client_secret must not be empty with client_secret_jwt, the method the issuer's metadata leads to: it is the key the assertion is signed with",
    );
  }
  return { authMethod, clientSecret };
}

/** The secret of a secret method; no `client_assertion_type` comes with one. */
function readClientSecret(fields: Fields): string {
  if (fields.client_assertion_type !== undefined) {
    throw invalidRequest('client_assertion_type is only sent with client_assertion (private_key_jwt)');
  }
  const clientSecret = requiredString(fields, 'client_secret');
  if (clientSecret.length > 1024 || !PRINTABLE_ASCII.test(clientSecret)) {
    throw invalidRequest('client_secret must be at most 1024 printable ASCII characters');
  }
  return clientSecret;
}

function readBasicCredentialsEncoding(fields: Fields): BasicCredentialsEncoding | undefined {
  const encoding = optionalString(fields, 'basic_credentials_encoding');
  if (encoding !== undefined && !BASIC_ENCODINGS.includes(encoding as BasicCredentialsEncoding)) {
    throw invalidRequest('basic_credentials_encoding must be form or raw');
  }
  return encoding as BasicCredentialsEncoding | undefined;
}

/** RFC 8707 2: one or more absolute URIs without a fragment. */
function readResource(value: unknown): readonly string[] | undefined {
  if (value === undefined) return undefined;
  let resources: readonly unknown[];
  if (typeof value === 'string') {
    resources = [value];
  } else if (Array.isArray(value)) {
    if (value.length === 0) throw invalidRequest('resource must not be an empty array');
    resources = value;
  } else {
    throw invalidRequest('resource must be a string or an array of strings');
  }
  if (!resources.every((item): item is string => typeof item === 'string')) {
    throw invalidRequest('resource must be a string or an array of strings');
  }
  if (!resources.every((item) => item.length <= 2048 && RESOURCE_URI.test(item))) {
    throw invalidRequest('resource must be absolute URIs without a fragment (RFC 8707 2), at most 2048 characters each');
  }
  return resources;
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

/** API Gateway lower-cases header names in payload 2.0 (and 1.0's are lower-cased as read); a direct invoke may not. */
function headerValue(headers: Readonly<Record<string, string>>, name: string): string | undefined {
  const exact = headers[name];
  if (exact !== undefined) return exact;
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === name) return value;
  }
  return undefined;
}
