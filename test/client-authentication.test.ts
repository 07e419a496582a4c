import { JWT_BEARER_ASSERTION_TYPE } from '../lambda/request/client-assertion';
import { loadConfig } from '../lambda/config';
import { createHandler } from '../lambda/handler';
import { assertionClaims, decodeJws, generateCallerKey, signEs256, unsignedShape, verifiesHs256 } from './support/caller-assertions';
import { bodyOf, formEvent, tokenEvent } from './support/events';
import { useScriptedIdp } from './support/scripted-idp';
import { DEMO_TOKEN, json, type ReceivedRequest, type Script } from './support/token-server';

// What each client authentication method and the new parameters put on the wire, seen by a
// scripted token server on 127.0.0.1; and every way a request using them is refused before any
// connection is made.
const SECRET = 'client-auth-test-secret';
const CALLER_KEY = generateCallerKey();
const idp = useScriptedIdp({ UPSTREAM_TIMEOUT_MS: '400' });

const tokenUrl = (): string => `${idp.server.origin}/oauth2/token`;
const request = (overrides: Record<string, unknown> = {}): Record<string, unknown> => ({
  client_id: 'service-a',
  client_secret: SECRET,
  access_token_url: tokenUrl(),
  ...overrides,
});
const callerAssertion = (): string => signEs256(CALLER_KEY, assertionClaims('service-a', tokenUrl()));
const assertionRequest = (assertion = callerAssertion(), overrides: Record<string, unknown> = {}): Record<string, unknown> => ({
  client_id: 'service-a',
  client_assertion: assertion,
  client_assertion_type: JWT_BEARER_ASSERTION_TYPE,
  access_token_url: tokenUrl(),
  ...overrides,
});

const received = (): ReceivedRequest => {
  expect(idp.server.received).toHaveLength(1);
  return idp.server.received[0] as ReceivedRequest;
};
const basicCredentials = (request: ReceivedRequest): string =>
  Buffer.from((request.headers.authorization ?? '').replace(/^Basic /, ''), 'base64').toString('utf8');

describe('client_secret_jwt on the wire', () => {
  it('sends client_id, client_assertion_type and a client_assertion, and no secret anywhere', async () => {
    // Act
    const result = await idp.handle(tokenEvent(request({ token_endpoint_auth_method: 'client_secret_jwt' })));

    // Assess
    expect(result.statusCode).toBe(200);
    const sent = received();
    expect([...sent.form.keys()]).toEqual(['grant_type', 'client_assertion_type', 'client_id', 'client_assertion']);
    expect(sent.form.get('client_assertion_type')).toBe(JWT_BEARER_ASSERTION_TYPE);
    expect(sent.form.get('client_id')).toBe('service-a');
    expect(sent.headers.authorization).toBeUndefined();
    expect(JSON.stringify(sent.headers) + sent.body).not.toContain(SECRET);
  });

  it('signs the assertion with HS256 under the secret, for the client, to the token URL, for at most 60 s', async () => {
    // Prepare
    const before = Math.floor(Date.now() / 1000);

    // Act
    await idp.handle(tokenEvent(request({ token_endpoint_auth_method: 'client_secret_jwt' })));

    // Assess
    const after = Math.ceil(Date.now() / 1000);
    const assertion = received().form.get('client_assertion') ?? '';
    const { header, claims } = decodeJws(assertion);
    expect(verifiesHs256(assertion, SECRET)).toBe(true);
    expect(header).toEqual({ alg: 'HS256', typ: 'JWT' });
    expect(claims).toEqual({
      iss: 'service-a',
      sub: 'service-a',
      aud: tokenUrl(),
      jti: expect.any(String),
      iat: expect.any(Number),
      exp: expect.any(Number),
    });
    expect(claims.iat).toBeGreaterThanOrEqual(before);
    expect(claims.iat).toBeLessThanOrEqual(after);
    expect(Number(claims.exp) - Number(claims.iat)).toBe(60);
  });

  it('gives every assertion its own jti', async () => {
    // Act
    await idp.handle(tokenEvent(request({ token_endpoint_auth_method: 'client_secret_jwt' })));
    await idp.handle(tokenEvent(request({ token_endpoint_auth_method: 'client_secret_jwt' })));

    // Assess
    const jtis = idp.server.received.map((sent) => decodeJws(sent.form.get('client_assertion') ?? '').claims.jti);
    expect(jtis).toHaveLength(2);
    expect(new Set(jtis).size).toBe(2);
  });

  it('refuses an empty client_secret, the key the assertion would be signed with', async () => {
    // Act
    const result = await idp.handle(tokenEvent(request({ token_endpoint_auth_method: 'client_secret_jwt', client_secret: '' })));

    // Assess
    expect(result.statusCode).toBe(400);
    expect(bodyOf(result).description).toMatch(/^client_secret /);
    expect(idp.server.received).toHaveLength(0);
  });
});

