import { once } from 'node:events';
import { createServer as createTcpServer } from 'node:net';
import { loadConfig } from '../lambda/config';
import { createHandler } from '../lambda/handler';
import { withPermit } from './support/configs';
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { bodyOf, formEvent, PAYLOAD_FORMATS, tokenEvent } from './support/events';
import { useScriptedIdp } from './support/scripted-idp';
import { DEMO_TOKEN, json } from './support/token-server';

const SECRET = 'handler-test-secret';
const idp = useScriptedIdp({ UPSTREAM_TIMEOUT_MS: '400' });

const request = (overrides: Record<string, unknown> = {}) => ({
  client_id: 'service-a',
  client_secret: SECRET,
  access_token_url: `${idp.server.origin}/oauth2/token`,
  ...overrides,
});

const CONTRACT_HEADERS = { 'content-type': 'application/json', 'cache-control': 'no-store', pragma: 'no-cache' };

describe('the token request sent to the IdP', () => {
  it('posts to access_token_url exactly as given, path and query kept', async () => {
    // Act
    await idp.handle(tokenEvent(request({ access_token_url: `${idp.server.origin}/tenant/oauth2/v2.0/token?api-version=2&x=a%20b` })));

    // Assess
    expect(idp.server.received).toHaveLength(1);
    expect(idp.server.received[0]?.method).toBe('POST');
    expect(idp.server.received[0]?.url).toBe('/tenant/oauth2/v2.0/token?api-version=2&x=a%20b');
  });

  it('sends a form body with accept: application/json and grant_type client_credentials by default', async () => {
    await idp.handle(tokenEvent(request()));

    const received = idp.server.received[0];
    expect(received?.headers['content-type']).toBe('application/x-www-form-urlencoded');
    expect(received?.headers.accept).toBe('application/json');
    expect(Object.fromEntries(received?.form ?? [])).toEqual({ grant_type: 'client_credentials' });
  });

  it('authenticates with HTTP Basic by default, id and secret form-encoded first (RFC 6749 2.3.1)', async () => {
    // Prepare: characters that form-encoding changes
    const clientId = 'svc:a b+c';
    const clientSecret = "s3cr:t/!'()*~ %";

    // Act
    await idp.handle(tokenEvent(request({ client_id: clientId, client_secret: clientSecret })));

    // Assess
    const authorization = idp.server.received[0]?.headers.authorization ?? '';
    expect(authorization.startsWith('Basic ')).toBe(true);
    const decoded = Buffer.from(authorization.slice('Basic '.length), 'base64').toString('utf8');
    expect(decoded).toBe('svc%3Aa+b%2Bc:s3cr%3At%2F%21%27%28%29%2A~+%25');
    expect(idp.server.received[0]?.form.has('client_secret')).toBe(false);
    expect(idp.server.received[0]?.form.has('client_id')).toBe(false);
  });

  it('puts id and secret in the form body with client_secret_post, and sends no Authorization header', async () => {
    await idp.handle(tokenEvent(request({ token_endpoint_auth_method: 'client_secret_post', client_id: 'a b' })));

    const received = idp.server.received[0];
    expect(received?.headers.authorization).toBeUndefined();
    expect(received?.form.get('client_id')).toBe('a b');
    expect(received?.form.get('client_secret')).toBe(SECRET);
    expect(received?.form.get('grant_type')).toBe('client_credentials');
  });

  it('sends scope given as a string unchanged', async () => {
    await idp.handle(tokenEvent(request({ scope: 'read:users api://x/.default' })));

    expect(idp.server.received[0]?.form.get('scope')).toBe('read:users api://x/.default');
  });

  it('joins a scope array with single spaces', async () => {
    await idp.handle(tokenEvent(request({ scope: ['read', 'write', 'admin'] })));

    expect(idp.server.received[0]?.form.get('scope')).toBe('read write admin');
  });

  it('sends audience as given', async () => {
    await idp.handle(tokenEvent(request({ audience: 'https://api.example.com/' })));

    expect(idp.server.received[0]?.form.get('audience')).toBe('https://api.example.com/');
  });

  it.each([
    ['a grant name', 'custom_grant-type.v2'],
    ['an absolute URI', 'urn:ietf:params:oauth:grant-type:jwt-bearer'],
    ['an https URI', 'https://grants.example.com/m2m'],
  ])('passes grant_type through when it is %s', async (_kind, grantType) => {
    await idp.handle(tokenEvent(request({ grant_type: grantType })));

    expect(idp.server.received[0]?.form.get('grant_type')).toBe(grantType);
  });

  it('sends neither scope nor audience when they are not given', async () => {
    await idp.handle(tokenEvent(request()));

    expect([...(idp.server.received[0]?.form.keys() ?? [])]).toEqual(['grant_type']);
  });

  it('reuses one kept-alive connection across requests', async () => {
    // Prepare: a connection from an earlier test may already be pooled
    const before = idp.server.connections;

    // Act
    await idp.handle(tokenEvent(request()));
    await idp.handle(tokenEvent(request()));
    await idp.handle(tokenEvent(request()));

    // Assess
    expect(idp.server.connections - before).toBeLessThanOrEqual(1);
    expect(new Set(idp.server.received.map((received) => received.connection)).size).toBe(1);
  });

  it('retries once on a fresh connection when a kept-alive socket turns out to be dead', async () => {
    // Prepare: the server drops any connection on its second request, as a peer that closed an
    // idle socket while the function was frozen would
    await idp.handle(tokenEvent(request()));
    const served = new Map<number, number>();
    idp.server.answer((received, response) => {
      const count = (served.get(received.connection) ?? 0) + 1;
      served.set(received.connection, count);
      if (count > 1 || received.connection === idp.server.received[0]?.connection) {
        response.socket?.destroy();
        return;
      }
      void json(200, DEMO_TOKEN)(received, response);
    });

    // Act
    const result = await idp.handle(tokenEvent(request()));

    // Assess
    expect(result.statusCode).toBe(200);
    expect(idp.server.received).toHaveLength(3);
    expect(idp.server.received[2]?.connection).not.toBe(idp.server.received[1]?.connection);
  });
});

