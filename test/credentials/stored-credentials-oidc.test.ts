import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { ClientMetadata } from 'oidc-provider';
import { loadConfig } from '../../lambda/config';
import { createHandler, type TokenHandler } from '../../lambda/handler';
import { recordingObservability } from '../support/events';
import { destroyAgents } from '../../lambda/upstream/guarded-agents';
import { createHttpApiGateway, LOCAL_IAM_CALLER_HEADER } from '../../local/http-api-gateway';
import type { LocalKey } from '../../local/kms-local';
import { idpEnv } from '../support/idp-env';
import { type IdpProcess, startIdpProcess } from '../support/idp-process';
import { CALLER, type CredentialSources, startCredentialSources, storedCredentials } from '../support/credential-sources';

// Stored credentials against a real OAuth server (oidc-provider). The keyless clients are registered
// there by the broker's JWKS URL alone, so the IdP fetches the broker's public keys from the local
// gateway, over loopback, and verifies each KMS-made assertion (RS256 and ES256) itself.

let sources: CredentialSources;
let gateway: Server;
let baseUrl: string;
let jwksUri: string;
let idp: IdpProcess;
let strictIdp: IdpProcess;
let rsaKey: LocalKey;
let ecKey: LocalKey;
let handler: TokenHandler | undefined;

/** A keyless client as an IdP registers it: its key only through the broker's JWKS URL. */
const keylessClient = (clientId: string, alg: 'RS256' | 'ES256'): ClientMetadata => ({
  client_id: clientId,
  token_endpoint_auth_method: 'private_key_jwt',
  token_endpoint_auth_signing_alg: alg,
  jwks_uri: jwksUri,
  grant_types: ['client_credentials'],
  response_types: [],
  redirect_uris: [],
  scope: 'read write',
});

beforeAll(async () => {
  sources = await startCredentialSources();
  // The demo clients of every embedded IdP: those of the shared one are the same.
  const demo = idpEnv().basic;
  sources.secrets.set('demo/client-secret', demo.clientSecret);
  rsaKey = sources.kms.createKey('RSA_2048');
  ecKey = sources.kms.createKey('ECC_NIST_P256');
  // The gateway listens before the IdP starts: the IdP registers the clients by its JWKS URL.
  gateway = createHttpApiGateway({
    handler: (event, context) => (handler as TokenHandler)(event, context),
    openApiPath: join(__dirname, '..', '..', 'openapi.yaml'),
  });
  gateway.listen(0, '127.0.0.1');
  await once(gateway, 'listening');
  const { port } = gateway.address() as AddressInfo;
  baseUrl = `http://127.0.0.1:${port}`;
  jwksUri = `${baseUrl}/.well-known/jwks.json`;
  const clients = [keylessClient('keyless-rs', 'RS256'), keylessClient('keyless-es', 'ES256')];
  idp = await startIdpProcess({ extraClients: clients, loopbackJwksUris: [jwksUri] });
  // The same clients at an IdP left as oidc-provider ships: it refuses to fetch keys from loopback.
  strictIdp = await startIdpProcess({ extraClients: clients });
  const keyless = (name: string, clientId: string, key: LocalKey, at: IdpProcess = idp) => ({
    name,
    clientId,
    tokenUrl: at.tokenUrl,
    method: 'private_key_jwt',
    keyId: key.keyId,
  });
  const config = loadConfig({
    TOKEN_URL_ALLOWLIST: `${idp.issuer},${strictIdp.issuer}`,
    STORED_CREDENTIALS: storedCredentials(
      keyless('orders-rs', 'keyless-rs', rsaKey),
      keyless('orders-es', 'keyless-es', ecKey),
      { ...keyless('orders-by-issuer', 'keyless-es', ecKey), tokenUrl: undefined, issuer: idp.issuer },
      // The RS256 client, signed with the P-256 key (ES256): the IdP must refuse it.
      keyless('orders-wrong-key', 'keyless-rs', ecKey),
      keyless('orders-strict', 'keyless-rs', rsaKey, strictIdp),
      {
        name: 'orders-secret',
        clientId: demo.clientId,
        tokenUrl: idp.tokenUrl,
        method: 'client_secret_basic',
        secretId: 'demo/client-secret',
      },
    ),
  });
  // Its log lines are not what these tests read: kept in memory, not printed among the test output.
  handler = createHandler(config, recordingObservability());
});

afterAll(async () => {
  gateway.closeAllConnections();
  gateway.close();
  destroyAgents();
  await Promise.all([idp.stop(), strictIdp.stop(), sources.close()]);
});

/** A request through the local gateway over HTTP, as an IAM caller. */
async function post(credential: string, scope = 'read'): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${baseUrl}/v1/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', [LOCAL_IAM_CALLER_HEADER]: CALLER },
    body: JSON.stringify({ credential, scope }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

describe('stored credentials against oidc-provider', () => {
  it.each([
    ['orders-rs', 'RS256 with an RSA key'],
    ['orders-es', 'ES256 with a P-256 key'],
  ])('gets a token for %s, a client with no secret (%s) that the IdP knows only by the JWKS URL', async (credential) => {
    // Act
    const { status, body } = await post(credential, 'read write');

    // Assess
    expect(status).toBe(200);
    expect(body).toMatchObject({ token_type: 'Bearer', scope: 'read write', access_token: expect.any(String) });
  });

  it('gets a token for a keyless credential named by its issuer: the endpoint from the metadata, the method its own', async () => {
    const { status } = await post('orders-by-issuer');
    expect(status).toBe(200);
  });

  it('gets a token for a credential whose secret the broker reads from Secrets Manager', async () => {
    const { status, body } = await post('orders-secret');
    expect(status).toBe(200);
    expect(body.scope).toBe('read');
  });

  it('answers 401 when the IdP refuses an assertion its client is not registered for (ES256 for an RS256 client)', async () => {
    const { status, body } = await post('orders-wrong-key');
    expect(status).toBe(401);
    expect(body.code).toBe('unauthorized');
  });

  it('answers 401 from an IdP that keeps its default refusal to fetch keys from a loopback address', async () => {
    const { status } = await post('orders-strict');
    expect(status).toBe(401);
  });
});
