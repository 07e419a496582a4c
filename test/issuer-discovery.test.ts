import { loadConfig } from '../lambda/config';
import { createHandler, type TokenHandler } from '../lambda/handler';
import type { MetadataFailure } from '../lambda/upstream/issuer-metadata';
import { decodeJws, verifiesHs256 } from './support/caller-assertions';
import { bodyOf, tokenEvent } from './support/events';
import { after, issuerScript, metadataDocument, requestLines, silent, wellKnownPaths } from './support/scripted-issuer';
import { useScriptedIdp } from './support/scripted-idp';
import { DEMO_TOKEN, json, type ReceivedRequest, type Script, startTokenServer } from './support/token-server';

/** The largest metadata document read: 64 KiB. */
const MAX_METADATA_BYTES = 65_536;

// Requests by `issuer` end to end through the handler, against a scripted metadata server on
// 127.0.0.1 that also plays the token endpoint: which documents are asked for, in which order, what
// is refused, what is kept, and what reaches the token endpoint.

const SECRET = 'discovery-test-secret';
const TOKEN_PATH = '/realms/payments/protocol/openid-connect/token';
const UPSTREAM_ERROR = { code: 'upstream_error', description: 'The identity provider could not be reached or gave an unusable answer' };
const UPSTREAM_TIMEOUT = { code: 'upstream_timeout', description: 'The identity provider did not answer in time' };
const idp = useScriptedIdp({ UPSTREAM_TIMEOUT_MS: '2000' });

const origin = (): string => idp.server.origin;
const issuerAt = (path: string): string => `${origin()}${path}`;
/** The issuer most tests use: a path issuer, as Keycloak's realms are. */
const ISSUER_PATH = '/realms/payments';
const issuer = (): string => issuerAt(ISSUER_PATH);
const tokenUrl = (): string => `${origin()}${TOKEN_PATH}`;

const request = (overrides: Record<string, unknown> = {}) => ({
  client_id: 'service-a',
  client_secret: SECRET,
  issuer: issuer(),
  ...overrides,
});

/** The server plays `issuer()` with this metadata at its OpenID Connect Discovery address. */
function publish(overrides: Record<string, unknown> = {}, token: Script = json(200, DEMO_TOKEN)): void {
  const document = metadataDocument(issuer(), tokenUrl(), overrides);
  idp.server.answer(issuerScript({ [wellKnownPaths(ISSUER_PATH).oidc]: json(200, document) }, token));
}

const posts = (): ReceivedRequest[] => idp.server.received.filter((received) => received.method === 'POST');
const gets = (): ReceivedRequest[] => idp.server.received.filter((received) => received.method === 'GET');

function handlerWith(settings: Record<string, string>): TokenHandler {
  return createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: origin(), ...settings }), idp.observed);
}

