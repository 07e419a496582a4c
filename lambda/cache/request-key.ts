import { createHash } from 'node:crypto';
import type { TokenRequest } from '../request/token-request';

/** A request authenticated by a client secret: the only kind a cache may answer, share or remember. */
export type SecretRequest = Extract<TokenRequest, { clientSecret: string }>;

/**
 * Whether a cache may answer a request, share its exchange or remember its outcome. Every secret
 * method may (`client_secret_jwt` too): the key holds the secret, so only the same secret finds the
 * token. A `private_key_jwt` request may not: the service cannot verify the caller's assertion (the
 * IdP holds the key), so a kept token would go to anyone presenting a forged one for that client.
 */
export function cacheable(request: TokenRequest): request is SecretRequest {
  return request.authMethod !== 'private_key_jwt';
}

/**
 * Everything that shapes the token but the secret, as one canonical text, with the token URL as the
 * policy normalised it. Built from every field on purpose, so a field added to requests later keeps
 * tokens apart without anyone remembering to list it here.
 */
export function requestText(request: SecretRequest, tokenUrl: string): string {
  const fields: Record<string, unknown> = { ...request, accessTokenUrl: tokenUrl };
  const names = Object.keys(fields).filter((name) => name !== 'clientSecret');
  // In code unit order: the text is part of a stored format (the item key), so it never depends on a locale.
  return JSON.stringify(names.sort().map((name) => [name, fields[name]]));
}

/**
 * The key of a request's token in this instance's memory: a SHA-256 of the secret and the request
 * text, so a wrong secret never finds a right one's token and no secret is kept as a key.
 */
export function memoryKey(request: SecretRequest, tokenUrl: string): string {
  return createHash('sha256')
    .update(JSON.stringify([request.clientSecret, requestText(request, tokenUrl)]))
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
