import { generateKeyPair, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import Provider, { type ClientMetadata, errors, type JWK, type ResourceServer } from 'oidc-provider';
import { createMemoryAdapter } from 'oidc-provider/lib/adapters/memory_adapter.js';

/** A client of the embedded IdP. Demo values, printed on purpose: they only open this throwaway IdP. */
export interface DemoClient {
  readonly clientId: string;
  readonly clientSecret: string;
}

export interface Idp {
  /** `http://127.0.0.1:PORT` */
  readonly issuer: string;
  /** `${issuer}/token` */
  readonly tokenUrl: string;
  readonly clients: {
    /** Registered for `client_secret_basic` (RFC 6749 2.3.1). */
    readonly basic: DemoClient;
    /** Registered for `client_secret_post`. */
    readonly post: DemoClient;
    /** Registered for `client_secret_jwt`: the IdP verifies an HS256 assertion made with the secret. */
    readonly jwt: DemoClient;
  };
  close(): Promise<void>;
}

export const DEMO_CLIENTS = {
  basic: { clientId: 'demo-client', clientSecret: 'demo-secret' },
  post: { clientId: 'demo-post-client', clientSecret: 'demo-post-secret' },
  jwt: { clientId: 'demo-jwt-client', clientSecret: 'demo-jwt-secret' },
} as const satisfies Idp['clients'];

export const DEMO_SCOPES = ['read', 'write'] as const;

export interface IdpOptions {
  port?: number;
  host?: string;
  /** Clients registered beside the demo ones (tests add a `private_key_jwt` client with their own key). */
  extraClients?: readonly ClientMetadata[];
  /**
   * Client `jwks_uri`s on this machine that the IdP may fetch: the local broker's own JWKS route.
   * oidc-provider refuses loopback and private addresses when it fetches a client's keys, rightly;
   * exactly these URLs pass, and no IdP outside `npm start` and the tests is ever given one.
   */
  loopbackJwksUris?: readonly string[];
}

/**
 * Start a real OAuth 2.0 authorization server (oidc-provider) that issues tokens for the
 * client-credentials grant (RFC 6749 4.4) to the demo clients, over http on a loopback address.
 * Any `https` resource indicator (RFC 8707) gets a JWT access token whose `aud` is that resource.
 * Keys are generated at every start, and tokens live in memory only.
 */
export async function startIdp(options: IdpOptions = {}): Promise<Idp> {
  const host = options.host ?? '127.0.0.1';
  const key = await signingKey();
  const server = createServer();
  server.listen(options.port ?? 0, host);
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const issuer = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;

  let provider: Provider;
  try {
    provider = new Provider(issuer, {
      // The library's default store, named so it does not warn at every start: a demo IdP should forget on restart.
      adapter: createMemoryAdapter(),
      clients: [
        client(DEMO_CLIENTS.basic, 'client_secret_basic'),
        client(DEMO_CLIENTS.post, 'client_secret_post'),
        client(DEMO_CLIENTS.jwt, 'client_secret_jwt'),
        ...(options.extraClients ?? []),
      ],
      scopes: [...DEMO_SCOPES],
      jwks: { keys: [key] },
      cookies: { keys: [randomBytes(32).toString('base64url')] },
      features: {
        clientCredentials: { enabled: true },
        devInteractions: { enabled: false },
        resourceIndicators: { enabled: true, getResourceServerInfo: resourceServerInfo },
      },
      routes: { token: '/token' },
      fetch: loopbackJwksFetch(options.loopbackJwksUris ?? []),
      // A number, not oidc-provider's default function, which prints a notice the first time it runs.
      ttl: { ClientCredentials: 3600 },
    });
  } catch (error) {
    server.close();
    throw error;
  }
  const handle = provider.callback();
  // Koa answers its own errors; nothing is left to await here.
  server.on('request', (request, response) => void handle(request, response));

  return {
    issuer,
    tokenUrl: `${issuer}/token`,
    clients: DEMO_CLIENTS,
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

/**
 * oidc-provider's fetch, except for the listed URLs: it hands every fetch a dispatcher that refuses
 * special-use addresses, which those go without.
 */
function loopbackJwksFetch(allowed: readonly string[]) {
  return (input: string | URL | Request, init?: RequestInit): Promise<Response> =>
    globalThis.fetch(input, allowed.includes(String(input)) ? ({ ...init, dispatcher: undefined } as RequestInit) : init);
}

/** Every https resource is a demo API: its tokens are JWTs addressed to it (`aud`), with the demo scopes. */
async function resourceServerInfo(_ctx: unknown, resourceIndicator: string): Promise<ResourceServer> {
  if (!resourceIndicator.startsWith('https://')) throw new errors.InvalidTarget('the demo IdP knows only https resources');
  return { scope: DEMO_SCOPES.join(' '), audience: resourceIndicator, accessTokenFormat: 'jwt', jwt: { sign: { alg: 'RS256' } } };
}

function client(
  { clientId, clientSecret }: DemoClient,
  method: 'client_secret_basic' | 'client_secret_post' | 'client_secret_jwt',
): ClientMetadata {
  return {
    client_id: clientId,
    client_secret: clientSecret,
    token_endpoint_auth_method: method,
    grant_types: ['client_credentials'],
    response_types: [],
    redirect_uris: [],
    scope: DEMO_SCOPES.join(' '),
  };
}

async function signingKey(): Promise<JWK> {
  // RS256: the algorithm oidc-provider and its clients default to.
  const { privateKey } = await promisify(generateKeyPair)('rsa', { modulusLength: 2048 });
  return { ...privateKey.export({ format: 'jwk' }), alg: 'RS256', use: 'sig', kid: randomBytes(8).toString('base64url') };
}