describe('finding the token endpoint from the issuer', () => {
  it("reads a path issuer's OpenID Connect Discovery document, then posts to the token endpoint it names", async () => {
    // Prepare
    publish();

    // Act
    const result = await idp.handle(tokenEvent(request({ scope: 'read' })));

    // Assess
    expect(result.statusCode).toBe(200);
    expect(bodyOf(result)).toEqual(DEMO_TOKEN);
    expect(requestLines(idp.server.received)).toEqual([`GET ${ISSUER_PATH}/.well-known/openid-configuration`, `POST ${TOKEN_PATH}`]);
    const [metadataRequest, tokenRequest] = idp.server.received;
    expect(metadataRequest?.method).toBe('GET');
    expect(metadataRequest?.headers.accept).toBe('application/json');
    expect(metadataRequest?.headers['user-agent']).toBe('token-exchange-service');
    expect(metadataRequest?.headers.authorization).toBeUndefined();
    expect(metadataRequest?.body).toBe('');
    expect(Object.fromEntries(tokenRequest?.form ?? [])).toEqual({ grant_type: 'client_credentials', scope: 'read' });
  });

  it.each([
    ['a path', '/tenant/v2.0', '/tenant/v2.0/.well-known/openid-configuration', '/.well-known/oauth-authorization-server/tenant/v2.0'],
    ['a path and a trailing slash', '/acme/', '/acme/.well-known/openid-configuration', '/.well-known/oauth-authorization-server/acme'],
    ['no path', '', '/.well-known/openid-configuration', '/.well-known/oauth-authorization-server'],
    ['only a slash', '/', '/.well-known/openid-configuration', '/.well-known/oauth-authorization-server'],
  ])(
    "falls back to RFC 8414's form for an issuer with %s when the OpenID Connect document is not there",
    async (_case, path, oidcPath, oauthPath) => {
      // Prepare: only RFC 8414's document exists; its issuer is the caller's, trailing slash and all.
      const document = metadataDocument(issuerAt(path), tokenUrl());
      idp.server.answer(issuerScript({ [oauthPath]: json(200, document) }));

      // Act
      const result = await idp.handle(tokenEvent(request({ issuer: issuerAt(path) })));

      // Assess
      expect(result.statusCode).toBe(200);
      expect(requestLines(idp.server.received)).toEqual([`GET ${oidcPath}`, `GET ${oauthPath}`, `POST ${TOKEN_PATH}`]);
      expect(idp.observed.records[0]).toMatchObject({ outcome: 'ok', metadata_status: 200, idp_status: 200 });
    },
  );

  it.each([400, 401, 403, 404, 410, 499])('falls back to the second form after a %i', async (status) => {
    // Prepare
    const paths = wellKnownPaths(ISSUER_PATH);
    idp.server.answer(
      issuerScript({
        [paths.oidc]: json(status, { error: 'nope' }),
        [paths.oauth]: json(200, metadataDocument(issuer(), tokenUrl())),
      }),
    );

    // Act
    const result = await idp.handle(tokenEvent(request()));

    // Assess
    expect(result.statusCode).toBe(200);
    expect(requestLines(gets())).toEqual([`GET ${paths.oidc}`, `GET ${paths.oauth}`]);
  });

  it.each([
    ['a 429', 429, { 'retry-after': '1' }],
    ['a 500', 500, {}],
    ['a 503', 503, {}],
    ['a 300', 300, {}],
    ['a 301 to the other form', 301, { location: '/.well-known/oauth-authorization-server/realms/payments' }],
    ['a 302 to a metadata address', 302, { location: 'http://169.254.169.254/latest/meta-data/' }],
    ['a 307 to another path', 307, { location: '/elsewhere' }],
  ])(
    'answers 502 after %s from the first form, even one carrying a valid document, and asks nothing more',
    async (_case, status, headers) => {
      // Prepare: the second form would answer, were it asked.
      const paths = wellKnownPaths(ISSUER_PATH);
      const document = metadataDocument(issuer(), tokenUrl());
      idp.server.answer(issuerScript({ [paths.oidc]: json(status, document, headers), [paths.oauth]: json(200, document) }));

      // Act
      const result = await idp.handle(tokenEvent(request()));

      // Assess
      expect(result.statusCode).toBe(502);
      expect(bodyOf(result)).toStrictEqual(UPSTREAM_ERROR);
      expect(requestLines(idp.server.received)).toEqual([`GET ${paths.oidc}`]);
      expect(idp.observed.records[0]).toMatchObject({ metadata_status: status, metadata_error: 'http_error' });
    },
  );

  it('answers 502 when neither form is there, after asking each once', async () => {
    // Prepare
    idp.server.answer(issuerScript({}));

    // Act
    const result = await idp.handle(tokenEvent(request()));

    // Assess
    expect(result.statusCode).toBe(502);
    expect(requestLines(idp.server.received)).toEqual([
      `GET ${ISSUER_PATH}/.well-known/openid-configuration`,
      `GET /.well-known/oauth-authorization-server${ISSUER_PATH}`,
    ]);
    expect(idp.observed.records[0]).toMatchObject({ outcome: 'upstream_error', metadata_status: 404, metadata_error: 'http_error' });
  });
});

