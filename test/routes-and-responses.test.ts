import { isJwksRoute, isTokenRoute, JWKS_ROUTE_KEY, TOKEN_ROUTE_KEYS } from '../lambda/request/routes';
import { credentialNotAllowed, causeChain, upstreamFailure } from '../lambda/errors';
import { errorResponse, noRouteResponse, publicJsonResponse } from '../lambda/responses';

// The routes an event may be for, the public answer of the JWKS route, and the error texts and chains.

describe('the routes', () => {
  it('are the token paths by POST and the JWKS path by GET', () => {
    expect(TOKEN_ROUTE_KEYS).toEqual(['POST /v1/oauth/token', 'POST /oauth/token']);
    expect(JWKS_ROUTE_KEY).toBe('GET /.well-known/jwks.json');
  });

  it('read an event for the JWKS route by its route key, or by its method and path', () => {
    const byPath = { requestContext: { http: { method: 'GET', path: '/.well-known/jwks.json' } } };

    expect(isJwksRoute({ routeKey: 'GET /.well-known/jwks.json' })).toBe(true);
    expect(isJwksRoute(byPath)).toBe(true);
    expect(isTokenRoute(byPath)).toBe(false);
  });

  it('read no other method or path as the JWKS route', () => {
    expect(isJwksRoute({ routeKey: 'POST /.well-known/jwks.json' })).toBe(false);
    expect(isJwksRoute({ requestContext: { http: { method: 'GET', path: '/v1/oauth/token' } } })).toBe(false);
    expect(isJwksRoute({ requestContext: { http: { method: 'GET', path: '/' } } })).toBe(false);
  });
});

describe('publicJsonResponse', () => {
  it('answers 200 with JSON callers may keep for the given seconds', () => {
    const response = publicJsonResponse({ keys: [] }, 300);

    expect(response).toEqual({
      statusCode: 200,
      headers: { 'content-type': 'application/json', 'cache-control': 'public, max-age=300' },
      body: '{"keys":[]}',
      isBase64Encoded: false,
    });
  });
});

describe("API Gateway's own answer for a route it does not have", () => {
  it("is the HTTP API's 404 for a 2.0 event and the REST API's 403 for a 1.0 event", () => {
    expect([noRouteResponse('2.0').statusCode, noRouteResponse('2.0').body]).toEqual([404, '{"message":"Not Found"}']);
    expect([noRouteResponse('1.0').statusCode, noRouteResponse('1.0').body]).toEqual([403, '{"message":"Missing Authentication Token"}']);
  });
});

describe('every answer', () => {
  it('says its body is text, which a REST API reads as it is and an HTTP API too', () => {
    const answers = [errorResponse(new Error('bug')), publicJsonResponse({}, 1), noRouteResponse('1.0')];

    expect(answers.map((answer) => answer.isBase64Encoded)).toEqual([false, false, false]);
  });
});

describe('the error texts', () => {
  it('refuse a stored credential with one 403 whatever failed', () => {
    const refusal = credentialNotAllowed();

    expect([refusal.statusCode, refusal.code, refusal.description]).toEqual([
      403,
      'credential_not_allowed',
      'This caller may not get a token for this credential with these parameters',
    ]);
  });

  it('say which failure of the IdP it was, and nothing it said', () => {
    expect(upstreamFailure('token_url_not_allowed').description).toBe('access_token_url points to an address that is not allowed');
    expect(upstreamFailure('upstream_timeout').description).toBe('The identity provider did not answer in time');
  });
});

describe('causeChain', () => {
  it('follows causes five deep at most', () => {
    let error: Error = new Error('root');
    for (let depth = 0; depth < 6; depth += 1) error = new Error(`wrap ${depth}`, { cause: error });

    expect(causeChain(error)).toHaveLength(5);
  });

  it("follows a Boom's data, and any other error's cause even when it has data", () => {
    const socket = new Error('socket');
    const boom = Object.assign(new Error('boom'), { isBoom: true, data: socket });
    const plain = Object.assign(new Error('plain', { cause: socket }), { isBoom: 'yes', data: new Error('not followed') });

    expect(causeChain(boom)).toEqual([boom, socket]);
    expect(causeChain(plain)).toEqual([plain, socket]);
  });
});