// The contract's routes, statuses and log line, through each payload format API Gateway may send.
describe.each(PAYLOAD_FORMATS)('through the $name', ({ as, noRoute }) => {
  const handle = (event: APIGatewayProxyEventV2) => idp.handle(as(event));

  describe('routes and bodies', () => {
    it.each(['/v1/oauth/token', '/oauth/token'])('serves %s', async (path) => {
      const result = await handle(tokenEvent(request(), { path }));

      expect(result.statusCode).toBe(200);
      expect(bodyOf(result)).toEqual(DEMO_TOKEN);
    });

    it('accepts a base64-encoded form body', async () => {
      const result = await handle(
        formEvent({ client_id: 'service-a', client_secret: SECRET, access_token_url: `${idp.server.origin}/t`, scope: 'read write' }),
      );

      expect(result.statusCode).toBe(200);
      expect(idp.server.received[0]?.form.get('scope')).toBe('read write');
    });

    it('accepts a base64-encoded JSON body', async () => {
      const result = await handle(tokenEvent(request(), { base64: true }));

      expect(result.statusCode).toBe(200);
    });

    it('reads a body without a content type as JSON', async () => {
      const result = await handle(tokenEvent(request(), { contentType: null }));

      expect(result.statusCode).toBe(200);
    });

    it('ignores fields the contract does not list', async () => {
      const result = await handle(tokenEvent(request({ extra: { nested: true }, redirect_uri: 'https://x.example' })));

      expect(result.statusCode).toBe(200);
      expect([...(idp.server.received[0]?.form.keys() ?? [])]).toEqual(['grant_type']);
    });

    it.each([
      ['GET on a token path', { method: 'GET', path: '/v1/oauth/token' }],
      ['another path', { path: '/v2/oauth/token' }],
      ['a trailing slash', { path: '/oauth/token/' }],
    ])("answers API Gateway's own answer for a route it does not have for %s, without calling the IdP", async (_case, options) => {
      const event = tokenEvent(request(), options);
      event.routeKey = '$default';

      const result = await handle(event);

      expect(result.statusCode).toBe(noRoute.status);
      expect(bodyOf(result)).toEqual(noRoute.body);
      expect(idp.server.received).toHaveLength(0);
    });

    it('serves a $default-route event whose method and path are a token route', async () => {
      const event = tokenEvent(request());
      event.routeKey = '$default';

      const result = await handle(event);

      expect(result.statusCode).toBe(200);
    });
  });

  describe('a successful exchange', () => {
    it('returns the IdP token JSON unchanged, with no expires_at added', async () => {
      // Prepare
      const token = { access_token: 'eyJ.a.b', token_type: 'Bearer', expires_in: 86400, scope: 'read', vendor_field: { a: [1, null] } };
      idp.server.answer(json(200, token));

      // Act
      const result = await handle(tokenEvent(request()));

      // Assess
      expect(result.statusCode).toBe(200);
      expect(bodyOf(result)).toStrictEqual(token);
      expect(Object.keys(bodyOf(result))).toEqual(Object.keys(token));
    });

    it("keeps an IdP's own expires_at exactly as it sent it", async () => {
      idp.server.answer(json(200, { access_token: 'x', expires_at: '2030-01-01T00:00:00Z', expires_in: '3600' }));

      const result = await handle(tokenEvent(request()));

      expect(bodyOf(result)).toStrictEqual({ access_token: 'x', expires_at: '2030-01-01T00:00:00Z', expires_in: '3600' });
    });

    it('answers with content-type json, cache-control no-store and pragma no-cache (RFC 6749 5.1)', async () => {
      const result = await handle(tokenEvent(request()));

      expect(result.headers).toEqual(CONTRACT_HEADERS);
    });

    it('accepts a token from any 2xx answer', async () => {
      idp.server.answer(json(201, DEMO_TOKEN));

      const result = await handle(tokenEvent(request()));

      expect(result.statusCode).toBe(200);
    });

    it('accepts a JSON answer whatever content type the IdP labels it with', async () => {
      idp.server.answer(json(200, DEMO_TOKEN, { 'content-type': 'text/plain' }));

      const result = await handle(tokenEvent(request()));

      expect(bodyOf(result)).toEqual(DEMO_TOKEN);
    });

    it('logs the request with its outcome, statuses and IdP host, and nothing secret', async () => {
      await handle(tokenEvent(request(), { path: '/oauth/token' }));

      expect(idp.observed.records).toHaveLength(1);
      expect(idp.observed.records[0]).toMatchObject({
        route: 'POST /oauth/token',
        outcome: 'ok',
        status: 200,
        idp_host: '127.0.0.1',
        idp_status: 200,
      });
      expect(JSON.stringify(idp.observed.records)).not.toContain(SECRET);
      expect(JSON.stringify(idp.observed.records)).not.toContain(DEMO_TOKEN.access_token);
    });

    it('logs an answered error by its code alone: no error class or codes, which only a 500 carries', async () => {
      idp.server.answer(json(401, { error: 'invalid_client' }));

      await handle(tokenEvent(request()));

      expect(idp.observed.records[0]).toMatchObject({ outcome: 'unauthorized', status: 401, idp_status: 401 });
      expect(idp.observed.records[0]?.error_name).toBeUndefined();
      expect(idp.observed.records[0]?.error_codes).toBeUndefined();
    });
  });

  describe('400 invalid_request', () => {
    const NOT_AN_OBJECT = 'The request body must be a JSON object';
    const CONTENT_TYPES = 'content-type must be application/json or application/x-www-form-urlencoded';
    const CLIENT_ID = 'client_id must be 1 to 256 printable ASCII characters';
    const CLIENT_SECRET = 'client_secret must be at most 1024 printable ASCII characters';
    const GRANT_TYPE = 'grant_type must be a grant name of letters, digits and -._ or an absolute URI (RFC 6749 A.10)';
    const SCOPE = 'scope must be space-delimited scope tokens of printable ASCII without " or \\ (RFC 6749 3.3)';
    const AUDIENCE = 'audience must be 1 to 2048 printable ASCII characters';
    const AUTH_METHOD =
      'token_endpoint_auth_method must be one of client_secret_basic, client_secret_post, client_secret_jwt, private_key_jwt';
    const formBody = (fields: Record<string, string> = request() as Record<string, string>) => new URLSearchParams(fields).toString();

    const invalid = async (event: ReturnType<typeof tokenEvent>, description: string) => {
      const result = await handle(event);
      expect(result.statusCode).toBe(400);
      expect(result.headers).toEqual(CONTRACT_HEADERS);
      expect(bodyOf(result)).toStrictEqual({ code: 'invalid_request', description });
      expect(idp.server.received).toHaveLength(0);
    };

    it.each([
      ['not JSON', '{"client_id": '],
      ['a JSON array', '[]'],
      ['JSON null', 'null'],
      ['a JSON string', '"client_id"'],
      ['a JSON number', '42'],
      ['empty', ''],
    ])('when the body is %s', async (_case, body) => {
      await invalid(tokenEvent(body), NOT_AN_OBJECT);
    });

    it('when there is no body at all', async () => {
      await invalid(tokenEvent(undefined), NOT_AN_OBJECT);
    });

    it.each([
      'text/plain',
      'application/xml',
      'multipart/form-data',
      'application/jsonx',
      'application/json-patch+json',
      'application/x-www-form-urlencodedx',
    ])('when the content type is %s, even for a body that would be a valid form', async (contentType) => {
      await invalid(tokenEvent(formBody(), { contentType }), CONTENT_TYPES);
    });

    it.each(['client_id', 'client_secret'])('when %s is missing, naming it', async (field) => {
      const body: Record<string, unknown> = request();
      delete body[field];
      await invalid(tokenEvent(body), `${field} is required`);
    });

    it('when access_token_url is missing and no issuer stands in for it, naming both', async () => {
      const { access_token_url: _url, ...body } = request();
      await invalid(tokenEvent(body), 'access_token_url or issuer is required');
    });

    it.each([
      ['client_id', 42],
      ['client_id', null],
      ['client_id', ['service-a']],
      ['client_secret', { value: 'x' }],
      ['client_secret', true],
      ['access_token_url', 1],
      ['grant_type', 7],
      ['grant_type', null],
      ['audience', ['a']],
      ['token_endpoint_auth_method', false],
    ])('when %s has the wrong type (%p), never coercing it', async (field, value) => {
      await invalid(tokenEvent(request({ [field]: value })), `${field} must be a string`);
    });

    it.each([5, { read: true }, ['read', 2]])('when scope has the wrong type (%p), never coercing it', async (value) => {
      await invalid(tokenEvent(request({ scope: value })), 'scope must be a string or an array of strings');
    });

    it.each([
      ['client_id', '', CLIENT_ID],
      ['client_id', 'x'.repeat(257), CLIENT_ID],
      ['client_id', 'caf\u00e9', CLIENT_ID],
      ['client_id', 'line\nbreak', CLIENT_ID],
      ['client_secret', 'x'.repeat(1025), CLIENT_SECRET],
      ['client_secret', 'tab\tin', CLIENT_SECRET],
      ['client_secret', 'emoji\u{1F511}', CLIENT_SECRET],
      ['access_token_url', 'not a url', 'access_token_url must be an absolute URL of at most 2048 visible ASCII characters'],
      ['access_token_url', '/relative/token', 'access_token_url must be an absolute URL'],
      ['access_token_url', '', 'access_token_url must be an absolute URL of at most 2048 visible ASCII characters'],
      [
        'access_token_url',
        `https://idp.example.com/${'a'.repeat(2048)}`,
        'access_token_url must be an absolute URL of at most 2048 visible ASCII characters',
      ],
      ['grant_type', '', GRANT_TYPE],
      ['grant_type', 'client credentials', GRANT_TYPE],
      ['grant_type', 'bad!name', GRANT_TYPE],
      ['grant_type', 'urn:with space', GRANT_TYPE],
      ['grant_type', 'bad!urn:ietf:params:oauth:grant-type:jwt-bearer', GRANT_TYPE],
      ['grant_type', ' urn:ietf:params:oauth:grant-type:jwt-bearer', GRANT_TYPE],
      ['scope', '', SCOPE],
      ['scope', 'read  write', SCOPE],
      ['scope', ' read', SCOPE],
      ['scope', 'quote"d', SCOPE],
      ['scope', 'back\\slash', SCOPE],
      ['scope', [], SCOPE],
      ['scope', ['read', ''], SCOPE],
      ['audience', '', AUDIENCE],
      ['audience', 'a'.repeat(2049), AUDIENCE],
      ['audience', 'caf\u00e9', AUDIENCE],
      ['token_endpoint_auth_method', 'tls_client_auth', AUTH_METHOD],
      ['token_endpoint_auth_method', 'none', AUTH_METHOD],
    ])('when %s is malformed (%p)', async (field, value, description) => {
      await invalid(tokenEvent(request({ [field]: value })), description);
    });

    it('accepts a one-character client_id and audience', async () => {
      const result = await handle(tokenEvent(request({ client_id: 'c', audience: 'a' })));

      expect(result.statusCode).toBe(200);
      expect(atob(idp.server.received[0]?.headers.authorization?.slice('Basic '.length) ?? '').split(':')[0]).toBe('c');
      expect(idp.server.received[0]?.form.get('audience')).toBe('a');
    });

    it('accepts the longest allowed client_id, client_secret and audience, and an empty secret', async () => {
      const longest = await handle(
        tokenEvent(request({ client_id: 'i'.repeat(256), client_secret: 's'.repeat(1024), audience: 'a'.repeat(2048) })),
      );
      const empty = await handle(tokenEvent(request({ client_secret: '' })));

      expect(longest.statusCode).toBe(200);
      expect(empty.statusCode).toBe(200);
    });

    it.each(['client_id', 'scope', 'grant_type'])('when the form field %s is repeated (RFC 6749 3.2)', async (field) => {
      // Prepare: every other field valid, and the repeated one valid each time it appears
      const fields = new URLSearchParams({ ...(request() as Record<string, string>), scope: 'read', grant_type: 'client_credentials' });
      fields.append(field, fields.get(field) ?? '');

      // Act, Assess
      await invalid(tokenEvent(fields.toString(), { contentType: 'application/x-www-form-urlencoded' }), `${field} must not be repeated`);
    });

    it('never echoes the client secret in the description', async () => {
      const result = await handle(tokenEvent(request({ client_secret: `${SECRET}\u00e9` })));

      expect(result.statusCode).toBe(400);
      expect(result.body).not.toContain(SECRET);
    });
  });

  describe('the content type', () => {
    it.each([
      'application/x-www-form-urlencoded',
      'application/x-www-form-urlencoded; charset=utf-8',
      'application/x-www-form-urlencoded ; charset=utf-8',
      'Application/X-WWW-Form-URLEncoded',
    ])('reads a body labelled %s as a form and sends its fields on', async (contentType) => {
      // Prepare
      const body = new URLSearchParams({ ...(request() as Record<string, string>), scope: 'read write', audience: 'api' }).toString();

      // Act
      const result = await handle(tokenEvent(body, { contentType }));

      // Assess
      expect(result.statusCode).toBe(200);
      expect(Object.fromEntries(idp.server.received[0]?.form ?? [])).toEqual({
        grant_type: 'client_credentials',
        scope: 'read write',
        audience: 'api',
      });
    });

    it.each(['application/json', 'application/json; charset=utf-8', 'application/json ;charset=utf-8', 'APPLICATION/JSON'])(
      'reads a body labelled %s as JSON',
      async (contentType) => {
        // Act
        const result = await handle(tokenEvent(request({ scope: ['read', 'write'] }), { contentType }));

        // Assess
        expect(result.statusCode).toBe(200);
        expect(idp.server.received[0]?.form.get('scope')).toBe('read write');
      },
    );
  });

  describe('413 payload_too_large', () => {
    const padded = (bytes: number) => {
      const base = JSON.stringify(request({ padding: '' }));
      return JSON.stringify(request({ padding: 'p'.repeat(bytes - base.length) }));
    };

    it('when the body is over 64 KiB', async () => {
      const result = await handle(tokenEvent(padded(64 * 1024 + 1)));

      expect(result.statusCode).toBe(413);
      expect(bodyOf(result)).toStrictEqual({ code: 'payload_too_large', description: 'The request body must be at most 65536 bytes' });
      expect(idp.server.received).toHaveLength(0);
    });

    it('when the body is over 64 KiB after base64 decoding', async () => {
      const result = await handle(tokenEvent(padded(64 * 1024 + 1), { base64: true }));

      expect(result.statusCode).toBe(413);
    });

    it('when multi-byte characters make the body over 64 KiB', async () => {
      const result = await handle(tokenEvent(JSON.stringify(request({ padding: '\u00e9'.repeat(33 * 1024) }))));

      expect(result.statusCode).toBe(413);
    });

    it('accepts a body of exactly 64 KiB, plain or base64-encoded', async () => {
      const body = padded(64 * 1024);
      expect(Buffer.byteLength(body)).toBe(64 * 1024);

      const plain = await handle(tokenEvent(body));
      const base64 = await handle(tokenEvent(body, { base64: true }));

      expect(plain.statusCode).toBe(200);
      expect(base64.statusCode).toBe(200);
    });
  });

  describe('401 unauthorized', () => {
    it.each([
      [400, { error: 'invalid_client' }],
      [400, { error: 'invalid_scope', error_description: 'scope admin is not allowed' }],
      [401, { error: 'invalid_client', error_description: `secret ${SECRET} is wrong` }],
      [403, { error: 'unauthorized_client' }],
      [404, '<html>not found</html>'],
      [409, { error: 'invalid_request' }],
    ])('when the IdP answers %i, with the fixed description and nothing of its answer', async (status, answer) => {
      idp.server.answer(json(status, answer, typeof answer === 'string' ? { 'content-type': 'text/html' } : {}));

      const result = await handle(tokenEvent(request()));

      expect(result.statusCode).toBe(401);
      expect(result.headers).toEqual(CONTRACT_HEADERS);
      expect(bodyOf(result)).toStrictEqual({ code: 'unauthorized', description: 'Unauthorized credentials provided' });
      expect(idp.observed.records[0]).toMatchObject({ outcome: 'unauthorized', idp_status: status, idp_error: 'rejected' });
    });
  });

  describe('503 upstream_throttled', () => {
    const throttled = async (status: number, headers: Record<string, string>) => {
      idp.server.answer(json(status, { error: 'slow_down' }, headers));
      const result = await handle(tokenEvent(request()));
      expect(result.statusCode).toBe(503);
      expect(bodyOf(result)).toStrictEqual({
        code: 'upstream_throttled',
        description: 'The identity provider asked to wait before the next token request: retry after retry-after seconds',
      });
      expect(idp.observed.records[0]).toMatchObject({ outcome: 'upstream_throttled', idp_status: status, idp_error: 'throttled' });
      return result.headers;
    };

    it('when the IdP answers 429 without Retry-After: retry after 1 s', async () => {
      expect(await throttled(429, {})).toEqual({ ...CONTRACT_HEADERS, 'retry-after': '1' });
    });

    it("when the IdP answers 429 with Retry-After in seconds: the IdP's seconds", async () => {
      expect((await throttled(429, { 'retry-after': '17' }))?.['retry-after']).toBe('17');
    });

    it('when the IdP answers 503 with Retry-After as an HTTP date: the seconds until then, rounded up', async () => {
      const inTwentySeconds = new Date(Date.now() + 20_000).toUTCString();

      const seconds = Number((await throttled(503, { 'retry-after': inTwentySeconds }))?.['retry-after']);

      // The date has whole seconds: between 19 and 20 s from now, rounded up, less the time the request took.
      expect(seconds).toBeGreaterThanOrEqual(18);
      expect(seconds).toBeLessThanOrEqual(20);
    });

    it.each([
      ['more than 60 s', '3600', '60'],
      ['0 s', '0', '1'],
      ['a date in the past', 'Thu, 01 Jan 1970 00:00:00 GMT', '1'],
      ['not a number or a date', 'soon', '1'],
      ['digits then text', '12abc', '1'],
      ['text then digits', 'abc12', '1'],
    ])('holds a Retry-After of %s between 1 and 60 s', async (_case, value, seconds) => {
      expect((await throttled(429, { 'retry-after': value }))?.['retry-after']).toBe(seconds);
    });

    it('with the cache off, holds nothing back: the next request reaches the IdP', async () => {
      await throttled(429, { 'retry-after': '30' });

      await handle(tokenEvent(request()));

      expect(idp.server.received).toHaveLength(2);
    });
  });

  describe('502 upstream_error', () => {
    /** The contract's 502, and the reason the log line gives for it. */
    const expectUpstreamError = async (reason: string) => {
      const result = await handle(tokenEvent(request()));
      expect(idp.observed.records[0]).toMatchObject({ outcome: 'upstream_error', idp_error: reason });
      expect(result.statusCode).toBe(502);
      expect(result.headers).toEqual(CONTRACT_HEADERS);
      const body = bodyOf(result);
      expect(Object.keys(body).sort()).toEqual(['code', 'description']);
      expect(body.code).toBe('upstream_error');
      expect(result.body).not.toContain(SECRET);
      return result;
    };

    it('when the IdP answers 500 with an HTML page', async () => {
      idp.server.answer(json(500, '<html>Internal Server Error</html>', { 'content-type': 'text/html' }));
      const result = await expectUpstreamError('status');
      expect(result.body).not.toContain('Internal Server Error');
    });

    it('when the IdP answers 503 with a JSON error and no Retry-After', async () => {
      idp.server.answer(json(503, { error: 'temporarily_unavailable' }));
      await expectUpstreamError('status');
    });

    it('when the IdP answers 500 with Retry-After: only a 429 or a 503 asks to wait', async () => {
      idp.server.answer(json(500, { error: 'server_error' }, { 'retry-after': '5' }));
      await expectUpstreamError('status');
    });

    it('when the IdP redirects, without following the redirect', async () => {
      idp.server.answer(json(302, { access_token: 'from-a-redirect' }, { location: `${idp.server.origin}/elsewhere` }));

      await expectUpstreamError('redirect');

      expect(idp.server.received.map((received) => received.url)).toEqual(['/oauth2/token']);
    });

    it('when the IdP answers 101 Switching Protocols to a request that asked for no upgrade, even with a token after it', async () => {
      idp.server.answer((_request, response) => {
        const token = JSON.stringify(DEMO_TOKEN);
        const socket = response.socket;
        const raw = `HTTP/1.1 101 Switching Protocols\r\ncontent-type: application/json\r\ncontent-length: ${token.length}\r\n\r\n${token}`;
        // Closed both ways, so the next test's request cannot land on it.
        socket?.end(raw, () => socket.destroy());
      });
      await expectUpstreamError('status');
      expect(idp.server.received).toHaveLength(1);
    });

    it.each([300, 302])('when the IdP answers %i with an HTML page', async (status) => {
      idp.server.answer(json(status, '<html>moved</html>', { 'content-type': 'text/html', location: `${idp.server.origin}/elsewhere` }));
      await expectUpstreamError('redirect');
    });

    it.each([300, 301, 303, 304, 307, 308])('when the IdP answers %i, even with a token in the body', async (status) => {
      idp.server.answer(json(status, status === 304 ? '' : DEMO_TOKEN, { location: `${idp.server.origin}/elsewhere` }));
      await expectUpstreamError('redirect');
      expect(idp.server.received).toHaveLength(1);
    });

    it.each([
      ['not JSON', '<html>ok</html>', 'not_json'],
      ['a JSON array', [DEMO_TOKEN], 'not_json'],
      ['a JSON string', 'token', 'not_json'],
      ['a quoted JSON string', '"token"', 'not_json'],
      ['JSON null', null, 'not_json'],
      ['JSON true', true, 'not_json'],
      ['JSON false', false, 'not_json'],
      ['a JSON number', 42, 'not_json'],
      ['JSON 0', 0, 'not_json'],
      ['an empty body', '', 'not_json'],
      ['an object without access_token', { token_type: 'Bearer' }, 'no_access_token'],
      ['a numeric access_token', { access_token: 12345 }, 'no_access_token'],
      ['an empty access_token', { access_token: '' }, 'no_access_token'],
    ] as const)('when a 200 answer is %s (log: %s)', async (_case, answer, reason) => {
      idp.server.answer(json(200, typeof answer === 'string' ? answer : JSON.stringify(answer)));
      await expectUpstreamError(reason);
    });

    it('when the answer is over 1 MiB', async () => {
      idp.server.answer(json(200, { access_token: 'x', padding: 'p'.repeat(1024 * 1024) }));
      await expectUpstreamError('too_large');
    });

    it('when an answer without a content-length grows past 1 MiB', async () => {
      idp.server.answer((_received, response) => {
        response.writeHead(200, { 'content-type': 'application/json' });
        response.write('{"access_token":"x","padding":"');
        const chunk = 'p'.repeat(64 * 1024);
        let sent = 0;
        const more = (): void => {
          if (response.destroyed) return;
          if (sent++ < 20) response.write(chunk, () => setImmediate(more));
          else response.end('"}');
        };
        more();
      });
      await expectUpstreamError('too_large');
    });

    it('accepts an answer just under 1 MiB', async () => {
      const padding = 'p'.repeat(1024 * 1024 - 64);
      idp.server.answer(json(200, { access_token: 'x', padding }));

      const result = await handle(tokenEvent(request()));

      expect(result.statusCode).toBe(200);
    });

    it('when the IdP resets the connection before answering', async () => {
      idp.server.answer((_received, response) => {
        response.socket?.resetAndDestroy();
      });
      await expectUpstreamError('closed');
    });

    it('when the IdP closes the connection in the middle of its answer', async () => {
      idp.server.answer((_received, response) => {
        response.writeHead(200, { 'content-type': 'application/json', 'content-length': '500' });
        response.write('{"access_token":"x"');
        setTimeout(() => response.socket?.destroy(), 10);
      });
      await expectUpstreamError('closed');
    });

    it('when nothing listens at the token URL', async () => {
      // Prepare: a port that was free a moment ago
      const probe = createTcpServer().listen(0, '127.0.0.1');
      await once(probe, 'listening');
      const { port } = probe.address() as { port: number };
      probe.close();
      await once(probe, 'close');
      idp.handle = createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: `http://127.0.0.1:${port}` }), idp.observed);

      // Act
      const result = await handle(tokenEvent(request({ access_token_url: `http://127.0.0.1:${port}/token` })));

      // Assess
      expect(result.statusCode).toBe(502);
      expect(bodyOf(result).code).toBe('upstream_error');
      expect(idp.observed.records[0]).toMatchObject({ idp_error: 'refused' });
    });

    it('when the TLS handshake fails', async () => {
      // Prepare: https to a plain HTTP server, which cannot complete a handshake
      const httpsOrigin = idp.server.origin.replace('http:', 'https:');
      idp.handle = createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: httpsOrigin }), idp.observed);

      // Act
      const result = await handle(tokenEvent(request({ access_token_url: `${httpsOrigin}/token` })));

      // Assess
      expect(result.statusCode).toBe(502);
      expect(bodyOf(result).code).toBe('upstream_error');
      expect(idp.observed.records[0]).toMatchObject({ idp_error: 'tls' });
    });
  });

  describe('504 upstream_timeout', () => {
    it('when the IdP never answers', async () => {
      idp.server.answer(() => undefined);

      const result = await handle(tokenEvent(request()));

      expect(result.statusCode).toBe(504);
      expect(bodyOf(result)).toStrictEqual({ code: 'upstream_timeout', description: expect.any(String) });
      expect(result.headers).toEqual(CONTRACT_HEADERS);
      expect(idp.observed.records[0]).toMatchObject({ outcome: 'upstream_timeout', idp_error: 'timeout' });
    });

    it('when the IdP sends headers and then trickles its body past the deadline', async () => {
      idp.server.answer((_received, response) => {
        response.writeHead(200, { 'content-type': 'application/json' });
        response.write('{"access_token":');
        const drip = setInterval(() => response.write(' '), 50);
        response.on('close', () => clearInterval(drip));
      });

      const result = await handle(tokenEvent(request()));

      expect(result.statusCode).toBe(504);
    });

    it('counts the whole exchange: a slow answer after a prompt header still times out', async () => {
      idp.server.answer((_received, response) => {
        response.writeHead(200, { 'content-type': 'application/json' });
        setTimeout(() => response.end(JSON.stringify(DEMO_TOKEN)), 1000).unref();
      });

      const result = await handle(tokenEvent(request()));

      expect(result.statusCode).toBe(504);
    });
  });

  describe('500 internal_error', () => {
    it('answers a bug with a generic body, and logs its class name without its message', async () => {
      // Prepare: a permit that breaks, standing in for any unexpected exception
      const broken = withPermit(loadConfig({ TOKEN_URL_ALLOWLIST: idp.server.origin }), 'broken', () => {
        throw new TypeError(`bug near ${SECRET}`);
      });
      idp.handle = createHandler(broken, idp.observed);

      // Act
      const result = await handle(tokenEvent(request()));

      // Assess
      expect(result.statusCode).toBe(500);
      expect(result.headers).toEqual(CONTRACT_HEADERS);
      expect(bodyOf(result)).toStrictEqual({ code: 'internal_error', description: 'Internal error' });
      expect(idp.observed.records[0]).toMatchObject({ outcome: 'internal_error', status: 500, error_name: 'TypeError' });
      expect(JSON.stringify(idp.observed.records)).not.toContain(SECRET);
    });

    it('still answers when writing the log line fails', async () => {
      idp.handle = createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: idp.server.origin }), {
        record: () => {
          throw new Error('log sink is gone');
        },
      });

      const result = await handle(tokenEvent(request()));

      expect(result.statusCode).toBe(200);
    });
  });

  describe('403 token_url_not_allowed at connect time', () => {
    it('answers 403 when the agent refuses the address the policy let through, and sends nothing', async () => {
      // Prepare: a permit that says yes to the policy's check and no to the agent's, as when a name
      // passes the policy and then resolves to an internal address
      let answers = 0;
      idp.handle = createHandler(
        withPermit(loadConfig({ TOKEN_URL_ALLOWLIST: idp.server.origin }), 'allows-once', () => ++answers === 1),
        idp.observed,
      );
      const connectionsBefore = idp.server.connections;

      // Act
      const result = await handle(tokenEvent(request()));

      // Assess
      expect(result.statusCode).toBe(403);
      expect(bodyOf(result)).toStrictEqual({
        code: 'token_url_not_allowed',
        description: 'access_token_url points to an address that is not allowed',
      });
      expect(idp.server.connections).toBe(connectionsBefore);
      expect(idp.server.received).toHaveLength(0);
      expect(idp.observed.records[0]).toMatchObject({ outcome: 'token_url_not_allowed', idp_error: 'address_not_allowed' });
    });
  });

  describe('a JSON body labelled as a form', () => {
    it.each([
      ['as curl -d sends it', (body: string) => body],
      ['after leading whitespace', (body: string) => `\n  ${body}`],
    ])('says the content type is wrong instead of reporting every field missing, %s', async (_case, shape) => {
      const result = await handle(tokenEvent(shape(JSON.stringify(request())), { contentType: 'application/x-www-form-urlencoded' }));

      expect(result.statusCode).toBe(400);
      expect(bodyOf(result)).toStrictEqual({
        code: 'invalid_request',
        description: 'The body is JSON but its content-type is application/x-www-form-urlencoded: send content-type: application/json',
      });
    });
  });

  describe('prototype pollution attempts', () => {
    const prototypeBefore = Object.getOwnPropertyNames(Object.prototype).sort();
    const expectPrototypeClean = (): void => {
      expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(prototypeBefore);
      const blank = {} as Record<string, unknown>;
      expect([blank.client_secret, blank.access_token_url, blank.polluted]).toEqual([undefined, undefined, undefined]);
    };
    const tokenUrl = () => JSON.stringify(`${idp.server.origin}/oauth2/token`);

    it.each([
      [
        'client_secret under __proto__',
        () => `{"__proto__":{"client_secret":"from-proto"},"client_id":"service-a","access_token_url":${tokenUrl()}}`,
        'client_secret is required',
      ],
      [
        'access_token_url under __proto__',
        () => `{"__proto__":{"access_token_url":"http://169.254.169.254/"},"client_id":"service-a","client_secret":"s"}`,
        'access_token_url or issuer is required',
      ],
      [
        'client_secret under constructor.prototype',
        () => `{"constructor":{"prototype":{"client_secret":"from-proto"}},"client_id":"service-a","access_token_url":${tokenUrl()}}`,
        'client_secret is required',
      ],
    ])('answers a JSON body carrying %s as if the field were missing', async (_case, body, description) => {
      // Act
      const result = await handle(tokenEvent(body()));

      // Assess
      expect(result.statusCode).toBe(400);
      expect(bodyOf(result)).toStrictEqual({ code: 'invalid_request', description });
      expect(idp.server.received).toHaveLength(0);
      expectPrototypeClean();
    });

    it('answers a form body carrying __proto__ and constructor[prototype] keys as if the secret were missing', async () => {
      // Prepare
      const form = new URLSearchParams({ client_id: 'service-a', access_token_url: `${idp.server.origin}/oauth2/token` });
      form.append('__proto__[client_secret]', 'from-proto');
      form.append('__proto__', 'client_secret=from-proto');
      form.append('constructor[prototype][client_secret]', 'from-proto');

      // Act
      const result = await handle(tokenEvent(form.toString(), { contentType: 'application/x-www-form-urlencoded' }));

      // Assess
      expect(result.statusCode).toBe(400);
      expect(bodyOf(result)).toStrictEqual({ code: 'invalid_request', description: 'client_secret is required' });
      expectPrototypeClean();
    });

    it('passes the valid fields of a body that also carries __proto__, and nothing from it', async () => {
      // Prepare
      const body = `{"__proto__":{"scope":"admin","audience":"evil"},"client_id":"service-a","client_secret":"s","access_token_url":${tokenUrl()}}`;

      // Act
      const result = await handle(tokenEvent(body));

      // Assess
      expect(result.statusCode).toBe(200);
      expect(Object.fromEntries(idp.server.received[0]?.form ?? [])).toEqual({ grant_type: 'client_credentials' });
      expectPrototypeClean();
    });

    it('refuses an IdP answer carrying __proto__ as unusable (wreck refuses to parse it)', async () => {
      // Prepare
      idp.server.answer(json(200, '{"access_token":"x","__proto__":{"polluted":true}}'));

      // Act
      const result = await handle(tokenEvent(request()));

      // Assess
      expect(result.statusCode).toBe(502);
      expect(bodyOf(result)).toStrictEqual({
        code: 'upstream_error',
        description: 'The identity provider could not be reached or gave an unusable answer',
      });
      expectPrototypeClean();
    });

    it('returns an IdP answer carrying constructor.prototype as plain data, exactly as sent', async () => {
      // Prepare
      const answer = '{"access_token":"x","constructor":{"prototype":{"polluted":true}}}';
      idp.server.answer(json(200, answer));

      // Act
      const result = await handle(tokenEvent(request()));

      // Assess
      expect(result.statusCode).toBe(200);
      expect(result.body).toBe(answer);
      expectPrototypeClean();
    });
  });
});