describe('metadata that is not usable: 502, and no token request', () => {
  // Built inside each test: the server's address is known only once it listens.
  const cases: [string, () => Script, MetadataFailure][] = [
    ['names another issuer', () => json(200, metadataDocument('https://evil.example.com', tokenUrl())), 'issuer_mismatch'],
    ['names the issuer without its path', () => json(200, metadataDocument(origin(), tokenUrl())), 'issuer_mismatch'],
    ['names the issuer with a trailing slash more', () => json(200, metadataDocument(`${issuer()}/`, tokenUrl())), 'issuer_mismatch'],
    ['names the issuer in capitals', () => json(200, metadataDocument(issuer().toUpperCase(), tokenUrl())), 'issuer_mismatch'],
    ['names no issuer', () => json(200, { token_endpoint: tokenUrl() }), 'issuer_mismatch'],
    ['names no token endpoint', () => json(200, { issuer: issuer(), authorization_endpoint: `${issuer()}/auth` }), 'no_token_endpoint'],
    [
      'names a token endpoint that is not a string',
      () => json(200, { issuer: issuer(), token_endpoint: [tokenUrl()] }),
      'no_token_endpoint',
    ],
    ['names a token endpoint that is no URL', () => json(200, { issuer: issuer(), token_endpoint: 'token' }), 'no_token_endpoint'],
    ['names an empty token endpoint', () => json(200, { issuer: issuer(), token_endpoint: '' }), 'no_token_endpoint'],
    ['is HTML', () => json(200, '<html><body>Welcome</body></html>', { 'content-type': 'text/html' }), 'not_json'],
    ['is empty', () => json(200, ''), 'not_json'],
    ['is a JSON array', () => json(200, [metadataDocument(issuer(), tokenUrl())]), 'not_json'],
    ['is JSON null', () => json(200, 'null'), 'not_json'],
    ['is a JSON string', () => json(200, JSON.stringify(issuer())), 'not_json'],
  ];

  it.each(cases)('when the document %s', async (_case, script, failure) => {
    // Prepare
    idp.server.answer(issuerScript({ [wellKnownPaths(ISSUER_PATH).oidc]: script() }));

    // Act
    const result = await idp.handle(tokenEvent(request()));

    // Assess
    expect(result.statusCode).toBe(502);
    expect(bodyOf(result)).toStrictEqual(UPSTREAM_ERROR);
    expect(posts()).toEqual([]);
    // A document that is there but wrong is not worked around with the other form.
    expect(gets()).toHaveLength(1);
    expect(idp.observed.records[0]).toMatchObject({ outcome: 'upstream_error', metadata_status: 200, metadata_error: failure });
  });

  it.each([
    ['declared by its content-length', true],
    ['sent in chunks without a length', false],
  ])('when the document is over the size limit, %s', async (_case, declared) => {
    // Prepare: valid JSON, padded just past the limit.
    const document = JSON.stringify(metadataDocument(issuer(), tokenUrl(), { padding: '' }));
    const padded = document.replace('"padding":""', `"padding":"${'x'.repeat(MAX_METADATA_BYTES - document.length + 1)}"`);
    expect(Buffer.byteLength(padded)).toBe(MAX_METADATA_BYTES + 1);
    idp.server.answer(
      issuerScript({
        [wellKnownPaths(ISSUER_PATH).oidc]: (_req, res) => {
          res.writeHead(200, { 'content-type': 'application/json', ...(declared ? { 'content-length': String(padded.length) } : {}) });
          // Two writes, so an undeclared length arrives in more than one chunk.
          res.write(padded.slice(0, 1000));
          res.end(padded.slice(1000));
        },
      }),
    );

    // Act
    const result = await idp.handle(tokenEvent(request()));

    // Assess
    expect(result.statusCode).toBe(502);
    expect(posts()).toEqual([]);
    expect(idp.observed.records[0]).toMatchObject({ metadata_error: 'too_large' });
  });

  it.each([
    ['declared by its content-length', true],
    ['sent in chunks without a length', false],
  ])('reads a document of exactly the size limit, %s', async (_case, declared) => {
    // Prepare
    const document = JSON.stringify(metadataDocument(issuer(), tokenUrl(), { padding: '' }));
    const padded = document.replace('"padding":""', `"padding":"${'x'.repeat(MAX_METADATA_BYTES - document.length)}"`);
    expect(Buffer.byteLength(padded)).toBe(MAX_METADATA_BYTES);
    const headers: Record<string, string> = declared ? { 'content-length': String(MAX_METADATA_BYTES) } : {};
    idp.server.answer(issuerScript({ [wellKnownPaths(ISSUER_PATH).oidc]: json(200, padded, headers) }));

    // Act
    const result = await idp.handle(tokenEvent(request()));

    // Assess
    expect(result.statusCode).toBe(200);
  });

  it('when the issuer cannot be reached', async () => {
    // Prepare: a port nothing listens on any more.
    const closed = await startTokenServer();
    const deadOrigin = closed.origin;
    await closed.close();
    const handle = createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: deadOrigin }), idp.observed);

    // Act
    const result = await handle(tokenEvent(request({ issuer: `${deadOrigin}/realms/payments` })));

    // Assess
    expect(result.statusCode).toBe(502);
    expect(bodyOf(result)).toStrictEqual(UPSTREAM_ERROR);
    expect(idp.observed.records[0]).toMatchObject({ outcome: 'upstream_error', metadata_error: 'unreachable', idp_host: '127.0.0.1' });
    expect(idp.observed.records[0]?.metadata_status).toBeUndefined();
  });
});

