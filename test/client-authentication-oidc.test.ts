import type { JWK } from 'oidc-provider';
import { JWT_BEARER_ASSERTION_TYPE } from '../lambda/request/client-assertion';
import { loadConfig } from '../lambda/config';
import { destroyAgents } from '../lambda/upstream/guarded-agents';
import { createHandler, type TokenHandler } from '../lambda/handler';
import { assertionClaims, decodeJws, generateCallerKey, signEs256, verifiesRs256 } from './support/caller-assertions';
import { bodyOf, recordingObservability, tokenEvent } from './support/events';
import { type IdpEnv, idpEnv } from './support/idp-env';

// JWT client authentication and resource indicators end to end, against the oidc-provider that
// test/support/global-setup.ts starts, verifying them itself: its client_secret_jwt client checks
// the service's HS256 assertion; its private_key_jwt client knows only the public half of a key
// the tests sign assertions with, the way a caller would.
const RESOURCE = 'https://api.example.com/orders';
const UNAUTHORIZED = { code: 'unauthorized', description: 'Unauthorized credentials provided' };

let idp: IdpEnv;
let observed: ReturnType<typeof recordingObservability>;

beforeAll(() => {
  idp = idpEnv();
});

afterAll(() => destroyAgents());

function handlerFor({ cache = false } = {}): TokenHandler {
  observed = recordingObservability();
  return createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: idp.issuer, TOKEN_CACHE: cache ? 'on' : 'off' }), observed);
}

/** An assertion of the private_key_jwt client, signed with its key unless another is given. */
const callerAssertion = (overrides: Record<string, unknown> = {}, key = idp.keyClient.key): string =>
  signEs256(key, assertionClaims(idp.keyClient.clientId, idp.tokenUrl, overrides));

const keyClientRequest = (assertion: string) => ({
  client_id: idp.keyClient.clientId,
  client_assertion: assertion,
  client_assertion_type: JWT_BEARER_ASSERTION_TYPE,
  access_token_url: idp.tokenUrl,
});

const jwtClientRequest = (overrides: Record<string, unknown> = {}) => ({
  client_id: idp.jwt.clientId,
  client_secret: idp.jwt.clientSecret,
  access_token_url: idp.tokenUrl,
  token_endpoint_auth_method: 'client_secret_jwt',
  ...overrides,
});

describe('client_secret_jwt against oidc-provider', () => {
  it('gets a token: the IdP verified the HS256 assertion the service signed with the secret', async () => {
    // Prepare
    const handle = handlerFor();

    // Act
    const result = await handle(tokenEvent(jwtClientRequest({ scope: 'read' })));

    // Assess
    expect(result.statusCode).toBe(200);
    expect(bodyOf(result)).toMatchObject({ token_type: 'Bearer', scope: 'read', access_token: expect.any(String) });
  });

  it('signs a new assertion for every request, so the IdP never sees a jti replayed', async () => {
    // Prepare
    const handle = handlerFor();

    // Act
    const results = [await handle(tokenEvent(jwtClientRequest())), await handle(tokenEvent(jwtClientRequest()))];

    // Assess
    expect(results.map((result) => result.statusCode)).toEqual([200, 200]);
  });

  it('returns 401 when the assertion is signed with a wrong secret', async () => {
    // Prepare
    const handle = handlerFor();

    // Act
    const result = await handle(tokenEvent(jwtClientRequest({ client_secret: 'not-the-secret' })));

    // Assess
    expect(result.statusCode).toBe(401);
    expect(bodyOf(result)).toStrictEqual(UNAUTHORIZED);
    expect(observed.records[0]).toMatchObject({ outcome: 'unauthorized', idp_status: 401 });
  });
});

describe('private_key_jwt against oidc-provider', () => {
  it('gets a token with the assertion the caller signed, passed through', async () => {
    // Prepare
    const handle = handlerFor();
    const assertion = callerAssertion();

    // Act
    const result = await handle(tokenEvent({ ...keyClientRequest(assertion), scope: 'write' }));

    // Assess
    expect(result.statusCode).toBe(200);
    expect(bodyOf(result)).toMatchObject({ token_type: 'Bearer', scope: 'write' });
  });

  it('returns 401 when the assertion is addressed to another audience', async () => {
    // Prepare
    const handle = handlerFor();
    const assertion = callerAssertion({ aud: 'https://other-idp.example.com/token' });

    // Act
    const result = await handle(tokenEvent(keyClientRequest(assertion)));

    // Assess
    expect(result.statusCode).toBe(401);
    expect(observed.records[0]?.idp_status).toBe(401);
  });

  it('returns 401 when the assertion has expired', async () => {
    // Prepare: well past oidc-provider's clock tolerance
    const handle = handlerFor();
    const now = Math.floor(Date.now() / 1000);
    const assertion = callerAssertion({ iat: now - 600, exp: now - 300 });

    // Act
    const result = await handle(tokenEvent(keyClientRequest(assertion)));

    // Assess
    expect(result.statusCode).toBe(401);
    expect(observed.records[0]?.idp_status).toBe(401);
  });

  it('returns 401 when the assertion is signed with a key the IdP does not know', async () => {
    // Prepare: same kid, someone else's key
    const handle = handlerFor();
    const assertion = callerAssertion({}, generateCallerKey(idp.keyClient.key.publicJwk.kid));

    // Act
    const result = await handle(tokenEvent(keyClientRequest(assertion)));

    // Assess
    expect(result.statusCode).toBe(401);
  });
});