describe('private_key_jwt on the wire', () => {
  it("passes the caller's assertion through unchanged with its type and client_id, and sends no secret", async () => {
    // Prepare
    const assertion = callerAssertion();

    // Act
    const result = await idp.handle(tokenEvent(assertionRequest(assertion, { token_endpoint_auth_method: 'private_key_jwt' })));

    // Assess
    expect(result.statusCode).toBe(200);
    const sent = received();
    expect(Object.fromEntries(sent.form)).toEqual({
      grant_type: 'client_credentials',
      client_assertion_type: JWT_BEARER_ASSERTION_TYPE,
      client_id: 'service-a',
      client_assertion: assertion,
    });
    expect(sent.headers.authorization).toBeUndefined();
  });

  it('is implied by client_assertion when token_endpoint_auth_method is left out', async () => {
    // Prepare
    const assertion = callerAssertion();

    // Act
    const result = await idp.handle(tokenEvent(assertionRequest(assertion)));

    // Assess
    expect(result.statusCode).toBe(200);
    expect(received().form.get('client_assertion')).toBe(assertion);
  });

  it('accepts the assertion from a form body too', async () => {
    // Prepare
    const assertion = callerAssertion();

    // Act
    const result = await idp.handle(formEvent(assertionRequest(assertion) as Record<string, string>));

    // Assess
    expect(result.statusCode).toBe(200);
    expect(received().form.get('client_assertion')).toBe(assertion);
  });

  it('never puts the assertion in a log record or an error description', async () => {
    // Prepare
    const assertion = callerAssertion();
    idp.server.answer(json(401, { error: 'invalid_client' }));

    // Act
    const results = [
      await idp.handle(tokenEvent(assertionRequest(assertion))),
      await idp.handle(tokenEvent(assertionRequest(assertion, { token_endpoint_auth_method: 'client_secret_post' }))),
      await idp.handle(tokenEvent(assertionRequest(assertion, { client_assertion_type: 'urn:other' }))),
    ];

    // Assess
    expect(results.map((result) => result.statusCode)).toEqual([401, 400, 400]);
    const text = JSON.stringify(idp.observed.records) + results.map((result) => result.body).join('');
    for (const part of assertion.split('.')) expect(text).not.toContain(part);
  });
});

