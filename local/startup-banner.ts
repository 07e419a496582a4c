import { TOKEN_PATHS } from '../lambda/request/routes';
import { DEMO_CALLER, DEMO_CALLER_ROLE, DEMO_CREDENTIALS, KEYLESS_CLIENT_ID } from './demo-credentials';
import { LOCAL_IAM_CALLER_HEADER, type LocalApi } from './http-api-gateway';
import type { Idp } from './idp';

/** With TOKEN_CACHE=shared: where the embedded table is, and the second instance that shares it. */
export interface SharedCacheBanner {
  readonly endpoint: string;
  readonly tableName: string;
  readonly secondInstanceUrl: string;
}

/** Whose stored credentials the local run serves: the demo's, or those the shell named (by that variable). */
export type BannerCredentials =
  { readonly from: 'demo' } | { readonly from: 'STORED_CREDENTIALS' | 'STORED_CREDENTIALS_FILE'; readonly names: readonly string[] };

export interface BannerFacts {
  readonly serviceUrl: string;
  readonly idp: Pick<Idp, 'issuer' | 'tokenUrl' | 'clients'>;
  readonly allowlist: string;
  readonly jwksUri: string;
  readonly api: LocalApi;
  readonly credentials: BannerCredentials;
  /** With TOKEN_CACHE=shared. */
  readonly shared?: SharedCacheBanner;
}

/**
 * What `npm start` prints once both servers listen: where the service is, which API Gateway it
 * stands in for and which token URLs it allows, the embedded IdP's issuer, token URL and demo
 * clients, the shared cache's table if it is on, whose stored credentials it serves and how to act as
 * their IAM caller locally, and the `curl`s that get a token through it: by token URL, by issuer, and
 * (with the demo's stored credentials) by stored credential.
 */
export function startupBanner({ serviceUrl, idp, allowlist, jwksUri, api, credentials: stored, shared }: BannerFacts): string {
  const { basic, post, jwt } = idp.clients;
  const basicClient = `${basic.clientId} / ${basic.clientSecret}`;
  const postClient = `${post.clientId} / ${post.clientSecret}`;
  const jwtClient = `${jwt.clientId} / ${jwt.clientSecret}`;
  const width = Math.max(basicClient.length, postClient.length, jwtClient.length);
  const credentials = { client_id: basic.clientId, client_secret: basic.clientSecret };
  const body = JSON.stringify({ ...credentials, access_token_url: idp.tokenUrl, scope: 'read' });
  const issuerBody = JSON.stringify({ ...credentials, issuer: idp.issuer, scope: 'read' });
  const curl = (json: string, headers: string[] = []): string[] => [
    `  curl -s ${serviceUrl}${TOKEN_PATHS[0]} \\`,
    ...[...headers, 'content-type: application/json'].map((header) => `    -H '${header}' \\`),
    `    -d '${json}'`,
  ];
  return [
    `Token exchange service listening on ${serviceUrl}`,
    api === 'rest'
      ? '  as a REST API: the handler gets payload 1.0 events (API=http, the default, sends 2.0 as the HTTP API)'
      : '  as the HTTP API: the handler gets payload 2.0 events (API=rest sends 1.0, as a REST API)',
    ...TOKEN_PATHS.map((path) => `  POST ${serviceUrl}${path}`),
    `  GET  ${serviceUrl}/openapi.yaml`,
    `  token URL allowlist: ${allowlist} (add other IdPs with TOKEN_URL_ALLOWLIST)`,
    '',
    'Embedded IdP (oidc-provider: client credentials grant, scopes "read write")',
    `  issuer        ${idp.issuer} (OpenID Connect Discovery at /.well-known/openid-configuration)`,
    `  token URL     ${idp.tokenUrl}`,
    `  demo client   ${basicClient.padEnd(width)}  (client_secret_basic)`,
    `  demo client   ${postClient.padEnd(width)}  (client_secret_post)`,
    `  demo client   ${jwtClient.padEnd(width)}  (client_secret_jwt)`,
    '',
    ...(shared
      ? [
          'Shared token cache (TOKEN_CACHE=shared), no AWS account involved:',
          `  table         ${shared.tableName} in an embedded DynamoDB-compatible server (dynalite, in memory) at ${shared.endpoint}`,
          `  2nd instance  ${shared.secondInstanceUrl} (its own memory tier; shares only the table)`,
          `  The same curl against ${shared.secondInstanceUrl} answers from the table: add -i to see x-token-cache: hit.`,
          '',
        ]
      : []),
    'Get a token:',
    ...curl(body),
    '',
    'Or name the issuer: the service reads the token endpoint from its metadata.',
    ...curl(issuerBody),
    '',
    ...(stored.from === 'demo'
      ? [
          'Stored credentials: the service holds the client, an IAM caller names it (no AWS account: local KMS and Secrets Manager stand-ins)',
          `  ${DEMO_CREDENTIALS.keyless.padEnd(18)}  ${KEYLESS_CLIENT_ID}, which has no secret: private_key_jwt signed in KMS;`,
          `  ${''.padEnd(18)}  the IdP knows it only by the JWKS URL ${jwksUri}`,
          `  ${DEMO_CREDENTIALS.secret.padEnd(18)}  ${idp.clients.post.clientId}, its secret in Secrets Manager, not with the caller`,
          `  callers             sessions of ${DEMO_CALLER_ROLE}`,
          ...ACT_AS_CALLER,
          '',
          'Get a token from the client with no secret:',
          ...curl(JSON.stringify({ credential: DEMO_CREDENTIALS.keyless, scope: 'read' }), [`${LOCAL_IAM_CALLER_HEADER}: ${DEMO_CALLER}`]),
          '',
        ]
      : [
          `Stored credentials: yours, from ${stored.from} (${stored.names.length}: ${stored.names.join(', ') || 'none'}), not the demo's.`,
          '  Their secrets and keys are looked up in the local KMS and Secrets Manager stand-ins, which hold none of them.',
          ...ACT_AS_CALLER,
          '',
        ]),
  ].join('\n');
}

const ACT_AS_CALLER = [
  `  Act as an IAM caller with the ${LOCAL_IAM_CALLER_HEADER} header: only this local gateway reads it, standing in for`,
  '  the SigV4 signature from which the deployed API (callerAuthorization=iam) takes the caller.',
];
