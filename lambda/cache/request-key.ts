import { createHash } from 'node:crypto';
import type { CredentialRequest } from '../credentials/access-policy';
import type { TokenRequest } from '../request/token-request';

/** A request authenticated by a client secret the caller sent. */
export type SecretRequest = Extract<TokenRequest, { clientSecret: string }>;

/** The requests a cache may answer, share or remember: a caller's secret request, or a stored credential's. */
export type CacheableRequest = SecretRequest | CredentialRequest;

/**
 * Whether a cache may answer a request, share its exchange or remember its outcome. Every secret
 * method may (`client_secret_jwt` too): the key holds the secret, so only the same secret finds the
 * token. A caller's `private_key_jwt` request may not: the service cannot verify the caller's
 * assertion (the IdP holds the key), so a kept token would go to anyone presenting a forged one for
 * that client. A stored credential's request may, whatever its method: the access policy has
 * authorised its caller, and the broker itself authenticates the client.
 */
export function cacheable(request: TokenRequest | CredentialRequest): request is CacheableRequest {
  return 'credential' in request || request.authMethod !== 'private_key_jwt';
}

/**
 * The secret that keys a request besides its text: the caller's, or none for a stored credential,
 * whose caller holds no secret (its text names the credential, so it never meets a caller's key).
 */
export function keySecret(request: CacheableRequest): string | null {
  return 'credential' in request ? null : request.clientSecret;
}

/**
 * Everything that shapes the token but the secret, as one canonical text, with the token URL as the
 * policy normalised it. Built from every field on purpose, so a field added to requests later keeps
 * tokens apart without anyone remembering to list it here.
 */
export function requestText(request: CacheableRequest, tokenUrl: string): string {
  const fields: Record<string, unknown> = { ...request, accessTokenUrl: tokenUrl };
  const names = Object.keys(fields).filter((name) => name !== 'clientSecret');
  // In code unit order: the text is part of a stored format (the item key), so it never depends on a locale.
  return JSON.stringify(names.sort().map((name) => [name, fields[name]]));
}

/**
 * The key of a request's token in this instance's memory: a SHA-256 of the secret and the request
 * text, so a wrong secret never finds a right one's token and no secret is kept as a key.
 */
export function memoryKey(request: CacheableRequest, tokenUrl: string): string {
  return createHash('sha256')
    .update(JSON.stringify([keySecret(request), requestText(request, tokenUrl)]))
    .digest('base64url');
}

/** The hold item of one client id at one token URL (the whole URL, query included), whatever the secret. */
export function clientHoldKey(clientId: string, tokenUrl: string): string {
  return JSON.stringify([clientId, tokenUrl]);
}

/** The hold item of one client id's `private_key_jwt` requests at one token URL: what such a request's hold covers. */
export function assertionHoldKey(clientId: string, tokenUrl: string): string {
  return JSON.stringify([clientId, tokenUrl, 'private_key_jwt']);
}

/** The hold item of one stored credential at its token URL: what a hold the credential earns covers. */
export function credentialHoldKey(credential: string, tokenUrl: string): string {
  return JSON.stringify({ credential, tokenUrl });
}

/**
 * The hold items that cover a request: its client id's at its token URL (a hold on a client id
 * covers every request for it, stored credentials included), and a stored credential's own.
 */
export function holdKeysOf(request: CacheableRequest, tokenUrl: string): readonly string[] {
  const client = clientHoldKey(request.clientId, tokenUrl);
  return 'credential' in request ? [credentialHoldKey(request.credential, tokenUrl), client] : [client];
}

/** The hold item a proven key's hold goes to: a stored credential's own (it covers that credential only), or its client id's. */
export function earnedHoldKey(request: CacheableRequest, tokenUrl: string): string {
  return 'credential' in request ? credentialHoldKey(request.credential, tokenUrl) : clientHoldKey(request.clientId, tokenUrl);
}

/**
 * Whether a hold the request earns covers its whole hold item whatever its key kept: a stored
 * credential's, whose secret the broker holds, so no caller can earn a hold with a wrong one.
 */
export function vouched(request: CacheableRequest): boolean {
  return 'credential' in request;
}
