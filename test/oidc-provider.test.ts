import { loadConfig } from '../lambda/config';
import { destroyAgents } from '../lambda/upstream/guarded-agents';
import { createHandler, type TokenHandler } from '../lambda/handler';
import { bodyOf, formEvent, recordingObservability, tokenEvent } from './support/events';
import { type IdpEnv, idpEnv } from './support/idp-env';

// The contract end to end against a real OAuth 2.0 server: the oidc-provider that
// test/support/global-setup.ts starts on 127.0.0.1 for the whole run.
let idp: IdpEnv;
let handle: TokenHandler;
let observed: ReturnType<typeof recordingObservability>;

beforeAll(() => {
  idp = idpEnv();
});

beforeEach(() => {
  observed = recordingObservability();
  handle = createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: idp.issuer }), observed);
});

afterAll(() => destroyAgents());

const UNAUTHORIZED = { code: 'unauthorized', description: 'Unauthorized credentials provided' };

describe('against oidc-provider', () => {
  it('gets a token with client_secret_basic and returns exactly the IdP fields', async () => {
    const result = await handle(
      tokenEvent({
        client_id: idp.basic.clientId,
        client_secret: idp.basic.clientSecret,
        access_token_url: idp.tokenUrl,
        scope: ['read', 'write'],
      }),
    );

    expect(result.statusCode).toBe(200);
    const token = bodyOf(result);
    expect(Object.keys(token).sort()).toEqual(['access_token', 'expires_in', 'scope', 'token_type']);
    expect(token).toMatchObject({
      token_type: 'Bearer',
      scope: 'read write',
      access_token: expect.any(String),
      expires_in: expect.any(Number),
    });
    expect(observed.records).toMatchObject([{ outcome: 'ok', idp_status: 200 }]);
  });

  it('gets a token with client_secret_post from a base64 form body on the unversioned route', async () => {
    const result = await handle(
      formEvent(
        {
          client_id: idp.post.clientId,
          client_secret: idp.post.clientSecret,
          access_token_url: idp.tokenUrl,
          token_endpoint_auth_method: 'client_secret_post',
          scope: 'read write',
        },
        { path: '/oauth/token' },
      ),
    );

    expect(result.statusCode).toBe(200);
    expect(bodyOf(result).scope).toBe('read write');
  });

  it('returns 401 when the IdP rejects the secret', async () => {
    const result = await handle(
      tokenEvent({ client_id: idp.basic.clientId, client_secret: 'not-the-secret', access_token_url: idp.tokenUrl }),
    );

    expect(result.statusCode).toBe(401);
    expect(bodyOf(result)).toStrictEqual(UNAUTHORIZED);
    expect(observed.records[0]).toMatchObject({ outcome: 'unauthorized', idp_status: 401 });
  });

  it('returns 401 for a client the IdP does not know', async () => {
    const result = await handle(tokenEvent({ client_id: 'nobody', client_secret: 'x', access_token_url: idp.tokenUrl }));

    expect(result.statusCode).toBe(401);
    expect(bodyOf(result)).toStrictEqual(UNAUTHORIZED);
  });

  it('returns 401 when the IdP refuses the grant type', async () => {
    const result = await handle(
      tokenEvent({
        client_id: idp.basic.clientId,
        client_secret: idp.basic.clientSecret,
        access_token_url: idp.tokenUrl,
        grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer',
      }),
    );

    expect(result.statusCode).toBe(401);
    expect(observed.records[0]?.idp_status).toBe(400);
  });

  it('returns 401 for a path where the IdP has no token endpoint, since the contract maps every 4xx to 401', async () => {
    const result = await handle(
      tokenEvent({ client_id: idp.basic.clientId, client_secret: idp.basic.clientSecret, access_token_url: `${idp.issuer}/nope` }),
    );

    expect(result.statusCode).toBe(401);
    expect(observed.records[0]?.idp_status).toBe(404);
  });
});
