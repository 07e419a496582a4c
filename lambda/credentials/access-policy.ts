import { credentialNotAllowed } from '../errors';
import type { CredentialAsk } from '../request/token-request';
import type { StoredCredential, StoredMethod } from './registry';

/**
 * A stored credential's token request, authorised: what the token cache keys (its name, client, token
 * URL and what the token is for; no secret, since the caller holds none) and what the exchange sends.
 */
export interface CredentialRequest {
  readonly credential: string;
  readonly clientId: string;
  readonly accessTokenUrl: string;
  readonly grantType: 'client_credentials';
  readonly scope?: string;
  readonly audience?: string;
  readonly resource?: readonly string[];
  readonly authMethod: StoredMethod;
}

/** A credential whose IdP is named by its issuer: the token URL comes from the issuer's metadata. */
export type CredentialByIssuer = Omit<CredentialRequest, 'accessTokenUrl'> & { readonly issuer: string };

/**
 * Whether this caller may have this credential's token for what it asks (the contract's Stored
 * credentials), and the request to send if so. The caller's principal must match a `callers`
 * pattern; every scope token asked must be among `scopes`, and an `audience` or `resource` asked must
 * be the credential's, when it lists or sets them. Anything else, an unknown name or no caller, is the
 * one refusal, whatever failed. What the caller leaves out, the credential fills in: a caller never
 * gets more than the credential allows by asking for nothing.
 */
export function authorize(
  ask: CredentialAsk,
  credential: StoredCredential | undefined,
  principal: string | undefined,
): CredentialRequest | CredentialByIssuer {
  if (!credential || principal === undefined || !credential.callers.some((pattern) => pattern.matches(principal))) {
    throw credentialNotAllowed();
  }
  const { scopes, audience, resource } = credential;
  const asked = ask.scope?.split(' ');
  if (scopes && asked?.some((token) => !scopes.includes(token))) throw credentialNotAllowed();
  if (audience !== undefined && ask.audience !== undefined && ask.audience !== audience) throw credentialNotAllowed();
  if (resource !== undefined && ask.resource?.some((item) => item !== resource)) throw credentialNotAllowed();
  return {
    credential: credential.name,
    clientId: credential.clientId,
    ...('issuer' in credential.idp ? { issuer: credential.idp.issuer } : { accessTokenUrl: credential.idp.tokenUrl }),
    grantType: 'client_credentials',
    // What the caller left out, undefined where the credential sets nothing either: never sent.
    scope: ask.scope ?? scopes?.join(' '),
    audience: ask.audience ?? audience,
    resource: ask.resource ?? (resource === undefined ? undefined : [resource]),
    authMethod: credential.authentication.method,
  };
}
