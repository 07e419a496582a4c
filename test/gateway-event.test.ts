import fc from 'fast-check';
import { verifiedCaller } from '../lambda/credentials/callers';
import { callerArnOf, eventParts, payloadFormat, routeKeyOf } from '../lambda/request/gateway-event';
import { isJwksRoute, isTokenRoute } from '../lambda/request/routes';
import { bodyOf, restEventOf, tokenEvent } from './support/events';
import { useScriptedIdp } from './support/scripted-idp';

// The two shapes API Gateway hands the function (HTTP API payload 2.0, REST API payload 1.0): which
// one an event is, where each keeps its headers and its verified caller, and that the handler answers
// the same request the same, byte for byte, whichever carried it.

const SESSION = 'arn:aws:sts::123456789012:assumed-role/orders-service/i-0abc';
const restEvent = (body?: unknown, options: Parameters<typeof tokenEvent>[1] = {}) => restEventOf(tokenEvent(body, options));

describe('payloadFormat', () => {
  it.each([
    ['a REST API event', restEvent({}), '1.0'],
    ['an HTTP API event', tokenEvent({}), '2.0'],
    ["an HTTP API event that also carries 1.0's httpMethod", { ...tokenEvent({}), httpMethod: 'POST' }, '2.0'],
    ['an HTTP API payload 1.0 event', { version: '1.0', httpMethod: 'POST' }, '1.0'],
    ['an httpMethod that is not a string', { httpMethod: ['POST'] }, '2.0'],
    ['null', null, '2.0'],
    ['an empty object', {}, '2.0'],
  ])('reads %s as %s', (_case, event, format) => {
    expect(payloadFormat(event)).toBe(format);
  });
});

describe('the routes of a REST API event', () => {
  it.each([
    ['its resource', { resource: '/oauth/token', path: '/base/oauth/token' }],
    ["a catch-all resource's path", { resource: '/{proxy+}', path: '/v1/oauth/token' }],
  ])('are read from %s', (_case, where) => {
    expect(isTokenRoute({ ...restEvent({}), ...where })).toBe(true);
  });

  it('are matched by method too: a GET on a token path is none, a GET of the JWKS path is the JWKS route', () => {
    const get = restEvent(undefined, { method: 'GET' });
    const jwks = restEvent(undefined, { method: 'GET', path: '/.well-known/jwks.json' });

    expect([isTokenRoute(get), isJwksRoute(get), isJwksRoute(jwks), isTokenRoute(jwks)]).toEqual([false, false, true, false]);
  });

  it('never take a route key or a 2.0 request context for a route', () => {
    const event = { ...restEvent({}, { path: '/v2/oauth/token' }), routeKey: 'POST /v1/oauth/token' };
    Object.assign(event.requestContext, { http: { method: 'POST', path: '/v1/oauth/token' } });

    expect(isTokenRoute(event)).toBe(false);
  });
});

describe('eventParts of a REST API event', () => {
  it('joins the values of a repeated header with commas under its lower-case name, as the HTTP API does', () => {
    // Prepare: `headers` holds only the last value of each, as the REST API gives it.
    const event = {
      ...restEvent('{}'),
      headers: { 'Content-Type': 'application/json', 'Cache-Control': 'max-age=0' },
      multiValueHeaders: { 'Content-Type': ['application/json'], 'Cache-Control': ['no-cache', 'max-age=0'], 'cache-control': ['x'] },
    };

    // Act & Assess
    expect(eventParts(event).headers).toEqual({ 'content-type': 'application/json', 'cache-control': 'no-cache,max-age=0,x' });
  });

  it.each([
    ['no multiValueHeaders', { multiValueHeaders: undefined, headers: { 'Content-Type': 'text/plain' } }, { 'content-type': 'text/plain' }],
    ['no headers at all (both null)', { multiValueHeaders: null, headers: null }, {}],
  ])('reads an event with %s', (_case, fields, headers) => {
    expect(eventParts({ ...restEvent('{}'), ...fields }).headers).toEqual(headers);
  });

  it('keeps a header named __proto__ as a header, not a prototype', () => {
    const parts = eventParts({ ...restEvent('{}'), multiValueHeaders: JSON.parse('{"__proto__":["x"],"content-type":["a"]}') });

    expect(Object.getPrototypeOf(parts.headers)).toBe(Object.prototype);
    expect(Object.keys(parts.headers).sort()).toEqual(['__proto__', 'content-type']);
  });

  it.each([
    [
      'multiValueHeaders that is a string',
      { multiValueHeaders: 'content-type: application/json' },
      'multiValueHeaders must be an object of string arrays',
    ],
    [
      'a multiValueHeaders value that is a string',
      { multiValueHeaders: { 'content-type': 'application/json' } },
      'multiValueHeaders must be an object of string arrays',
    ],
    [
      'a multiValueHeaders value with a number',
      { multiValueHeaders: { 'content-type': [1] } },
      'multiValueHeaders must be an object of string arrays',
    ],
    [
      'headers of numbers, and no multiValueHeaders',
      { multiValueHeaders: null, headers: { 'content-type': 1 } },
      'headers must be an object of strings',
    ],
    ['a body that is an object', { body: {} }, 'body must be a string'],
    ['no request context', { requestContext: null }, 'requestContext must be an object'],
  ])('refuses %s with a 400 naming it as a REST API request', (_case, fields, problem) => {
    expect(() => eventParts({ ...restEvent('{}'), ...fields })).toThrow(`The event is not an API Gateway REST API request: ${problem}`);
  });
});

