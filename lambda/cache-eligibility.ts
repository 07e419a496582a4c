import type { TokenRequest } from './token-request';

/**
 * Whether a token for this request may be answered from a cache, or kept in one. Every secret
 * method may: the cache key holds the secret, so only the same secret finds the entry. A
 * `private_key_jwt` request may not: the service cannot verify the caller's assertion (the IdP
 * holds the key), so a cached token would go to anyone presenting a forged one for that client.
 */
export function isCacheable(request: Pick<TokenRequest, 'authMethod'>): boolean {
  return request.authMethod !== 'private_key_jwt';
}
