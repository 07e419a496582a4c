import { JWT_BEARER_ASSERTION_TYPE } from '../lambda/request/client-assertion';
import { loadConfig } from '../lambda/config';
import { destroyAgents } from '../lambda/upstream/guarded-agents';
import { createHandler, type TokenHandler } from '../lambda/handler';
import { assertionClaims, signEs256 } from './support/caller-assertions';
import { bodyOf, recordingObservability, tokenEvent } from './support/events';
import { type IdpEnv, idpEnv } from './support/idp-env';

// Requests by issuer against the oidc-provider that test/support/global-setup.ts starts: a real
// authorization server publishing its own OpenID Connect Discovery document, checking every client
// authentication the service sends by the endpoint and method it read there.

let idp: IdpEnv;
let observed: ReturnType<typeof recordingObservability>;

beforeAll(() => {
  idp = idpEnv();
});

afterAll(() => destroyAgents());

function handlerFor(settings: Record<string, string> = {}): TokenHandler {
  observed = recordingObservability();
  return createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: idp.issuer, ...settings }), observed);
}

describe('a request by issuer against oidc-provider', () => {
  it('gets a token for the client_secret_basic client, the method the metadata leads to', async () => {
    // Prepare
    const handle = handlerFor();

    // Act
    const result = await handle(
      tokenEvent({ client_id: idp.basic.clientId, client_secret: idp.basic.clientSecret, issuer: idp.issuer, scope: 'read' }),
    );

    // Assess
    expect(result.statusCode).toBe(200);
    expect(bodyOf(result)).toEqual({
      access_token: expect.any(String),
      token_type: 'Bearer',
      expires_in: expect.any(Number),
      scope: 'read',
    });
    expect(observed.records[0]).toMatchObject({ outcome: 'ok', metadata_status: 200, idp_status: 200, idp_host: '127.0.0.1' });
  });

  it.each([
    ['client_secret_post', () => idp.post],
    ['client_secret_jwt', () => idp.jwt],
  ])('gets a token with the method the request names, %s, which the IdP verifies', async (method, client) => {
    // Prepare
    const handle = handlerFor();
    const { clientId, clientSecret } = client();

    // Act
    const result = await handle(
      tokenEvent({ client_id: clientId, client_secret: clientSecret, issuer: idp.issuer, token_endpoint_auth_method: method }),
    );

    // Assess: oidc-provider checks a client_secret_jwt assertion's aud against its own token endpoint.
    expect(result.statusCode).toBe(200);
  });

  it("gets a token with the caller's private_key_jwt assertion, addressed to the token endpoint", async () => {
    // Prepare
    const handle = handlerFor();
    const assertion = signEs256(idp.keyClient.key, assertionClaims(idp.keyClient.clientId, idp.tokenUrl));

    // Act
    const result = await handle(
      tokenEvent({
        client_id: idp.keyClient.clientId,
        client_assertion: assertion,
        client_assertion_type: JWT_BEARER_ASSERTION_TYPE,
        issuer: idp.issuer,
      }),
    );

    // Assess
    expect(result.statusCode).toBe(200);
  });

  it('answers 502 for the issuer with a trailing slash: the metadata names it without, and must match exactly', async () => {
    // Prepare
    const handle = handlerFor();

    // Act
    const result = await handle(
      tokenEvent({ client_id: idp.basic.clientId, client_secret: idp.basic.clientSecret, issuer: `${idp.issuer}/` }),
    );

    // Assess
    expect(result.statusCode).toBe(502);
    expect(observed.records[0]).toMatchObject({ outcome: 'upstream_error', metadata_status: 200, metadata_error: 'issuer_mismatch' });
    expect(observed.records[0]?.idp_status).toBeUndefined();
  });

  it('shares a kept token between a request by issuer and one by the token URL the metadata names', async () => {
    // Prepare
    const handle = handlerFor({ TOKEN_CACHE: 'memory' });
    const client = { client_id: idp.basic.clientId, client_secret: idp.basic.clientSecret };

    // Act
    const byIssuer = await handle(tokenEvent({ ...client, issuer: idp.issuer }));
    const byUrl = await handle(tokenEvent({ ...client, access_token_url: idp.tokenUrl }));

    // Assess
    expect([byIssuer.headers?.['x-token-cache'], byUrl.headers?.['x-token-cache']]).toEqual(['miss', 'hit']);
    expect(bodyOf(byUrl).access_token).toBe(bodyOf(byIssuer).access_token);
  });
});
