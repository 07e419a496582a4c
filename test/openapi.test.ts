import { systemClock } from '../lambda/clock';
import fc from 'fast-check';
import { JWT_BEARER_ASSERTION_TYPE } from '../lambda/request/client-assertion';
import { loadConfig } from '../lambda/config';
import { ExchangeError, INTERNAL_ERROR_DESCRIPTION, UPSTREAM_ERROR_DESCRIPTION, UPSTREAM_TIMEOUT_DESCRIPTION } from '../lambda/errors';
import { createHandler, type TokenHandler } from '../lambda/handler';
import { errorResponse, publicJsonResponse } from '../lambda/responses';
import { JWKS_PATH, TOKEN_PATHS } from '../lambda/request/routes';
import { parseTokenRequest } from '../lambda/request/token-request';
import { CONTRACT_ERROR_STATUS, type ContractErrorCode, MAX_BODY_BYTES, UNAUTHORIZED_DESCRIPTION } from './support/contract';
import { CALLER, type CredentialSources, startCredentialSources, storedCredentials } from './support/credential-sources';
import { formEvent, PAYLOAD_FORMATS, recordingObservability, tokenEvent } from './support/events';
import { type ActualResponse, loadOpenApi, OpenApiValidator, type ResponseObject, structuralProblems } from './support/openapi-validator';
import { issuerScript, metadataDocument, OIDC_DISCOVERY, wellKnownPaths } from './support/scripted-issuer';
import { DEMO_TOKEN, json, startTokenServer, type TokenServer } from './support/token-server';

const document = loadOpenApi();
// A compact JWS of the right shape: `{"alg":"ES256","typ":"JWT"}`, `{"iss":"demo-client"}`, a made-up signature.
const JWS = 'eyJhbGciOiJFUzI1NiIsInR5cCI6IkpXVCJ9.eyJpc3MiOiJkZW1vLWNsaWVudCJ9.c2lnbmF0dXJl';
const api = new OpenApiValidator(document);
const TOKEN_PATH = '/v1/oauth/token';

const documentedResponse = (status: number, path = TOKEN_PATH): ResponseObject | undefined => api.response(path, 'post', status);
const componentResponse = (name: string): ResponseObject => {
  const response = document.components.responses[name];
  if (!response) throw new Error(`openapi.yaml has no components.responses.${name}`);
  return response;
};
/**
 * API Gateway's own answers on the token routes, byte for byte: an unsigned request with IAM callers,
 * a path or method no route matches (a wrong base URL), over its 10 MB payload limit, when its
 * throttling refuses, when it cannot run the function, and when the function has not answered within
 * the 30-second integration limit.
 */
const GATEWAY_ANSWERS: Record<string, string> = {
  '403': '{"message":"Forbidden"}',
  '404': '{"message":"Not Found"}',
  '413': '{"message":"Request Entity Too Large"}',
  '429': '{"message":"Too Many Requests"}',
  '500': '{"message":"Internal Server Error"}',
  '503': '{"message":"Service Unavailable"}',
};

/** The function's error schema for `code` in a documented response: the schema, or the branch of its `oneOf` whose `code` is that code. */
function functionErrorSchema(response: ResponseObject | undefined, code: string): Record<string, unknown> {
  const schema = jsonSchemaOf(response);
  const branches = (schema.oneOf as Record<string, unknown>[] | undefined) ?? [schema];
  const codeOf = (branch: Record<string, unknown>): unknown => {
    const target = typeof branch.$ref === 'string' ? document.components.schemas[branch.$ref.split('/').pop() ?? ''] : branch;
    return (target?.properties as { code?: { const?: unknown } } | undefined)?.code?.const;
  };
  const branch = branches.find((candidate) => codeOf(candidate) === code);
  if (!branch) throw new Error(`no branch of the documented schema has the code ${code}`);
  return branch;
}

const jsonSchemaOf = (response: ResponseObject | undefined) => {
  const schema = response?.content?.['application/json']?.schema;
  if (!schema) throw new Error('the response documents no application/json schema');
  return schema;
};