/** How the token request authenticated the client, as the token endpoint saw it. */
function methodSeen(received: ReceivedRequest | undefined): string {
  if (received?.headers.authorization?.startsWith('Basic ')) return 'client_secret_basic';
  if (received?.form.has('client_secret')) return 'client_secret_post';
  if (received?.form.get('client_assertion_type') === 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer') {
    return received.form.has('client_secret') ? 'both' : 'jwt';
  }
  return 'none';
}

describe('the client authentication method of a request by issuer', () => {
  it.each([
    ['no list', undefined, 'client_secret_basic'],
    ['an empty list', [], 'client_secret_basic'],
    ['only client_secret_post', ['client_secret_post'], 'client_secret_post'],
    ['client_secret_post before client_secret_basic', ['client_secret_post', 'client_secret_basic'], 'client_secret_basic'],
    ['client_secret_jwt before client_secret_post', ['client_secret_jwt', 'client_secret_post'], 'client_secret_post'],
    ['private_key_jwt and client_secret_jwt', ['private_key_jwt', 'client_secret_jwt'], 'jwt'],
    ['only methods the service does not use', ['private_key_jwt', 'tls_client_auth', 'none'], 'client_secret_basic'],
    ['a string instead of a list', 'client_secret_post', 'client_secret_basic'],
  ])('is chosen from the metadata when the request names none: %s', async (_case, methods, expected) => {
    // Prepare
    publish(methods === undefined ? {} : { token_endpoint_auth_methods_supported: methods });

    // Act
    const result = await idp.handle(tokenEvent(request()));

    // Assess
    expect(result.statusCode).toBe(200);
    expect(methodSeen(posts()[0])).toBe(expected);
  });

  it('signs a client_secret_jwt assertion for the token endpoint the metadata names', async () => {
    // Prepare
    publish({ token_endpoint_auth_methods_supported: ['client_secret_jwt'] });

    // Act
    await idp.handle(tokenEvent(request()));

    // Assess
    const assertion = posts()[0]?.form.get('client_assertion') ?? '';
    expect(decodeJws(assertion).claims).toMatchObject({ iss: 'service-a', sub: 'service-a', aud: tokenUrl() });
    expect(verifiesHs256(assertion, SECRET)).toBe(true);
  });

  it.each([
    ['client_secret_basic', ['client_secret_post'], 'client_secret_basic'],
    ['client_secret_post', ['client_secret_basic'], 'client_secret_post'],
    ['client_secret_jwt', [], 'jwt'],
  ])('is the one the request names, %s, whatever the metadata lists', async (named, methods, expected) => {
    // Prepare
    publish({ token_endpoint_auth_methods_supported: methods });

    // Act
    const result = await idp.handle(tokenEvent(request({ token_endpoint_auth_method: named })));

    // Assess
    expect(result.statusCode).toBe(200);
    expect(methodSeen(posts()[0])).toBe(expected);
  });

  it('is private_key_jwt with a client_assertion, whatever the metadata lists', async () => {
    // Prepare
    publish({ token_endpoint_auth_methods_supported: ['client_secret_basic'] });
    const assertion = 'eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJzZXJ2aWNlLWEifQ.c2lnbmF0dXJl';

    // Act
    const result = await idp.handle(
      tokenEvent({
        client_id: 'service-a',
        issuer: issuer(),
        client_assertion: assertion,
        client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
      }),
    );

    // Assess
    expect(result.statusCode).toBe(200);
    expect(posts()[0]?.form.get('client_assertion')).toBe(assertion);
    expect(posts()[0]?.headers.authorization).toBeUndefined();
  });

  it('sends raw Basic credentials when the metadata leads to client_secret_basic', async () => {
    // Prepare: characters form-encoding would change
    publish({ token_endpoint_auth_methods_supported: ['client_secret_basic'] });

    // Act
    const result = await idp.handle(tokenEvent(request({ client_secret: 'a+b c', basic_credentials_encoding: 'raw' })));

    // Assess
    expect(result.statusCode).toBe(200);
    const credentials = Buffer.from((posts()[0]?.headers.authorization ?? '').slice('Basic '.length), 'base64').toString();
    expect(credentials).toBe('service-a:a+b c');
  });

  it.each([
    [
      'basic_credentials_encoding when the metadata leads to client_secret_post',
      { basic_credentials_encoding: 'form' },
      ['client_secret_post'],
      "basic_credentials_encoding applies only to client_secret_basic, and the issuer's metadata leads to client_secret_post: send token_endpoint_auth_method client_secret_basic to use it",
    ],
    [
      'an empty secret when the metadata leads to client_secret_jwt',
      { client_secret: '' },
      ['client_secret_jwt'],
      "client_secret must not be empty with client_secret_jwt, the method the issuer's metadata leads to: it is the key the assertion is signed with",
    ],
  ])('refuses %s with a 400 that says where the method came from', async (_case, overrides, methods, description) => {
    // Prepare
    publish({ token_endpoint_auth_methods_supported: methods });

    // Act
    const result = await idp.handle(tokenEvent(request(overrides)));

    // Assess
    expect(result.statusCode).toBe(400);
    expect(bodyOf(result)).toStrictEqual({ code: 'invalid_request', description });
    expect(posts()).toEqual([]);
  });

  it('accepts an empty secret when the metadata leads to a method that sends it', async () => {
    // Prepare
    publish({ token_endpoint_auth_methods_supported: ['client_secret_post'] });

    // Act
    const result = await idp.handle(tokenEvent(request({ client_secret: '' })));

    // Assess
    expect(result.statusCode).toBe(200);
    expect(posts()[0]?.form.get('client_secret')).toBe('');
  });
});

