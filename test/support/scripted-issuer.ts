import { DEMO_TOKEN, json, type ReceivedRequest, type Script } from './token-server';

export const OIDC_DISCOVERY = '/.well-known/openid-configuration';
export const OAUTH_METADATA = '/.well-known/oauth-authorization-server';

/** The two well-known paths of an issuer with `path` (`''` for none), OpenID Connect Discovery's first. */
export function wellKnownPaths(path: string): { oidc: string; oauth: string } {
  const trimmed = path.replace(/\/$/, '');
  return { oidc: `${trimmed}${OIDC_DISCOVERY}`, oauth: `${OAUTH_METADATA}${trimmed}` };
}

/** An authorization server's metadata (RFC 8414 2) naming its issuer and token endpoint; `overrides` replace or add members. */
export function metadataDocument(issuer: string, tokenEndpoint: string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    issuer,
    token_endpoint: tokenEndpoint,
    grant_types_supported: ['client_credentials'],
    response_types_supported: ['code'],
    ...overrides,
  };
}

/**
 * A script for the scripted token server that plays an issuer: a GET of a listed path answers with
 * that path's script, any other GET is a 404, and anything else (the token request) gets `token`.
 */
export function issuerScript(documents: Record<string, Script>, token: Script = json(200, DEMO_TOKEN)): Script {
  return (request, response) => {
    if (request.method !== 'GET') return token(request, response);
    const document = documents[request.url];
    return document ? document(request, response) : json(404, { error: 'not_found' })(request, response);
  };
}

/** Answers as `script` after `ms`. */
export const after =
  (ms: number, script: Script): Script =>
  async (request, response) => {
    await new Promise((resolve) => setTimeout(resolve, ms));
    await script(request, response);
  };

/** Never answers: the socket stays open until the client gives up or the server closes. */
export const silent: Script = () => undefined;

/** What the server received, as `METHOD path` lines: the order of metadata and token requests at a glance. */
export const requestLines = (received: readonly ReceivedRequest[]): string[] =>
  received.map((request) => `${request.method} ${request.url}`);
