import { type CallerKey, importCallerKey } from './caller-assertions';

/** The `private_key_jwt` client of the shared IdP. */
export const KEY_CLIENT_ID = 'key-client';

/** The shared IdP that test/support/global-setup.ts starts for the whole jest run. */
export interface IdpEnv {
  readonly issuer: string;
  /** `${issuer}/token` */
  readonly tokenUrl: string;
  /** Registered for `client_secret_basic`. */
  readonly basic: { readonly clientId: string; readonly clientSecret: string };
  /** Registered for `client_secret_post`. */
  readonly post: { readonly clientId: string; readonly clientSecret: string };
  /** Registered for `client_secret_jwt`. */
  readonly jwt: { readonly clientId: string; readonly clientSecret: string };
  /** Registered for `private_key_jwt` with the public half of `key`; the tests sign as the caller. */
  readonly keyClient: { readonly clientId: string; readonly key: CallerKey };
}

/** Where global-setup publishes the IdP: env set there reaches every test worker. */
export const IDP_ENV_NAMES = {
  issuer: 'IDP_ISSUER',
  tokenUrl: 'IDP_TOKEN_URL',
  basicClientId: 'IDP_BASIC_CLIENT_ID',
  basicClientSecret: 'IDP_BASIC_CLIENT_SECRET',
  postClientId: 'IDP_POST_CLIENT_ID',
  postClientSecret: 'IDP_POST_CLIENT_SECRET',
  jwtClientId: 'IDP_JWT_CLIENT_ID',
  jwtClientSecret: 'IDP_JWT_CLIENT_SECRET',
  keyClientKey: 'IDP_KEY_CLIENT_PRIVATE_JWK',
} as const;

/** Read the shared IdP's details; throws naming the missing variable when jest's global setup did not run. */
export function idpEnv(env: Readonly<Record<string, string | undefined>> = process.env): IdpEnv {
  const read = (name: string): string => {
    const value = env[name];
    if (!value) throw new Error(`${name} is not set: the shared IdP starts in test/support/global-setup.ts, so run the tests with jest`);
    return value;
  };
  return {
    issuer: read(IDP_ENV_NAMES.issuer),
    tokenUrl: read(IDP_ENV_NAMES.tokenUrl),
    basic: { clientId: read(IDP_ENV_NAMES.basicClientId), clientSecret: read(IDP_ENV_NAMES.basicClientSecret) },
    post: { clientId: read(IDP_ENV_NAMES.postClientId), clientSecret: read(IDP_ENV_NAMES.postClientSecret) },
    jwt: { clientId: read(IDP_ENV_NAMES.jwtClientId), clientSecret: read(IDP_ENV_NAMES.jwtClientSecret) },
    keyClient: { clientId: KEY_CLIENT_ID, key: importCallerKey(read(IDP_ENV_NAMES.keyClientKey)) },
  };
}
