import type { ClientMetadata } from 'oidc-provider';
import { JWKS_PATH } from '../lambda/request/routes';
import { DEMO_CLIENTS, DEMO_SCOPES, type Idp } from './idp';
import type { LocalKms } from './kms-local';

/** The IAM role whose sessions may use the demo stored credentials. */
export const DEMO_CALLER_ROLE = 'arn:aws:iam::000000000000:role/demo-caller';
/** A session of that role, as API Gateway would name the verified caller. */
export const DEMO_CALLER = 'arn:aws:sts::000000000000:assumed-role/demo-caller/local';

/** The embedded IdP's client with no secret at all: it knows the client only by the broker's JWKS URL. */
export const KEYLESS_CLIENT_ID = 'demo-keyless-client';

/** The demo stored credentials: a keyless client signed in KMS, and a secret client whose secret is in Secrets Manager. */
export const DEMO_CREDENTIALS = { keyless: 'demo-keyless', secret: 'demo-stored-secret' } as const;

/** Where the local Secrets Manager holds the secret of `demo-stored-secret` (the demo post client's). */
export const DEMO_SECRET_NAME = 'demo/post-client-secret';

const KEY_ALIAS = 'alias/token-exchange/demo-keyless';

/** The broker's JWKS URL on the local gateway: what the IdP fetches the keyless client's keys from. */
export function localJwksUri(port: number): string {
  return `http://127.0.0.1:${port}${JWKS_PATH}`;
}

/** The keyless client as the embedded IdP registers it: `private_key_jwt` with RS256, its keys at the broker's JWKS URL. */
export function keylessClient(jwksUri: string): ClientMetadata {
  return {
    client_id: KEYLESS_CLIENT_ID,
    token_endpoint_auth_method: 'private_key_jwt',
    token_endpoint_auth_signing_alg: 'RS256',
    jwks_uri: jwksUri,
    grant_types: ['client_credentials'],
    response_types: [],
    redirect_uris: [],
    scope: DEMO_SCOPES.join(' '),
  };
}

/** The secrets the local Secrets Manager holds for the demo stored credentials. */
export const DEMO_SECRETS: Readonly<Record<string, string>> = { [DEMO_SECRET_NAME]: DEMO_CLIENTS.post.clientSecret };

/**
 * STORED_CREDENTIALS for the local run, with a new RSA key in the local KMS for the keyless client:
 * sessions of the demo role may get tokens of either client, for the demo scopes.
 */
export function demoStoredCredentials(idp: Pick<Idp, 'tokenUrl'>, kms: LocalKms): string {
  kms.createKey('RSA_2048', KEY_ALIAS);
  const shared = { tokenUrl: idp.tokenUrl, scopes: [...DEMO_SCOPES], callers: [DEMO_CALLER_ROLE] };
  return JSON.stringify([
    { name: DEMO_CREDENTIALS.keyless, clientId: KEYLESS_CLIENT_ID, method: 'private_key_jwt', keyId: KEY_ALIAS, ...shared },
    {
      name: DEMO_CREDENTIALS.secret,
      clientId: DEMO_CLIENTS.post.clientId,
      method: 'client_secret_post',
      secretId: DEMO_SECRET_NAME,
      ...shared,
    },
  ]);
}