describe('openapi.yaml', () => {
  it('is structurally valid OpenAPI 3.1: required fields, status codes, unique operationIds, resolving $refs, strict schemas, valid examples', () => {
    // Act
    const problems = structuralProblems(document);

    // Assess
    expect(problems).toEqual([]);
  });

  it('documents POST on both token routes with distinct operationIds', () => {
    // Act
    const operations = TOKEN_PATHS.map((path) => api.operation(path, 'post'));

    // Assess
    expect(Object.keys(document.paths).sort()).toEqual([...TOKEN_PATHS, JWKS_PATH].sort());
    expect(new Set(operations.map((operation) => operation.operationId)).size).toBe(TOKEN_PATHS.length);
  });

  it('lets callers come unsigned, or signed with SigV4 where the stack is deployed for IAM callers', () => {
    const { security } = api.operation(TOKEN_PATH, 'post') as { security?: unknown };
    const schemes = (document.components as { securitySchemes?: Record<string, unknown> }).securitySchemes;

    expect(security).toEqual([{}, { sigv4: [] }]);
    expect(schemes?.sigv4).toMatchObject({
      type: 'apiKey',
      in: 'header',
      name: 'Authorization',
      'x-amazon-apigateway-authtype': 'awsSigv4',
    });
  });

  it('describes both token routes as one operation', () => {
    // Prepare
    const [versioned, unversioned] = TOKEN_PATHS.map((path) => {
      const { operationId: _operationId, ...rest } = api.operation(path, 'post');
      return rest;
    });

    // Assess
    expect(unversioned).toEqual(versioned);
  });

  it("documents exactly the 200, the statuses of the error table and API Gateway's own answers, each error with the code of its status", () => {
    // Prepare
    const responses = api.operation(TOKEN_PATH, 'post').responses;

    // Assess
    const statuses = new Set(['200', ...Object.values(CONTRACT_ERROR_STATUS).map(String), ...Object.keys(GATEWAY_ANSWERS)]);
    expect(Object.keys(responses).sort()).toEqual([...statuses].sort());
    for (const [code, status] of Object.entries(CONTRACT_ERROR_STATUS) as [ContractErrorCode, number][]) {
      const schema = functionErrorSchema(documentedResponse(status), code);
      const fixedDescription =
        status === 401 || code === 'credential_not_allowed' ? [{ keyword: 'const', instancePath: '/description' }] : [];
      expect({
        status,
        anyText: api.failures(schema, { code, description: 'any text' }),
        otherCode: api.failures(schema, { code: 'some_other_code', description: 'any text' }),
        extraField: api.failures(schema, { code, description: 'any text', detail: 'leak' }),
      }).toEqual({
        status,
        // Only the 401 and the stored credentials' 403 fix their descriptions.
        anyText: fixedDescription,
        otherCode: [{ keyword: 'const', instancePath: '/code' }, ...fixedDescription],
        extraField: [{ keyword: 'additionalProperties', instancePath: '' }, ...fixedDescription],
      });
    }
  });

  it('documents content-type, cache-control and pragma on every response the function may give', () => {
    for (const [name, response] of Object.entries(document.components.responses)) {
      // Assess
      expect({ name, media: Object.keys(response.content ?? {}) }).toEqual({ name, media: ['application/json'] });
      if (response['x-answered-by'] === 'api-gateway') continue;
      // The JWKS is public and meant to be cached: its cache-control says so, and it has no pragma.
      if (name === 'Jwks') {
        expect(Object.keys(response.headers ?? {})).toEqual(['cache-control']);
        continue;
      }
      expect({ name, headers: Object.keys(response.headers ?? {}) }).toEqual({
        name,
        headers: expect.arrayContaining(['cache-control', 'pragma']),
      });
    }
  });

  it.each(Object.entries(GATEWAY_ANSWERS))("documents API Gateway's own %s answer, %s, beside the function's", (status, body) => {
    // Prepare
    const documented = documentedResponse(Number(status));
    const answer = { statusCode: Number(status), headers: { 'content-type': 'application/json' }, body };

    // Act
    const problems = api.responseProblems(documented, answer);

    // Assess
    expect(problems).toEqual([]);
    expect(api.failures(jsonSchemaOf(documented), { message: 'Something else', extra: true })).not.toEqual([]);
  });

  it('marks the answers only API Gateway gives, which carry none of the function headers', () => {
    const gatewayOnly = Object.entries(document.components.responses)
      .filter(([, response]) => response['x-answered-by'] === 'api-gateway')
      .map(([name, response]) => [name, Object.keys(response.headers ?? {})]);

    expect(gatewayOnly).toEqual([['TooManyRequests', []]]);
  });

  it("uses the service's own fixed texts in the examples of its fixed-text errors", () => {
    // Prepare
    // The function's examples (API Gateway's carry a message, no description).
    const exampleDescription = (name: string): unknown =>
      Object.values(componentResponse(name).content?.['application/json']?.examples ?? {}).flatMap(
        (example) => (example.value as { description?: unknown }).description ?? [],
      );

    // Assess
    expect(exampleDescription('Unauthorized')).toEqual([UNAUTHORIZED_DESCRIPTION]);
    expect(exampleDescription('UpstreamError')).toEqual([UPSTREAM_ERROR_DESCRIPTION]);
    expect(exampleDescription('UpstreamTimeout')).toEqual([UPSTREAM_TIMEOUT_DESCRIPTION]);
    expect(exampleDescription('InternalError')).toEqual([INTERNAL_ERROR_DESCRIPTION]);
    expect(exampleDescription('RequestTooLarge')).toEqual([`The request body must be at most ${MAX_BODY_BYTES} bytes`]);
  });

  it('documents the 500 that an unexpected error becomes, and its example', () => {
    // Prepare
    const documented = documentedResponse(500);
    const example = documented?.content?.['application/json']?.examples?.bug?.value;

    // Act
    const actual = errorResponse(new TypeError('a bug'));

    // Assess
    expect(api.errorsFor(jsonSchemaOf(documented), example)).toBeUndefined();
    expect(api.responseProblems(documented, actual)).toEqual([]);
  });

  it('reports each way a response departs from its documentation, by failing keyword and place', () => {
    // Prepare
    const headers = { 'content-type': 'application/json', 'cache-control': 'no-store', pragma: 'no-cache' };

    // Act
    const problems = [
      ...api.responseProblems(documentedResponse(200), { statusCode: 200, headers, body: JSON.stringify({ token_type: 'Bearer' }) }),
      ...api.responseProblems(documentedResponse(401), {
        statusCode: 401,
        headers: { ...headers, 'cache-control': 'max-age=60', 'x-debug': '1' },
        body: JSON.stringify({ code: 'unauthorized', description: 'invalid_client: bad secret' }),
      }),
      ...api.responseProblems(documentedResponse(502), { statusCode: 502, headers: { 'content-type': 'text/html' }, body: '<html>' }),
      ...api.responseProblems(documentedResponse(418), { statusCode: 418, headers, body: '{}' }),
    ];

    // Assess
    expect(problems).toEqual([
      { where: 'body', keyword: 'required', instancePath: '' },
      { where: 'body', keyword: 'const', instancePath: '/description' },
      { where: 'header cache-control', keyword: 'const', instancePath: '' },
      { where: 'header x-debug', keyword: 'undocumented' },
      { where: 'content-type', keyword: 'undocumented' },
      { where: 'header cache-control', keyword: 'missing' },
      { where: 'header pragma', keyword: 'missing' },
      { where: 'status', keyword: 'undocumented' },
    ]);
  });
});

