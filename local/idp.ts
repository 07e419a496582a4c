import { generateKeyPair, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import Provider, { type ClientMetadata, type JWK } from 'oidc-provider';
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
  };
  close(): Promise<void>;
}

export const DEMO_CLIENTS = {
  basic: { clientId: 'demo-client', clientSecret: 'demo-secret' },
  post: { clientId: 'demo-post-client', clientSecret: 'demo-post-secret' },
} as const satisfies Idp['clients'];

export const DEMO_SCOPES = ['read', 'write'] as const;

/**
 * Start a real OAuth 2.0 authorization server (oidc-provider) that issues tokens for the
 * client-credentials grant (RFC 6749 4.4) to the two demo clients, over http on a loopback address.
 * Keys are generated at every start, and tokens live in memory only.
 */
export async function startIdp(options: { port?: number; host?: string } = {}): Promise<Idp> {
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
      clients: [client(DEMO_CLIENTS.basic, 'client_secret_basic'), client(DEMO_CLIENTS.post, 'client_secret_post')],
      scopes: [...DEMO_SCOPES],
      jwks: { keys: [key] },
      cookies: { keys: [randomBytes(32).toString('base64url')] },
      features: { clientCredentials: { enabled: true }, devInteractions: { enabled: false } },
      routes: { token: '/token' },
      // A number, not oidc-provider's default function, which prints a notice the first time it runs.
      ttl: { ClientCredentials: 3600 },
    });
  } catch (error) {
    server.close();
    throw error;
  }
  server.on('request', provider.callback());

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

function client({ clientId, clientSecret }: DemoClient, method: 'client_secret_basic' | 'client_secret_post'): ClientMetadata {
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