describe('events made by hand', () => {
  it('answers 400 naming the headers when the event has none, which API Gateway never sends', async () => {
    const event = tokenEvent(request());
    event.headers = undefined as unknown as typeof event.headers;

    const result = await idp.handle(event);

    expect(result.statusCode).toBe(400);
    expect(bodyOf(result)).toEqual({
      code: 'invalid_request',
      description: 'The event is not an API Gateway HTTP API request: headers must be an object of strings',
    });
    expect(idp.server.received).toHaveLength(0);
  });

  it('reads the content type whatever the case of its header name', async () => {
    const event = tokenEvent(new URLSearchParams(request() as Record<string, string>).toString(), { contentType: null });
    event.headers['Content-Type'] = 'application/x-www-form-urlencoded';

    const result = await idp.handle(event);

    expect(result.statusCode).toBe(200);
  });

  it('reads the lower-case header name first when a direct invoke sends two cases of it', async () => {
    // Prepare: API Gateway's own (lower-case) name, after another case of it with another value
    const event = tokenEvent(request(), { contentType: null });
    event.headers = { 'Content-Type': 'text/plain', 'content-type': 'application/json' };

    const result = await idp.handle(event);

    expect(result.statusCode).toBe(200);
  });

  it('answers 404 for an event with neither a token route key nor a request context', async () => {
    const event = tokenEvent(request());
    event.routeKey = '$default';
    event.requestContext = undefined as unknown as typeof event.requestContext;

    const result = await idp.handle(event);

    expect(result.statusCode).toBe(404);
  });

  it.each([
    ['kept at 64 characters', 64, `POST /${'r'.repeat(58)}`],
    ['"-" beyond 64 characters', 65, '-'],
  ])('logs a route key of a direct invoke %s', async (_case, length, logged) => {
    // Prepare: a token route by its method and path, whatever its route key says
    const event = tokenEvent(request());
    event.routeKey = `POST /${'r'.repeat(length - 6)}`;

    // Act
    await idp.handle(event);

    // Assess
    expect(idp.observed.records[0]?.route).toBe(logged);
  });

  it('logs "-" as the route of a direct invoke whose route key is not a string', async () => {
    const event = tokenEvent(request());
    (event as unknown as Record<string, unknown>).routeKey = { injected: true };

    await idp.handle(event);

    expect(idp.observed.records[0]?.route).toBe('-');
  });
});