describe.each(PAYLOAD_FORMATS)("the handler's real responses through the $name match openapi.yaml", ({ as, noRoute }) => {
  let server: TokenServer;
  let handler: TokenHandler;
  let tokenUrl: string;
  const validBody = (): Record<string, unknown> => ({ client_id: 'demo-client', client_secret: 'demo-secret', access_token_url: tokenUrl });

  beforeAll(async () => {
    server = await startTokenServer();
    tokenUrl = `${server.origin}/token`;
    handler = createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: server.origin, UPSTREAM_TIMEOUT_MS: '300' }), recordingObservability());
  });

  beforeEach(() => {
    server.answer(json(200, DEMO_TOKEN));
  });

  afterAll(async () => {
    await server.close();
  });

  const expectDocumented = (actual: ActualResponse, expectedStatus: number, path = TOKEN_PATH): void => {
    expect(actual.statusCode).toBe(expectedStatus);
    expect(api.responseProblems(documentedResponse(expectedStatus, path), actual)).toEqual([]);
  };

  it.each(TOKEN_PATHS)('answers 200 with the documented token on %s', async (path) => {
    // Act
    const result = await handler(as(tokenEvent(validBody(), { path })));

    // Assess
    expectDocumented(result, 200, path);
    expect(result.body).toBe(JSON.stringify(DEMO_TOKEN));
  });

  it('answers 200 with the documented token for a request by issuer', async () => {
    // Prepare: two round trips, so more time than the handler above gives a loaded machine.
    const issuer = `${server.origin}/realms/documented`;
    server.answer(issuerScript({ [wellKnownPaths('/realms/documented').oidc]: json(200, metadataDocument(issuer, tokenUrl)) }));
    const { access_token_url: _url, ...body } = validBody();
    const byIssuer = createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: server.origin }), recordingObservability());

    // Act
    const result = await byIssuer(as(tokenEvent({ ...body, issuer })));

    // Assess
    expectDocumented(result, 200);
    expect(result.body).toBe(JSON.stringify(DEMO_TOKEN));
  });

  it('answers 403 token_url_not_allowed as documented for an issuer outside the allowlist', async () => {
    // Act
    const { access_token_url: _url, ...body } = validBody();
    const result = await handler(as(tokenEvent({ ...body, issuer: 'https://login.example.com/realms/payments' })));

    // Assess
    expectDocumented(result, 403);
    expect(JSON.parse(result.body ?? '')).toEqual({ code: 'token_url_not_allowed', description: 'issuer is not in the allowlist' });
  });

  it("answers 502 upstream_error as documented when the issuer's metadata names another issuer", async () => {
    // Prepare
    server.answer(
      issuerScript({ [wellKnownPaths('/realms/other').oidc]: json(200, metadataDocument('https://evil.example.com', tokenUrl)) }),
    );
    const { access_token_url: _url, ...body } = validBody();

    // Act
    const result = await handler(as(tokenEvent({ ...body, issuer: `${server.origin}/realms/other` })));

    // Assess
    expectDocumented(result, 502);
  });

  it('answers 200 for a documented form body', async () => {
    // Act
    const result = await handler(as(formEvent({ client_id: 'demo-client', client_secret: 'demo-secret', access_token_url: tokenUrl })));

    // Assess
    expectDocumented(result, 200);
  });

  it('answers 200 with a documented x-token-cache header, miss then hit, when TOKEN_CACHE is on', async () => {
    // Prepare
    const cached = createHandler(
      loadConfig({ TOKEN_URL_ALLOWLIST: server.origin, UPSTREAM_TIMEOUT_MS: '300', TOKEN_CACHE: 'on' }),
      recordingObservability(),
    );

    // Act
    const first = await cached(as(tokenEvent(validBody())));
    const second = await cached(as(tokenEvent(validBody())));

    // Assess
    expect([first.headers?.['x-token-cache'], second.headers?.['x-token-cache']]).toEqual(['miss', 'hit']);
    expectDocumented(first, 200);
    expectDocumented(second, 200);
    expect(Object.keys(documentedResponse(200)?.headers ?? {})).toContain('x-token-cache');
  });

  it('answers 400 invalid_request as documented for a body that is not JSON', async () => {
    // Act
    const result = await handler(as(tokenEvent('client_id=demo-client')));

    // Assess
    expectDocumented(result, 400);
  });

  it('answers 400 invalid_request as documented for a missing field', async () => {
    // Act
    const result = await handler(as(tokenEvent({ client_id: 'demo-client', access_token_url: tokenUrl })));

    // Assess
    expectDocumented(result, 400);
    expect(JSON.parse(result.body ?? '')).toEqual({ code: 'invalid_request', description: 'client_secret is required' });
  });

  it('answers 401 unauthorized as documented when the IdP rejects the secret', async () => {
    // Prepare
    server.answer(json(401, { error: 'invalid_client', error_description: 'bad secret' }));

    // Act
    const result = await handler(as(tokenEvent(validBody())));

    // Assess
    expectDocumented(result, 401);
  });

  it('answers 403 token_url_not_allowed as documented for a URL outside the allowlist', async () => {
    // Prepare: refused by the policy before any connection is made.
    const body = { ...validBody(), access_token_url: 'https://login.example.com/oauth2/token' };

    // Act
    const result = await handler(as(tokenEvent(body)));

    // Assess
    expectDocumented(result, 403);
  });

  it('answers 413 payload_too_large as documented for a body over 64 KiB', async () => {
    // Prepare
    const body = { ...validBody(), padding: 'x'.repeat(MAX_BODY_BYTES) };

    // Act
    const result = await handler(as(tokenEvent(body)));

    // Assess
    expectDocumented(result, 413);
  });

  it('answers 502 upstream_error as documented when the IdP answers 500', async () => {
    // Prepare
    server.answer(json(500, { error: 'server_error' }));

    // Act
    const result = await handler(as(tokenEvent(validBody())));

    // Assess
    expectDocumented(result, 502);
  });

  it('answers 503 upstream_throttled as documented, with retry-after, when the IdP asks to wait', async () => {
    // Prepare
    server.answer(json(429, { error: 'slow_down' }, { 'retry-after': '7' }));

    // Act
    const result = await handler(as(tokenEvent(validBody())));

    // Assess
    expectDocumented(result, 503);
    expect(result.headers?.['retry-after']).toBe('7');
  });

  it('answers 200 stale as documented when the IdP fails and a kept token has gone stale', async () => {
    // Prepare: a 40 s token goes stale after 10 s, and the instance's clock is moved past that
    let now = Date.now();
    const cached = createHandler(
      loadConfig({ TOKEN_URL_ALLOWLIST: server.origin, UPSTREAM_TIMEOUT_MS: '300', TOKEN_CACHE: 'memory' }),
      recordingObservability(),
      systemClock(() => now),
    );
    server.answer(json(200, { ...DEMO_TOKEN, expires_in: 40 }));
    await cached(as(tokenEvent(validBody())));
    now += 15_000;
    server.answer(json(500, { error: 'server_error' }));

    // Act
    const result = await cached(as(tokenEvent(validBody())));

    // Assess
    expectDocumented(result, 200);
    expect(result.headers?.['x-token-cache']).toBe('stale');
  });

  it('answers 504 upstream_timeout as documented when the IdP does not answer in time', async () => {
    // Prepare: never answer; closing the server destroys the held socket.
    server.answer(() => undefined);

    // Act
    const result = await handler(as(tokenEvent(validBody())));

    // Assess
    expectDocumented(result, 504);
  });

  it("answers API Gateway's documented answer for a route that is not a token route", async () => {
    // Act
    const results = await Promise.all([
      handler(as(tokenEvent(validBody(), { method: 'GET' }))),
      handler(as(tokenEvent(validBody(), { path: '/v1/oauth/token/' }))),
    ]);

    // Assess: the HTTP API's NotFound, or the REST API's 403 Missing Authentication Token.
    for (const result of results) {
      expect([result.statusCode, JSON.parse(result.body)]).toEqual([noRoute.status, noRoute.body]);
      const documented = noRoute.status === 404 ? componentResponse('NotFound') : documentedResponse(403);
      expect(api.responseProblems(documented, result)).toEqual([]);
    }
  });
});