describe('client assertions refused before any connection, with a 400 naming the field', () => {
  const header = { alg: 'ES256', typ: 'JWT' };
  const claims = { iss: 'service-a', sub: 'service-a' };
  // The descriptions are the caller's only clue to what is wrong, so each is pinned whole.
  const NOT_COMPACT = 'client_assertion must be a compact JWS: three non-empty base64url segments separated by dots';
  const BAD_HEADER = 'client_assertion must have a JOSE header that is a JSON object with a signing alg';
  const BAD_PAYLOAD = 'client_assertion must have a payload that is a JSON object (the JWT claims)';
  const ONLY_PRIVATE_KEY_JWT =
    'client_assertion is only for token_endpoint_auth_method private_key_jwt (leave the method out, or send that)';
  const cases: [string, () => Record<string, unknown>, string][] = [
    [
      'client_assertion with client_secret_basic',
      () => assertionRequest(undefined, { token_endpoint_auth_method: 'client_secret_basic' }),
      ONLY_PRIVATE_KEY_JWT,
    ],
    [
      'client_assertion with client_secret_jwt',
      () => assertionRequest(undefined, { token_endpoint_auth_method: 'client_secret_jwt' }),
      ONLY_PRIVATE_KEY_JWT,
    ],
    [
      'client_assertion with client_secret_post',
      () => assertionRequest(undefined, { token_endpoint_auth_method: 'client_secret_post' }),
      ONLY_PRIVATE_KEY_JWT,
    ],
    [
      'client_assertion beside client_secret',
      () => assertionRequest(undefined, { client_secret: SECRET }),
      'client_secret must not be sent with client_assertion: private_key_jwt authenticates with the assertion alone',
    ],
    [
      'private_key_jwt without client_assertion',
      () => request({ token_endpoint_auth_method: 'private_key_jwt' }),
      'client_assertion is required with token_endpoint_auth_method private_key_jwt',
    ],
    [
      'client_assertion without client_assertion_type',
      () => assertionRequest(undefined, { client_assertion_type: undefined }),
      'client_assertion_type is required with client_assertion',
    ],
    [
      'another client_assertion_type',
      () => assertionRequest(undefined, { client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:saml2-bearer' }),
      'client_assertion_type must be urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
    ],
    [
      'client_assertion_type without client_assertion',
      () => request({ client_assertion_type: JWT_BEARER_ASSERTION_TYPE }),
      'client_assertion_type is only sent with client_assertion (private_key_jwt)',
    ],
    ['a client_assertion that is not a string', () => assertionRequest(42 as unknown as string), 'client_assertion must be a string'],
    ['an empty client_assertion', () => assertionRequest(''), NOT_COMPACT],
    ['two segments', () => assertionRequest('eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJhIn0'), NOT_COMPACT],
    ['four segments', () => assertionRequest(`${unsignedShape(header, claims)}.x`), NOT_COMPACT],
    [
      'an empty signature (an unsecured JWT)',
      () => assertionRequest(`${unsignedShape(header, claims).split('.').slice(0, 2).join('.')}.`),
      NOT_COMPACT,
    ],
    ['characters outside base64url', () => assertionRequest('eyJh+GciOiJFUzI1NiJ9.eyJpc3MiOiJhIn0.c2ln'), NOT_COMPACT],
    [
      'a header that is not JSON',
      () => assertionRequest(`${Buffer.from('not json').toString('base64url')}.eyJpc3MiOiJhIn0.c2ln`),
      BAD_HEADER,
    ],
    ['a header that is a JSON array', () => assertionRequest(unsignedShape(['ES256'], claims)), BAD_HEADER],
    ['a header without alg', () => assertionRequest(unsignedShape({ typ: 'JWT' }, claims)), BAD_HEADER],
    ['alg none', () => assertionRequest(unsignedShape({ alg: 'none' }, claims)), BAD_HEADER],
    ['alg NONE', () => assertionRequest(unsignedShape({ alg: 'NONE' }, claims)), BAD_HEADER],
    ['an empty alg', () => assertionRequest(unsignedShape({ alg: '' }, claims)), BAD_HEADER],
    ['an alg that is not a string', () => assertionRequest(unsignedShape({ alg: 256 }, claims)), BAD_HEADER],
    ['a payload that is a JSON string', () => assertionRequest(unsignedShape(header, 'claims')), BAD_PAYLOAD],
    ['a payload that is JSON null', () => assertionRequest(unsignedShape(header, null)), BAD_PAYLOAD],
    ['a payload that is a JSON array', () => assertionRequest(unsignedShape(header, [claims])), BAD_PAYLOAD],
    [
      'a payload that is not JSON',
      () => assertionRequest(`eyJhbGciOiJFUzI1NiJ9.${Buffer.from('{').toString('base64url')}.c2ln`),
      BAD_PAYLOAD,
    ],
    [
      'an assertion over 8 KiB',
      () => assertionRequest(unsignedShape({ ...header, x5c: ['A'.repeat(8 * 1024)] }, claims)),
      'client_assertion must be at most 8192 characters',
    ],
  ];

  it.each(cases)('%s', async (_name, body, description) => {
    // Act
    const result = await idp.handle(tokenEvent(body()));

    // Assess
    expect(result.statusCode).toBe(400);
    expect(bodyOf(result)).toEqual({ code: 'invalid_request', description });
    expect(idp.server.received).toHaveLength(0);
  });

  it('accepts an assertion of exactly 8 KiB', async () => {
    // Prepare: pad the header until the whole JWS is 8192 characters
    const base = unsignedShape({ ...header, pad: '' }, claims);
    const padded = unsignedShape({ ...header, pad: 'A'.repeat(Math.floor(((8192 - base.length) * 3) / 4)) }, claims);
    const exact = padded.length === 8192 ? padded : undefined;

    // Act
    const result = await idp.handle(tokenEvent(assertionRequest(exact)));

    // Assess
    expect(exact?.length).toBe(8192);
    expect(result.statusCode).toBe(200);
  });
});

describe('basic_credentials_encoding', () => {
  // Every character form-encoding changes, and a space.
  const CLIENT_ID = 'id:+/=%& x';
  const CLIENT_SECRET = 's:+/=%& y';

  it('form (the default) form-encodes id and secret before building the Basic header (RFC 6749 2.3.1)', async () => {
    // Act
    await idp.handle(tokenEvent(request({ client_id: CLIENT_ID, client_secret: CLIENT_SECRET })));
    await idp.handle(tokenEvent(request({ client_id: CLIENT_ID, client_secret: CLIENT_SECRET, basic_credentials_encoding: 'form' })));

    // Assess
    expect(idp.server.received.map(basicCredentials)).toEqual([
      'id%3A%2B%2F%3D%25%26+x:s%3A%2B%2F%3D%25%26+y',
      'id%3A%2B%2F%3D%25%26+x:s%3A%2B%2F%3D%25%26+y',
    ]);
  });

  it('raw puts id and secret in the Basic header exactly as given', async () => {
    // Act
    await idp.handle(tokenEvent(request({ client_id: CLIENT_ID, client_secret: CLIENT_SECRET, basic_credentials_encoding: 'raw' })));

    // Assess
    expect(basicCredentials(received())).toBe('id:+/=%& x:s:+/=%& y');
    expect(received().form.has('client_secret')).toBe(false);
  });

  it('raw gets a token from a server that never form-decodes Basic credentials, where form is refused', async () => {
    // Prepare: like Authlib 1.2 or @node-oauth/oauth2-server 5: split at the first colon, compare
    // as is. (RFC 7617 forbids a colon in the user-id, so this id has none.)
    const clientId = 'app+1/x=y%z&w v';
    idp.server.answer(literalBasicServer(clientId, CLIENT_SECRET));

    // Act
    const form = await idp.handle(tokenEvent(request({ client_id: clientId, client_secret: CLIENT_SECRET })));
    const raw = await idp.handle(
      tokenEvent(request({ client_id: clientId, client_secret: CLIENT_SECRET, basic_credentials_encoding: 'raw' })),
    );

    // Assess
    expect([form.statusCode, raw.statusCode]).toEqual([401, 200]);
  });

  it.each([
    ['an unknown encoding', { basic_credentials_encoding: 'loose' }],
    ['a non-string encoding', { basic_credentials_encoding: true }],
    ['raw with client_secret_post', { basic_credentials_encoding: 'raw', token_endpoint_auth_method: 'client_secret_post' }],
    ['form with client_secret_jwt', { basic_credentials_encoding: 'form', token_endpoint_auth_method: 'client_secret_jwt' }],
  ])('refuses %s with a 400 naming the field', async (_name, fields) => {
    // Act
    const result = await idp.handle(tokenEvent(request(fields)));

    // Assess
    expect(result.statusCode).toBe(400);
    expect(bodyOf(result).description).toMatch(/^basic_credentials_encoding /);
    expect(idp.server.received).toHaveLength(0);
  });

  it('refuses raw with a client_assertion, which implies private_key_jwt', async () => {
    // Act
    const result = await idp.handle(tokenEvent(assertionRequest(undefined, { basic_credentials_encoding: 'raw' })));

    // Assess
    expect(result.statusCode).toBe(400);
    expect(bodyOf(result).description).toMatch(/^basic_credentials_encoding /);
  });
});

/** Answers a token only when the Basic credentials, split at the first colon, are literally id and secret. */
function literalBasicServer(clientId: string, clientSecret: string): Script {
  return (sent, response) => {
    const credentials = basicCredentials(sent);
    const colon = credentials.indexOf(':');
    const ok = credentials.slice(0, colon) === clientId && credentials.slice(colon + 1) === clientSecret;
    return json(ok ? 200 : 401, ok ? DEMO_TOKEN : { error: 'invalid_client' })(sent, response);
  };
}

describe('resource (RFC 8707)', () => {
  it('sends a string resource as one resource parameter', async () => {
    // Act
    await idp.handle(tokenEvent(request({ resource: 'https://api.example.com/orders?v=2' })));

    // Assess
    expect(received().form.getAll('resource')).toEqual(['https://api.example.com/orders?v=2']);
  });

  it('sends each resource of an array as its own resource parameter, in order', async () => {
    // Act
    await idp.handle(tokenEvent(request({ resource: ['https://api.example.com/', 'urn:example:billing', 'https://[2001:db8::1]/x'] })));

    // Assess
    expect(received().body).toBe(
      'grant_type=client_credentials&resource=https%3A%2F%2Fapi.example.com%2F&resource=urn%3Aexample%3Abilling&resource=https%3A%2F%2F%5B2001%3Adb8%3A%3A1%5D%2Fx',
    );
  });

  it('takes a resource repeated in a form body as several resources', async () => {
    // Prepare
    const body = new URLSearchParams(request() as Record<string, string>);
    body.append('resource', 'https://a.example.com/');
    body.append('resource', 'https://b.example.com/');

    // Act
    await idp.handle(tokenEvent(body.toString(), { contentType: 'application/x-www-form-urlencoded' }));

    // Assess
    expect(received().form.getAll('resource')).toEqual(['https://a.example.com/', 'https://b.example.com/']);
  });

  it('sends resource and audience side by side when both are given', async () => {
    // Act
    await idp.handle(tokenEvent(request({ resource: 'https://api.example.com/', audience: 'https://api.example.com/' })));

    // Assess
    expect(Object.fromEntries(received().form)).toEqual({
      grant_type: 'client_credentials',
      audience: 'https://api.example.com/',
      resource: 'https://api.example.com/',
    });
  });

  const NOT_URIS = 'resource must be absolute URIs without a fragment (RFC 8707 2), at most 2048 characters each';
  const NOT_STRINGS = 'resource must be a string or an array of strings';
  it.each([
    ['a relative reference', '/orders', NOT_URIS],
    ['a bare host name', 'api.example.com', NOT_URIS],
    ['a fragment', 'https://api.example.com/#orders', NOT_URIS],
    ['a space', 'https://api.example.com/a b', NOT_URIS],
    ['a bad percent-escape', 'https://api.example.com/%zz', NOT_URIS],
    ['a percent-escape cut short', 'https://api.example.com/%4', NOT_URIS],
    ['a non-ASCII character', 'https://api.example.com/ü', NOT_URIS],
    ['nothing after the scheme', 'https:', NOT_URIS],
    ['an empty string', '', NOT_URIS],
    ['more than 2048 characters', `https://api.example.com/${'a'.repeat(2025)}`, NOT_URIS],
    ['an empty array', [], 'resource must not be an empty array'],
    ['an array holding a number', ['https://api.example.com/', 7], NOT_STRINGS],
    ['an array holding a fragment', ['https://api.example.com/', 'https://api.example.com/#x'], NOT_URIS],
    ['a number', 42, NOT_STRINGS],
    ['an object', { uri: 'https://api.example.com/' }, NOT_STRINGS],
  ])('refuses %s with a 400 naming the rule', async (_name, resource, description) => {
    // Act
    const result = await idp.handle(tokenEvent(request({ resource })));

    // Assess
    expect(result.statusCode).toBe(400);
    expect(bodyOf(result)).toStrictEqual({ code: 'invalid_request', description });
    expect(idp.server.received).toHaveLength(0);
  });

  it('accepts a resource of exactly 2048 characters', async () => {
    // Act
    const result = await idp.handle(tokenEvent(request({ resource: `https://api.example.com/${'a'.repeat(2024)}` })));

    // Assess
    expect(result.statusCode).toBe(200);
  });
});

describe('the token cache with the new methods and parameters', () => {
  beforeEach(() => {
    idp.handle = createHandler(
      loadConfig({ TOKEN_URL_ALLOWLIST: idp.server.origin, UPSTREAM_TIMEOUT_MS: '400', TOKEN_CACHE: 'on' }),
      idp.observed,
    );
  });

  it('answers a repeated client_secret_jwt request from the cache', async () => {
    // Act
    const first = await idp.handle(tokenEvent(request({ token_endpoint_auth_method: 'client_secret_jwt' })));
    const second = await idp.handle(tokenEvent(request({ token_endpoint_auth_method: 'client_secret_jwt' })));

    // Assess
    expect([first.headers?.['x-token-cache'], second.headers?.['x-token-cache']]).toEqual(['miss', 'hit']);
    expect(idp.server.received).toHaveLength(1);
  });

  it('never answers client_secret_jwt from a client_secret_basic entry of the same secret: the method is part of the key', async () => {
    // Act
    await idp.handle(tokenEvent(request()));
    const jwt = await idp.handle(tokenEvent(request({ token_endpoint_auth_method: 'client_secret_jwt' })));

    // Assess
    expect(jwt.headers?.['x-token-cache']).toBe('miss');
    expect(idp.server.received).toHaveLength(2);
  });

  it('sends every private_key_jwt request to the IdP, the same assertion twice included, each a miss', async () => {
    // Prepare
    const body = assertionRequest();

    // Act
    const results = [await idp.handle(tokenEvent(body)), await idp.handle(tokenEvent(body))];

    // Assess
    expect(results.map((result) => result.statusCode)).toEqual([200, 200]);
    expect(results.map((result) => result.headers?.['x-token-cache'])).toEqual(['miss', 'miss']);
    expect(idp.server.received).toHaveLength(2);
    expect(idp.observed.records.map((record) => record.cache)).toEqual(['miss', 'miss']);
  });

  it('keeps tokens for different resources apart', async () => {
    // Act
    await idp.handle(tokenEvent(request({ resource: 'https://a.example.com/' })));
    const other = await idp.handle(tokenEvent(request({ resource: 'https://b.example.com/' })));
    const same = await idp.handle(tokenEvent(request({ resource: ['https://a.example.com/'] })));

    // Assess
    expect([other.headers?.['x-token-cache'], same.headers?.['x-token-cache']]).toEqual(['miss', 'hit']);
  });

  it('keeps form and raw Basic encodings apart', async () => {
    // Act
    await idp.handle(tokenEvent(request()));
    const raw = await idp.handle(tokenEvent(request({ basic_credentials_encoding: 'raw' })));

    // Assess
    expect(raw.headers?.['x-token-cache']).toBe('miss');
  });
});