describe('what a request by issuer must carry', () => {
  const invalid = async (body: Record<string, unknown>, description: string): Promise<void> => {
    const result = await idp.handle(tokenEvent(body));
    expect(result.statusCode).toBe(400);
    expect(bodyOf(result)).toStrictEqual({ code: 'invalid_request', description });
    expect(idp.server.received).toEqual([]);
  };

  it('refuses issuer beside access_token_url, naming both', async () => {
    await invalid(
      request({ access_token_url: tokenUrl() }),
      'access_token_url and issuer must not both be sent: the token URL is either given or read from the issuer',
    );
  });

  it.each([
    ['a number', 42, 'issuer must be a string'],
    ['null', null, 'issuer must be a string'],
    ['not absolute', 'login.example.com/realms/payments', 'issuer must be an absolute URL'],
    ['with a space', 'http://127.0.0.1/realms/pay ments', 'issuer must be an absolute URL of at most 2048 visible ASCII characters'],
  ])('refuses an issuer that is %s, naming issuer', async (_case, value, description) => {
    await invalid(request({ issuer: value }), description);
  });

  it.each(['?', '?tenant=a'])('refuses an issuer with a query (%s): RFC 8414 gives it none', async (query) => {
    await invalid(request({ issuer: `${issuer()}${query}` }), 'issuer must not have a query (RFC 8414 2)');
  });

  it('still needs the secret when the method is left to the metadata', async () => {
    await invalid({ client_id: 'service-a', issuer: issuer() }, 'client_secret is required');
  });

  it.each([
    [{ client_secret: 's'.repeat(1025) }, 'client_secret must be at most 1024 printable ASCII characters'],
    [{ basic_credentials_encoding: 'loose' }, 'basic_credentials_encoding must be form or raw'],
    [
      { client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer' },
      'client_assertion_type is only sent with client_assertion (private_key_jwt)',
    ],
  ])('holds the secret fields to their rules before the metadata is asked: %p', async (overrides, description) => {
    await invalid(request(overrides), description);
  });

  it.each([
    ['an issuer outside the allowlist', 'https://login.example.com/realms/payments', 'issuer is not in the allowlist'],
    ['an issuer with user-info', 'http://user@127.0.0.1/realms/payments', 'issuer must not contain user-info'],
    ['an issuer with a fragment', 'http://127.0.0.1/realms/payments#x', 'issuer must not contain a fragment'],
    ['an ftp issuer', 'ftp://127.0.0.1/realms/payments', 'issuer must use https'],
  ])('answers 403 for %s, naming issuer, and asks nothing', async (_case, value, description) => {
    // Act
    const result = await idp.handle(tokenEvent(request({ issuer: value })));

    // Assess
    expect(result.statusCode).toBe(403);
    expect(bodyOf(result)).toStrictEqual({ code: 'token_url_not_allowed', description });
    expect(idp.server.received).toEqual([]);
  });
});

describe('an allowlist that names issuers', () => {
  it.each([
    ['a Keycloak realm, named as the issuer', ISSUER_PATH, ISSUER_PATH, TOKEN_PATH],
    ['an Entra ID tenant, named with a trailing slash', '/tenant-id/', '/tenant-id/v2.0', '/tenant-id/oauth2/v2.0/token'],
  ])(
    'admits the issuer of %s, both its metadata forms and the token endpoint under it',
    async (_case, entryPath, issuerPath, tokenPath) => {
      // Prepare: RFC 8414's form lies outside the entry's path, and is still asked: it is the issuer's.
      const handle = handlerWith({ TOKEN_URL_ALLOWLIST: `${origin()}${entryPath}` });
      const paths = wellKnownPaths(issuerPath);
      idp.server.answer(issuerScript({ [paths.oauth]: json(200, metadataDocument(issuerAt(issuerPath), `${origin()}${tokenPath}`)) }));

      // Act
      const result = await handle(tokenEvent(request({ issuer: issuerAt(issuerPath) })));

      // Assess
      expect(result.statusCode).toBe(200);
      expect(requestLines(idp.server.received)).toEqual([`GET ${paths.oidc}`, `GET ${paths.oauth}`, `POST ${tokenPath}`]);
    },
  );

  it.each([
    ['another realm', '/realms/other'],
    ['a look-alike realm', '/realms/payments-evil'],
    ['the host root', '/'],
    // The prefix rule: an entry ending in / admits what lies under it, not the path without the slash.
    ['the realm itself, when the entry ends in /', ISSUER_PATH, `${ISSUER_PATH}/`],
  ])('refuses an issuer at %s with 403, asking nothing', async (_case, path, entryPath = ISSUER_PATH) => {
    // Prepare
    const handle = handlerWith({ TOKEN_URL_ALLOWLIST: `${origin()}${entryPath}` });

    // Act
    const result = await handle(tokenEvent(request({ issuer: issuerAt(path) })));

    // Assess
    expect(result.statusCode).toBe(403);
    expect(bodyOf(result)).toStrictEqual({ code: 'token_url_not_allowed', description: 'issuer is not in the allowlist' });
    expect(idp.server.received).toEqual([]);
  });

  it('refuses a token endpoint the metadata puts outside the entry with 403, and sends no token request', async () => {
    // Prepare
    const handle = handlerWith({ TOKEN_URL_ALLOWLIST: `${origin()}${ISSUER_PATH}` });
    idp.server.answer(
      issuerScript({ [wellKnownPaths(ISSUER_PATH).oidc]: json(200, metadataDocument(issuer(), `${origin()}/admin/token`)) }),
    );

    // Act
    const result = await handle(tokenEvent(request()));

    // Assess
    expect(result.statusCode).toBe(403);
    expect(bodyOf(result)).toStrictEqual({
      code: 'token_url_not_allowed',
      description: "the issuer's token_endpoint is not in the allowlist",
    });
    expect(posts()).toEqual([]);
    expect(idp.observed.records[0]).toMatchObject({ outcome: 'token_url_not_allowed', metadata_error: 'token_endpoint_not_allowed' });
  });
});

describe('metadata kept per instance', () => {
  it('is fetched once for many requests in a row', async () => {
    // Prepare
    publish();

    // Act
    const results = [];
    for (let i = 0; i < 5; i++) results.push(await idp.handle(tokenEvent(request())));

    // Assess
    expect(results.map((result) => result.statusCode)).toEqual([200, 200, 200, 200, 200]);
    expect(gets()).toHaveLength(1);
    expect(posts()).toHaveLength(5);
    // Only the fetch is timed and has a status; the kept copy answers the others.
    expect(idp.observed.records.map((record) => [record.metadata_status, typeof record.metadata_latency_ms])).toEqual([
      [200, 'number'],
      [undefined, 'undefined'],
      [undefined, 'undefined'],
      [undefined, 'undefined'],
      [undefined, 'undefined'],
    ]);
  });

  it('is kept per issuer: another issuer on the same host is fetched on its own', async () => {
    // Prepare
    const other = '/realms/billing';
    idp.server.answer(
      issuerScript({
        [wellKnownPaths(ISSUER_PATH).oidc]: json(200, metadataDocument(issuer(), tokenUrl())),
        [wellKnownPaths(other).oidc]: json(200, metadataDocument(issuerAt(other), `${origin()}${other}/token`)),
      }),
    );

    // Act
    await idp.handle(tokenEvent(request()));
    await idp.handle(tokenEvent(request({ issuer: issuerAt(other) })));
    await idp.handle(tokenEvent(request()));

    // Assess
    expect(requestLines(idp.server.received)).toEqual([
      `GET ${wellKnownPaths(ISSUER_PATH).oidc}`,
      `POST ${TOKEN_PATH}`,
      `GET ${wellKnownPaths(other).oidc}`,
      `POST ${other}/token`,
      `POST ${TOKEN_PATH}`,
    ]);
  });

  it('is never a failure: the request after one asks again', async () => {
    // Prepare
    let answers = 0;
    const flaky: Script = (req, res) => (++answers === 1 ? json(500, {}) : json(200, metadataDocument(issuer(), tokenUrl())))(req, res);
    idp.server.answer(issuerScript({ [wellKnownPaths(ISSUER_PATH).oidc]: flaky }));

    // Act
    const first = await idp.handle(tokenEvent(request()));
    const second = await idp.handle(tokenEvent(request()));

    // Assess
    expect([first.statusCode, second.statusCode]).toEqual([502, 200]);
    expect(gets()).toHaveLength(2);
  });

  it('is shared by a burst of concurrent requests, which wait for one fetch', async () => {
    // Prepare: slow enough that every request arrives while the fetch runs.
    const document = metadataDocument(issuer(), tokenUrl());
    idp.server.answer(issuerScript({ [wellKnownPaths(ISSUER_PATH).oidc]: after(200, json(200, document)) }));

    // Act
    const results = await Promise.all(Array.from({ length: 20 }, () => idp.handle(tokenEvent(request()))));

    // Assess
    expect(results.every((result) => result.statusCode === 200)).toBe(true);
    expect(gets()).toHaveLength(1);
    expect(posts()).toHaveLength(20);
    // Each waited on the network, so each reports the fetch's status and its own wait.
    expect(idp.observed.records.every((record) => record.metadata_status === 200 && (record.metadata_latency_ms ?? 0) > 0)).toBe(true);
  });

  it('shares a failing fetch with the burst, and keeps nothing of it', async () => {
    // Prepare
    idp.server.answer(issuerScript({ [wellKnownPaths(ISSUER_PATH).oidc]: after(200, json(500, {})) }));

    // Act
    const burst = await Promise.all(Array.from({ length: 10 }, () => idp.handle(tokenEvent(request()))));
    publish();
    const next = await idp.handle(tokenEvent(request()));

    // Assess
    expect(burst.map((result) => result.statusCode)).toEqual(Array.from({ length: 10 }, () => 502));
    expect(next.statusCode).toBe(200);
    expect(gets()).toHaveLength(2);
    expect(idp.observed.records.slice(0, 10).every((record) => record.metadata_error === 'http_error')).toBe(true);
  });
});

describe('the deadline of a request by issuer', () => {
  const TIMEOUT_MS = 600;
  // A loaded machine runs timers late, never early.
  const LATE_MS = 800;

  async function timed(handle: TokenHandler, body: Record<string, unknown>): Promise<{ status?: number; elapsed: number; body: unknown }> {
    const started = performance.now();
    const result = await handle(tokenEvent(body));
    return { status: result.statusCode, elapsed: performance.now() - started, body: bodyOf(result) };
  }

  it('is a 504 at UPSTREAM_TIMEOUT_MS when the metadata never comes, with no token request', async () => {
    // Prepare
    const handle = handlerWith({ UPSTREAM_TIMEOUT_MS: String(TIMEOUT_MS) });
    idp.server.answer(issuerScript({ [wellKnownPaths(ISSUER_PATH).oidc]: silent }));

    // Act
    const { status, elapsed, body } = await timed(handle, request());

    // Assess
    expect({ status, body }).toStrictEqual({ status: 504, body: UPSTREAM_TIMEOUT });
    expect(elapsed).toBeGreaterThanOrEqual(TIMEOUT_MS - 1);
    expect(elapsed).toBeLessThan(TIMEOUT_MS + LATE_MS);
    expect(posts()).toEqual([]);
    expect(idp.observed.records[0]).toMatchObject({ outcome: 'upstream_timeout', metadata_error: 'timeout' });
  });

  it('covers both forms: a slow 404 and a silent second form end at UPSTREAM_TIMEOUT_MS', async () => {
    // Prepare
    const handle = handlerWith({ UPSTREAM_TIMEOUT_MS: String(TIMEOUT_MS) });
    const paths = wellKnownPaths(ISSUER_PATH);
    idp.server.answer(issuerScript({ [paths.oidc]: after(TIMEOUT_MS / 2, json(404, {})), [paths.oauth]: silent }));

    // Act
    const { status, elapsed } = await timed(handle, request());

    // Assess
    expect(status).toBe(504);
    expect(elapsed).toBeLessThan(TIMEOUT_MS + LATE_MS);
    expect(gets()).toHaveLength(2);
    expect(idp.observed.records[0]).toMatchObject({ metadata_status: 404, metadata_error: 'timeout' });
  });

  it.each([
    ['off', 'off'],
    ['memory', 'memory'],
  ])('leaves the token request only what the metadata left of it (TOKEN_CACHE=%s)', async (_case, tokenCache) => {
    // Prepare: the metadata takes half the time, then the token endpoint never answers.
    const timeoutMs = 2000;
    const handle = handlerWith({ UPSTREAM_TIMEOUT_MS: String(timeoutMs), TOKEN_CACHE: tokenCache });
    const document = metadataDocument(issuer(), tokenUrl());
    idp.server.answer(issuerScript({ [wellKnownPaths(ISSUER_PATH).oidc]: after(timeoutMs / 2, json(200, document)) }, silent));

    // Act
    const { status, elapsed } = await timed(handle, request());

    // Assess: a whole UPSTREAM_TIMEOUT_MS more would end past 1.5 times it. Node's timers count whole
    // milliseconds of the loop's time, so the two phases' timers may each fire up to 1 ms early.
    expect(status).toBe(504);
    expect(elapsed).toBeGreaterThanOrEqual(timeoutMs - 3);
    expect(elapsed).toBeLessThan(timeoutMs + LATE_MS);
    expect(posts()).toHaveLength(1);
    expect(idp.observed.records[0]).toMatchObject({ outcome: 'upstream_timeout', metadata_status: 200 });
    expect(idp.observed.records[0]?.metadata_error).toBeUndefined();
  });
});

describe('the token cache and requests by issuer', () => {
  it.each([
    ['access_token_url, then issuer', false],
    ['issuer, then access_token_url', true],
  ])('shares a kept token between a request by %s naming the same endpoint', async (_case, issuerFirst) => {
    // Prepare
    const handle = handlerWith({ TOKEN_CACHE: 'memory' });
    publish();
    const { issuer: _issuer, ...byUrl } = request({ access_token_url: tokenUrl() });
    const bodies = issuerFirst ? [request(), byUrl] : [byUrl, request()];

    // Act
    const first = await handle(tokenEvent(bodies[0]));
    const second = await handle(tokenEvent(bodies[1]));

    // Assess
    expect([first.headers?.['x-token-cache'], second.headers?.['x-token-cache']]).toEqual(['miss', 'hit']);
    expect(posts()).toHaveLength(1);
  });

  it('keeps tokens apart when the metadata leads to another method than the request by URL used', async () => {
    // Prepare
    const handle = handlerWith({ TOKEN_CACHE: 'memory' });
    publish({ token_endpoint_auth_methods_supported: ['client_secret_post'] });
    const { issuer: _issuer, ...byUrl } = request({ access_token_url: tokenUrl() });

    // Act
    const first = await handle(tokenEvent(byUrl));
    const second = await handle(tokenEvent(request()));

    // Assess
    expect([first.headers?.['x-token-cache'], second.headers?.['x-token-cache']]).toEqual(['miss', 'miss']);
    expect(posts().map(methodSeen)).toEqual(['client_secret_basic', 'client_secret_post']);
  });
});

describe('the log line of a request by issuer', () => {
  it("names the token endpoint's host, the metadata status and latency apart from the token request's", async () => {
    // Prepare
    publish();

    // Act
    await idp.handle(tokenEvent(request()));

    // Assess
    const [record] = idp.observed.records;
    expect(record).toMatchObject({ outcome: 'ok', idp_host: '127.0.0.1', metadata_status: 200, idp_status: 200 });
    expect(record?.metadata_latency_ms).toBeGreaterThan(0);
    expect(record?.idp_latency_ms).toBeGreaterThan(0);
    expect(record?.latency_ms).toBeGreaterThanOrEqual((record?.metadata_latency_ms ?? 0) + (record?.idp_latency_ms ?? 0) - 0.2);
    expect(record?.metadata_error).toBeUndefined();
    expect(JSON.stringify(record)).not.toContain(SECRET);
  });

  it('has no metadata fields for a request by access_token_url', async () => {
    // Act
    await idp.handle(tokenEvent({ client_id: 'service-a', client_secret: SECRET, access_token_url: `${origin()}/token` }));

    // Assess
    // As the JSON log line has it: undefined values leave no key.
    const logged = Object.keys(JSON.parse(JSON.stringify(idp.observed.records[0])) as object);
    expect(logged.filter((key) => key.startsWith('metadata_'))).toEqual([]);
    expect(logged).toContain('idp_status');
  });
});