describe('the token cache with JWT client authentication, against oidc-provider', () => {
  it('sends a forged private_key_jwt assertion to the IdP, which refuses it, even right after a good one for the same client', async () => {
    // Prepare: the cache is on and holds nothing the forger could be given
    const handle = handlerFor({ cache: true });
    const good = callerAssertion();
    const forged = callerAssertion({}, generateCallerKey(idp.keyClient.key.publicJwk.kid));
    const first = await handle(tokenEvent(keyClientRequest(good)));

    // Act
    const second = await handle(tokenEvent(keyClientRequest(forged)));

    // Assess
    expect(first.statusCode).toBe(200);
    expect(second.statusCode).toBe(401);
    expect(bodyOf(second)).toStrictEqual(UNAUTHORIZED);
    expect(observed.records.map((record) => record.idp_status)).toEqual([200, 401]);
    expect([first.headers?.['x-token-cache'], second.headers?.['x-token-cache']]).toEqual(['miss', undefined]);
  });

  it('answers a repeated client_secret_jwt request from the cache, and sends a wrong secret to the IdP', async () => {
    // Prepare
    const handle = handlerFor({ cache: true });
    const request = jwtClientRequest();
    await handle(tokenEvent(request));

    // Act
    const again = await handle(tokenEvent(request));
    const wrong = await handle(tokenEvent({ ...request, client_secret: 'not-the-secret' }));

    // Assess
    expect(again.headers?.['x-token-cache']).toBe('hit');
    expect(wrong.statusCode).toBe(401);
    expect(observed.records.map((record) => record.idp_status)).toEqual([200, undefined, 401]);
  });
});

describe('resource indicators (RFC 8707) against oidc-provider', () => {
  it('gets a JWT access token whose aud is the resource, signed by the IdP', async () => {
    // Prepare
    const handle = handlerFor();
    const jwks = (await (await fetch(`${idp.issuer}/jwks`)).json()) as { keys: JWK[] };

    // Act
    const result = await handle(
      tokenEvent({
        client_id: idp.basic.clientId,
        client_secret: idp.basic.clientSecret,
        access_token_url: idp.tokenUrl,
        resource: RESOURCE,
      }),
    );

    // Assess
    expect(result.statusCode).toBe(200);
    const accessToken = String(bodyOf(result).access_token);
    expect(decodeJws(accessToken).claims).toMatchObject({ aud: RESOURCE, client_id: idp.basic.clientId });
    expect(verifiesRs256(accessToken, jwks)).toBe(true);
  });

  it('gets a token for the resource with client_secret_jwt, and with private_key_jwt', async () => {
    // Prepare
    const handle = handlerFor();
    const assertion = callerAssertion();

    // Act
    const results = [
      await handle(tokenEvent(jwtClientRequest({ resource: [RESOURCE] }))),
      await handle(tokenEvent({ ...keyClientRequest(assertion), resource: RESOURCE })),
    ];

    // Assess
    expect(results.map((result) => result.statusCode)).toEqual([200, 200]);
    expect(results.map((result) => decodeJws(String(bodyOf(result).access_token)).claims.aud)).toEqual([RESOURCE, RESOURCE]);
  });

  it('returns 401 when the IdP refuses the resource (invalid_target)', async () => {
    // Prepare: the demo IdP serves only https resources
    const handle = handlerFor();

    // Act
    const result = await handle(
      tokenEvent({
        client_id: idp.basic.clientId,
        client_secret: idp.basic.clientSecret,
        access_token_url: idp.tokenUrl,
        resource: 'urn:example:not-served',
      }),
    );

    // Assess
    expect(result.statusCode).toBe(401);
    expect(observed.records[0]?.idp_status).toBe(400);
  });
});