describe('the documented request schemas agree with the handler', () => {
  let server: TokenServer;
  let handler: TokenHandler;
  let tokenUrl: string;
  let issuer: string;

  beforeAll(async () => {
    server = await startTokenServer();
    tokenUrl = `${server.origin}/token`;
    issuer = `${server.origin}/idp`;
    // Every issuer under this server publishes its OpenID Connect document, whatever its path.
    server.answer((request, response) => {
      const path = request.url.endsWith(OIDC_DISCOVERY) ? request.url.slice(0, -OIDC_DISCOVERY.length) : undefined;
      const answer =
        request.method === 'GET' && path !== undefined
          ? json(200, metadataDocument(`${server.origin}${path}`, tokenUrl))
          : json(200, DEMO_TOKEN);
      return answer(request, response);
    });
    handler = createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: server.origin, UPSTREAM_TIMEOUT_MS: '5000' }), recordingObservability());
  });

  afterAll(async () => {
    await server.close();
  });

  const requestSchema = (mediaType: string) => {
    const schema = api.requestBody(TOKEN_PATH, 'post').content[mediaType]?.schema;
    if (!schema) throw new Error(`openapi.yaml documents no ${mediaType} request body`);
    return schema;
  };

  const valid = (overrides: Record<string, unknown> = {}): Record<string, unknown> => ({
    client_id: 'demo-client',
    client_secret: 'demo-secret',
    access_token_url: tokenUrl,
    ...overrides,
  });
  /** A private_key_jwt request: a well-shaped caller assertion (the scripted server checks no signature). */
  const assertion = (overrides: Record<string, unknown> = {}): Record<string, unknown> => ({
    client_id: 'demo-client',
    client_assertion: JWS,
    client_assertion_type: JWT_BEARER_ASSERTION_TYPE,
    access_token_url: tokenUrl,
    ...overrides,
  });
  const without = (field: string): Record<string, unknown> => {
    const { [field]: _removed, ...rest } = valid();
    return rest;
  };
  /** A request by issuer: the scripted server publishes metadata for it, listing no methods. */
  const byIssuer = (overrides: Record<string, unknown> = {}): Record<string, unknown> => ({
    ...without('access_token_url'),
    issuer,
    ...overrides,
  });

  const jsonCases: [string, () => unknown, 200 | 400][] = [
    ['the three required fields', () => valid(), 200],
    [
      'every optional field',
      () => valid({ grant_type: 'client_credentials', scope: 'read write', audience: 'https://api.example.com' }),
      200,
    ],
    [
      'a scope array and client_secret_post',
      () => valid({ scope: ['read', 'write'], token_endpoint_auth_method: 'client_secret_post' }),
      200,
    ],
    ['an absolute URI grant type', () => valid({ grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer' }), 200],
    ['an unknown field', () => valid({ client_name: 'billing' }), 200],
    ['client_secret_jwt', () => valid({ token_endpoint_auth_method: 'client_secret_jwt' }), 200],
    ['a client_assertion, which implies private_key_jwt', () => assertion(), 200],
    ['a client_assertion and private_key_jwt', () => assertion({ token_endpoint_auth_method: 'private_key_jwt' }), 200],
    ['a resource', () => valid({ resource: 'https://api.example.com/orders?v=2' }), 200],
    ['an array of resources', () => valid({ resource: ['https://api.example.com/', 'urn:example:billing'] }), 200],
    ['raw Basic credentials', () => valid({ basic_credentials_encoding: 'raw' }), 200],
    [
      'form Basic credentials named with client_secret_basic',
      () => valid({ basic_credentials_encoding: 'form', token_endpoint_auth_method: 'client_secret_basic' }),
      200,
    ],
    ['an empty client_secret', () => valid({ client_secret: '' }), 200],
    ['a client_id of 256 characters', () => valid({ client_id: 'c'.repeat(256) }), 200],
    ['a client_secret of 1024 characters', () => valid({ client_secret: 's'.repeat(1024) }), 200],
    [
      'an access_token_url of 2048 characters',
      () => valid({ access_token_url: `${tokenUrl}?q=${'q'.repeat(2045 - tokenUrl.length)}` }),
      200,
    ],
    ['an audience of 2048 characters', () => valid({ audience: 'a'.repeat(2048) }), 200],
    ['an issuer in place of access_token_url', () => byIssuer(), 200],
    ['an issuer and client_secret_post', () => byIssuer({ token_endpoint_auth_method: 'client_secret_post' }), 200],
    ['an issuer and raw Basic credentials, the method left to the metadata', () => byIssuer({ basic_credentials_encoding: 'raw' }), 200],
    ['an issuer and a client_assertion', () => ({ ...assertion({ access_token_url: undefined }), issuer }), 200],
    ['an issuer of 2048 characters', () => byIssuer({ issuer: `${issuer}/${'i'.repeat(2047 - issuer.length)}` }), 200],
    ['a body that is an array', () => [valid()], 400],
    ['an issuer beside access_token_url', () => valid({ issuer }), 400],
    ['a numeric issuer', () => byIssuer({ issuer: 42 }), 400],
    ['an issuer with a query', () => byIssuer({ issuer: `${issuer}?tenant=a` }), 400],
    ['an issuer without a scheme', () => byIssuer({ issuer: 'login.example.com/realms/payments' }), 400],
    ['an issuer with a space', () => byIssuer({ issuer: `${issuer}/a b` }), 400],
    ['an issuer of 2049 characters', () => byIssuer({ issuer: `${issuer}/${'i'.repeat(2048 - issuer.length)}` }), 400],
    ['a missing client_id', () => without('client_id'), 400],
    ['a missing client_secret', () => without('client_secret'), 400],
    ['a missing access_token_url', () => without('access_token_url'), 400],
    ['an empty client_id', () => valid({ client_id: '' }), 400],
    ['a client_id of 257 characters', () => valid({ client_id: 'c'.repeat(257) }), 400],
    ['a client_id with a newline', () => valid({ client_id: 'demo\nclient' }), 400],
    ['a numeric client_secret', () => valid({ client_secret: 12345 }), 400],
    ['a client_secret of 1025 characters', () => valid({ client_secret: 's'.repeat(1025) }), 400],
    ['an access_token_url without a scheme', () => valid({ access_token_url: 'login.example.com/oauth2/token' }), 400],
    ['an access_token_url with a space', () => valid({ access_token_url: `${tokenUrl}?a= b` }), 400],
    [
      'an access_token_url of 2049 characters',
      () => valid({ access_token_url: `${tokenUrl}?q=${'q'.repeat(2046 - tokenUrl.length)}` }),
      400,
    ],
    ['an audience of 2049 characters', () => valid({ audience: 'a'.repeat(2049) }), 400],
    ['a grant_type with a space', () => valid({ grant_type: 'client credentials' }), 400],
    ['a scope with a double space', () => valid({ scope: 'read  write' }), 400],
    ['a scope with a quote', () => valid({ scope: 'read"' }), 400],
    ['an empty scope array', () => valid({ scope: [] }), 400],
    ['a scope array with a number', () => valid({ scope: ['read', 1] }), 400],
    ['a null audience', () => valid({ audience: null }), 400],
    ['an empty audience', () => valid({ audience: '' }), 400],
    ['an unknown token_endpoint_auth_method', () => valid({ token_endpoint_auth_method: 'none' }), 400],
    ['private_key_jwt without a client_assertion', () => valid({ token_endpoint_auth_method: 'private_key_jwt' }), 400],
    [
      'client_secret_jwt with an empty client_secret',
      () => valid({ token_endpoint_auth_method: 'client_secret_jwt', client_secret: '' }),
      400,
    ],
    ['a client_assertion beside a client_secret', () => assertion({ client_secret: 'demo-secret' }), 400],
    ['a client_assertion with client_secret_post', () => assertion({ token_endpoint_auth_method: 'client_secret_post' }), 400],
    ['a client_assertion without client_assertion_type', () => assertion({ client_assertion_type: undefined }), 400],
    [
      'another client_assertion_type',
      () => assertion({ client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:saml2-bearer' }),
      400,
    ],
    ['a client_assertion_type without a client_assertion', () => valid({ client_assertion_type: JWT_BEARER_ASSERTION_TYPE }), 400],
    ['a client_assertion of two segments', () => assertion({ client_assertion: 'eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJhIn0' }), 400],
    ['a client_assertion over 8 KiB', () => assertion({ client_assertion: `${JWS}${'A'.repeat(8192 - JWS.length + 1)}` }), 400],
    ['a resource with a fragment', () => valid({ resource: 'https://api.example.com/#orders' }), 400],
    ['a relative resource', () => valid({ resource: '/orders' }), 400],
    ['an empty resource array', () => valid({ resource: [] }), 400],
    ['an unknown basic_credentials_encoding', () => valid({ basic_credentials_encoding: 'loose' }), 400],
    [
      'raw Basic credentials with client_secret_post',
      () => valid({ basic_credentials_encoding: 'raw', token_endpoint_auth_method: 'client_secret_post' }),
      400,
    ],
    ['raw Basic credentials with a client_assertion', () => assertion({ basic_credentials_encoding: 'raw' }), 400],
  ];

  it.each(jsonCases)('JSON with %s: the schema and the handler agree (%#)', async (_name, makeBody, expectedStatus) => {
    // Prepare
    const body = makeBody();

    // Act
    const result = await handler(tokenEvent(body));
    const schemaErrors = api.errorsFor(requestSchema('application/json'), body);

    // Assess
    expect({ status: result.statusCode, schemaAccepts: schemaErrors === undefined }).toEqual({
      status: expectedStatus,
      schemaAccepts: expectedStatus === 200,
    });
  });

  const formCases: [string, () => Record<string, string>, 200 | 400][] = [
    ['the three required fields', () => valid() as Record<string, string>, 200],
    ['a space-delimited scope', () => ({ ...(valid() as Record<string, string>), scope: 'read write' }), 200],
    ['a missing client_secret', () => without('client_secret') as Record<string, string>, 400],
    ['a scope with a double space', () => ({ ...(valid() as Record<string, string>), scope: 'read  write' }), 400],
    ['an unknown token_endpoint_auth_method', () => ({ ...(valid() as Record<string, string>), token_endpoint_auth_method: 'none' }), 400],
    ['a client_assertion', () => assertion() as Record<string, string>, 200],
    ['an issuer', () => byIssuer() as Record<string, string>, 200],
    ['an issuer beside access_token_url', () => valid({ issuer }) as Record<string, string>, 400],
    ['a resource', () => ({ ...(valid() as Record<string, string>), resource: 'https://api.example.com/' }), 200],
    ['a client_assertion beside a client_secret', () => assertion({ client_secret: 'demo-secret' }) as Record<string, string>, 400],
    [
      'raw Basic credentials with client_secret_post',
      () => ({
        ...(valid() as Record<string, string>),
        basic_credentials_encoding: 'raw',
        token_endpoint_auth_method: 'client_secret_post',
      }),
      400,
    ],
  ];

  it.each(formCases)('a form with %s: the schema and the handler agree (%#)', async (_name, makeFields, expectedStatus) => {
    // Prepare
    const fields = makeFields();

    // Act
    const result = await handler(formEvent(fields));
    const schemaErrors = api.errorsFor(requestSchema('application/x-www-form-urlencoded'), fields);

    // Assess
    expect({ status: result.statusCode, schemaAccepts: schemaErrors === undefined }).toEqual({
      status: expectedStatus,
      schemaAccepts: expectedStatus === 200,
    });
  });

  it("accepts exactly the JSON bodies that the handler's parser accepts", () => {
    // Prepare: values near each rule's edges, of every JSON type, for every field the parser reads.
    const edgeStrings = fc.constantFrom(
      '',
      ' ',
      'demo-client',
      'client_credentials',
      'urn:ietf:params:oauth:grant-type:jwt-bearer',
      'client_secret_basic',
      'client_secret_post',
      'client_secret_jwt',
      'private_key_jwt',
      'read write',
      'read  write',
      ' read',
      'read"',
      'read\\',
      'x'.repeat(256),
      'x'.repeat(257),
      'x'.repeat(1024),
      'x'.repeat(1025),
      'x'.repeat(2048),
      'x'.repeat(2049),
    );
    const text = fc.oneof(edgeStrings, fc.string({ unit: 'grapheme-ascii', maxLength: 12 }), fc.string({ unit: 'binary', maxLength: 6 }));
    const value = fc.oneof(
      { weight: 6, arbitrary: text },
      { weight: 2, arbitrary: fc.array(text, { maxLength: 3 }) },
      { weight: 1, arbitrary: fc.constantFrom(null, true, 0, 42, {}) },
    );
    // Each field keeps a valid value most of the time, so a rule is probed while the others pass.
    const field = (validValue: string) =>
      fc.oneof({ weight: 3, arbitrary: fc.constant(validValue) }, { weight: 2, arbitrary: fc.option(value, { nil: undefined }) });
    const body = fc.record({
      client_id: field('demo-client'),
      client_secret: field('demo-secret'),
      access_token_url: fc.oneof(
        { weight: 5, arbitrary: fc.constant('https://login.example.com/oauth2/token') },
        fc.constantFrom(undefined, 7),
      ),
      // Rarely present, so most bodies name exactly one of the two.
      issuer: fc.oneof({ weight: 4, arbitrary: fc.constant(undefined) }, fc.constantFrom('https://login.example.com/realms/a', 7, null)),
      grant_type: field('client_credentials'),
      scope: field('read write'),
      audience: field('https://api.example.com'),
      token_endpoint_auth_method: field('client_secret_post'),
      // Rarely present, so the secret methods stay the common case. No three-segment junk: the
      // schema can check the JWS's shape, not decode its header (the handler tests cover that).
      client_assertion: fc.oneof(
        { weight: 4, arbitrary: fc.constant(undefined) },
        { weight: 2, arbitrary: fc.constant(JWS) },
        { weight: 1, arbitrary: fc.constantFrom('', 'not-a-jws', 'a.b', 42, null) },
      ),
      client_assertion_type: fc.oneof(
        { weight: 4, arbitrary: fc.constant(undefined) },
        { weight: 2, arbitrary: fc.constant(JWT_BEARER_ASSERTION_TYPE) },
        { weight: 1, arbitrary: value },
      ),
      resource: fc.oneof(
        { weight: 4, arbitrary: fc.constant(undefined) },
        {
          weight: 2,
          arbitrary: fc.constantFrom(
            'https://api.example.com/',
            ['https://a.example.com/', 'urn:x:y'],
            'https://x.example/#f',
            '/rel',
            '%zz:x',
            [],
          ),
        },
        { weight: 1, arbitrary: value },
      ),
      basic_credentials_encoding: fc.oneof(
        { weight: 4, arbitrary: fc.constant(undefined) },
        { weight: 2, arbitrary: fc.constantFrom('form', 'raw') },
        { weight: 1, arbitrary: value },
      ),
    });
    // A stored credential's request: the name, what the token is for, and now and then a field it must not have.
    const credentialBody = fc.record({
      credential: fc.oneof({ weight: 4, arbitrary: fc.constantFrom('orders-api', 'a', 'a'.repeat(64)) }, { weight: 1, arbitrary: value }),
      grant_type: fc.oneof({ weight: 3, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: value }),
      scope: fc.option(fc.oneof(fc.constant(['read', 'write']), value), { nil: undefined }),
      audience: fc.option(value, { nil: undefined }),
      resource: fc.option(fc.constantFrom('https://api.example.com/', ['urn:x:y'], '/rel', []), { nil: undefined }),
      client_id: fc.oneof({ weight: 4, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: value }),
      issuer: fc.oneof({ weight: 4, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: value }),
    });
    const schema = requestSchema('application/json');

    // Act + Assess
    fc.assert(
      fc.property(fc.oneof({ weight: 3, arbitrary: body }, { weight: 1, arbitrary: credentialBody }), (candidate) => {
        const instance = JSON.parse(JSON.stringify(candidate)) as unknown;
        let parserAccepts = true;
        try {
          parseTokenRequest(tokenEvent(instance));
        } catch (error) {
          if (!(error instanceof ExchangeError)) throw error;
          parserAccepts = false;
        }
        expect({ instance, schemaAccepts: api.errorsFor(schema, instance) === undefined }).toEqual({
          instance,
          schemaAccepts: parserAccepts,
        });
      }),
      { numRuns: 1000 },
    );
  });
});

describe.each(PAYLOAD_FORMATS)("stored credentials' real answers through the $name match openapi.yaml", ({ as }) => {
  let server: TokenServer;
  let sources: CredentialSources;
  let handler: TokenHandler;

  beforeAll(async () => {
    server = await startTokenServer(json(200, DEMO_TOKEN));
    sources = await startCredentialSources();
    sources.secrets.set('documented/secret', 'documented-secret');
    const key = sources.kms.createKey('ECC_NIST_P256');
    const tokenUrl = `${server.origin}/token`;
    handler = createHandler(
      loadConfig({
        TOKEN_URL_ALLOWLIST: server.origin,
        STORED_CREDENTIALS: storedCredentials(
          {
            name: 'orders-api',
            clientId: 'orders',
            tokenUrl,
            method: 'client_secret_post',
            secretId: 'documented/secret',
            scopes: ['read'],
          },
          { name: 'keyless', clientId: 'keyless', tokenUrl, method: 'private_key_jwt', keyId: key.keyId },
        ),
      }),
      recordingObservability(),
    );
  });

  afterAll(async () => {
    await Promise.all([server.close(), sources.close()]);
  });

  const asCaller = (body: Record<string, unknown>) => as(tokenEvent(body, { iamCaller: CALLER }));

  it.each(['orders-api', 'keyless'])('answers 200 with the documented token for the credential %s', async (credential) => {
    // Act
    const result = await handler(asCaller({ credential, scope: 'read' }));

    // Assess
    expect(result.statusCode).toBe(200);
    expect(api.responseProblems(documentedResponse(200), result)).toEqual([]);
    expect(
      api.errorsFor(api.requestBody(TOKEN_PATH, 'post').content['application/json']?.schema ?? {}, { credential, scope: 'read' }),
    ).toBeUndefined();
  });

  it('answers 403 credential_not_allowed as documented, with its one text', async () => {
    // Act
    const result = await handler(asCaller({ credential: 'orders-api', scope: 'write' }));

    // Assess
    expect(result.statusCode).toBe(403);
    expect(api.responseProblems(documentedResponse(403), result)).toEqual([]);
  });

  it('answers the JWKS route as documented', async () => {
    // Act
    const result = await handler(as(tokenEvent(undefined, { method: 'GET', path: JWKS_PATH, contentType: null })));

    // Assess
    expect(result.statusCode).toBe(200);
    expect(api.responseProblems(api.response(JWKS_PATH, 'get', 200), result)).toEqual([]);
  });

  it('documents both lifetimes of the JWKS: 5 minutes, and 30 s while a key is missing', () => {
    const documented = api.response(JWKS_PATH, 'get', 200);
    const lifetimes = [300, 30, 3600].map((seconds) => api.responseProblems(documented, publicJsonResponse({ keys: [] }, seconds)).length);

    expect(lifetimes).toEqual([0, 0, 1]);
  });

  it('documents a JWK Set of public keys only: a private member is refused', () => {
    const schema = componentResponse('Jwks').content?.['application/json']?.schema ?? {};
    const rsa = { kty: 'RSA', kid: 'k'.repeat(43), use: 'sig', alg: 'RS256', n: 'n', e: 'AQAB' };
    expect(api.errorsFor(schema, { keys: [rsa] })).toBeUndefined();
    expect(api.errorsFor(schema, { keys: [{ ...rsa, d: 'private' }] })).toBeDefined();
    expect(api.errorsFor(schema, { keys: [{ ...rsa, alg: 'ES256' }] })).toBeDefined();
  });
});