describe("the caller, read from its format's place alone", () => {
  it('is requestContext.identity.userArn on a REST API event, as the same ARN the HTTP API gives', () => {
    const http = tokenEvent({}, { iamCaller: SESSION });

    expect(callerArnOf(restEventOf(http))).toBe(SESSION);
    expect(verifiedCaller(restEventOf(http))).toEqual(verifiedCaller(http));
  });

  it("is never 2.0's authorizer.iam on a REST API event, nor 1.0's identity on an HTTP API event", () => {
    const rest = restEvent({});
    Object.assign(rest.requestContext, { authorizer: { iam: { userArn: SESSION } } });
    const http = tokenEvent({});
    Object.assign(http.requestContext, { identity: { userArn: SESSION } });

    expect([verifiedCaller(rest), verifiedCaller(http)]).toEqual([undefined, undefined]);
  });

  it.each([null, 'x', { userArn: null }])('is absent on a REST API event whose identity is %p', (identity) => {
    const event = restEvent({}, { iamCaller: SESSION });
    Object.assign(event.requestContext, { identity });

    expect(verifiedCaller(event)).toBeUndefined();
  });
});

describe('routeKeyOf', () => {
  it.each([
    ['an HTTP API event', tokenEvent({}), 'POST /v1/oauth/token'],
    ['a REST API event, as the same route', restEvent({}), 'POST /v1/oauth/token'],
    ["a REST API catch-all's", { ...restEvent({}), resource: '/{proxy+}' }, 'POST /{proxy+}'],
    ['a REST API event without a resource', { ...restEvent({}), resource: null }, '-'],
    ['a REST API route of more than 64 characters', { ...restEvent({}), resource: `/${'r'.repeat(64)}` }, '-'],
    ['null', null, '-'],
  ])('names %s as the log line does', (_case, event, key) => {
    expect(routeKeyOf(event)).toBe(key);
  });
});

describe('the same request on either API', () => {
  const idp = useScriptedIdp();

  it('is answered the same, byte for byte: status, headers and body, for any body, content type and caller', async () => {
    const contentType = fc.constantFrom('application/json', 'application/x-www-form-urlencoded', null, 'text/plain');
    const field = fc.oneof(fc.string(), fc.constant(''), fc.integer(), fc.array(fc.string(), { maxLength: 2 }));
    const overrides = fc.dictionary(
      fc.constantFrom(
        'client_id',
        'client_secret',
        'scope',
        'credential',
        'issuer',
        'audience',
        'grant_type',
        'token_endpoint_auth_method',
      ),
      field,
      { maxKeys: 2 },
    );
    await fc.assert(
      fc.asyncProperty(
        overrides,
        contentType,
        fc.boolean(),
        fc.option(fc.constant(SESSION), { nil: undefined }),
        async (extra, type, base64, iamCaller) => {
          // Prepare: a valid request to the scripted IdP, with up to two fields replaced by anything.
          const fields = { client_id: 'c', client_secret: 's', access_token_url: `${idp.server.origin}/token`, ...extra };
          const text =
            type === 'application/x-www-form-urlencoded'
              ? new URLSearchParams(fields as Record<string, string>).toString()
              : JSON.stringify(fields);
          const http = tokenEvent(text, { contentType: type, base64, iamCaller });

          // Act
          const [viaHttpApi, viaRestApi] = [await idp.handle(http), await idp.handle(restEventOf(http))];

          // Assess
          expect(viaRestApi).toEqual(viaHttpApi);
        },
      ),
      { numRuns: 150 },
    );
    expect(idp.server.received.length).toBeGreaterThan(0);
  });

  it('is logged the same: route, outcome, status and caller', async () => {
    const http = tokenEvent({ credential: 'orders' }, { iamCaller: SESSION, path: '/oauth/token' });

    await idp.handle(http);
    await idp.handle(restEventOf(http));

    const [first, second] = idp.observed.records.map(({ latency_ms: _latency, ...rest }) => rest);
    expect(second).toEqual(first);
    expect(first).toMatchObject({ route: 'POST /oauth/token', outcome: 'credential_not_allowed', caller: SESSION });
  });

  it('answers a REST API event for a route it does not have as the REST API does: 403 Missing Authentication Token', async () => {
    const result = await idp.handle(restEvent({}, { path: '/v1/oauth/tokens' }));

    expect(result.statusCode).toBe(403);
    expect(bodyOf(result)).toEqual({ message: 'Missing Authentication Token' });
  });
});