describe('events from other API Gateway set-ups', () => {
  it('serves a $default-route event whose raw path is a token path even if the context path differs', async () => {
    const event = tokenEvent(request());
    event.routeKey = '$default';
    event.requestContext.http.path = '/my/path';

    const result = await idp.handle(event);

    expect(result.statusCode).toBe(200);
  });

  it('serves a token path under a named stage', async () => {
    const event = tokenEvent(request(), { path: '/prod/v1/oauth/token' });
    event.routeKey = '$default';
    event.requestContext.stage = 'prod';

    const result = await idp.handle(event);

    expect(result.statusCode).toBe(200);
  });

  it.each([
    ['another stage of the same length', 'prod', '/test/v1/oauth/token'],
    ['another stage of another length', 'prod', '/dev/v1/oauth/token'],
    ['a literal $default, which is never a path prefix', '$default', '/$default/v1/oauth/token'],
    ['the stage without the slash after it', 'prod', '/prodv1/oauth/token'],
    ['an empty stage, which would otherwise strip the first of two slashes', '', '//v1/oauth/token'],
  ])('answers 404 for a token path under %s', async (_case, stage, path) => {
    // Prepare
    const event = tokenEvent(request(), { path });
    event.routeKey = '$default';
    event.requestContext.stage = stage;

    // Act
    const result = await idp.handle(event);

    // Assess
    expect(result.statusCode).toBe(404);
    expect(idp.server.received).toHaveLength(0);
  });
});
