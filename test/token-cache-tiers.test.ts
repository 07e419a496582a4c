import { loadConfig } from '../lambda/config';
import type { IdpToken } from '../lambda/exchange';
import { callTimeoutFor } from '../lambda/shared-token-cache';
import { cacheable, type SecretRequest, tokenShapingFields } from '../lambda/token-cache';
import { createTokenCacheTiers } from '../lambda/token-cache-tiers';
import type { TokenRequest } from '../lambda/token-request';

const REQUEST: SecretRequest = {
  clientId: 'tiers-client',
  clientSecret: 'tiers-secret',
  accessTokenUrl: 'https://idp.example.com/token',
  grantType: 'client_credentials',
  scope: 'read',
  authMethod: 'client_secret_basic',
  basicCredentialsEncoding: 'form',
};
const TOKEN_URL = 'https://idp.example.com/token';
const token = (): IdpToken => ({ access_token: 'at', expires_in: 3600 });

describe('createTokenCacheTiers', () => {
  it('makes no tiers when TOKEN_CACHE is off', () => {
    expect(createTokenCacheTiers(loadConfig({}))).toBeUndefined();
  });

  it('answers a repeat from memory when TOKEN_CACHE is memory', async () => {
    const tiers = createTokenCacheTiers(loadConfig({ TOKEN_CACHE: 'memory' }));
    const exchange = jest.fn(async () => token());

    const first = await tiers?.resolve(REQUEST, TOKEN_URL, exchange, {});
    const second = await tiers?.resolve(REQUEST, TOKEN_URL, exchange, {});

    expect([first?.tier, second?.tier]).toEqual(['miss', 'memory']);
    expect(exchange).toHaveBeenCalledTimes(1);
  });

  it('refuses the shared tier without a table name', () => {
    const act = () => createTokenCacheTiers({ tokenCache: 'shared', upstreamTimeoutMs: 5000 });

    expect(act).toThrow('Environment variable TOKEN_CACHE_TABLE is required when TOKEN_CACHE is "shared"');
  });
});

describe('cacheable', () => {
  it('allows a request with a client secret, even an empty one', () => {
    expect(cacheable(REQUEST)).toBe(true);
    expect(cacheable({ ...REQUEST, clientSecret: '' })).toBe(true);
  });

  it('refuses a private_key_jwt request, whose assertion the service cannot verify', () => {
    const { clientId, accessTokenUrl, grantType } = REQUEST;
    const request: TokenRequest = { clientId, accessTokenUrl, grantType, authMethod: 'private_key_jwt', clientAssertion: 'a.b.c' };
    expect(cacheable(request)).toBe(false);
  });
});

describe('tokenShapingFields', () => {
  it('lists every field but the secret, sorted, with the token URL the policy normalised', () => {
    const fields = JSON.parse(tokenShapingFields({ ...REQUEST, accessTokenUrl: 'HTTPS://IDP.example.com/token' }, TOKEN_URL));

    expect(fields).toEqual([
      ['accessTokenUrl', TOKEN_URL],
      ['authMethod', 'client_secret_basic'],
      ['basicCredentialsEncoding', 'form'],
      ['clientId', 'tiers-client'],
      ['grantType', 'client_credentials'],
      ['scope', 'read'],
    ]);
  });

  it('keeps a field it was never told about, so a field added to requests later shapes the key too', () => {
    const withResource = { ...REQUEST, resource: ['https://api.example.com'] } as TokenRequest;

    expect(tokenShapingFields(withResource, TOKEN_URL)).not.toBe(tokenShapingFields(REQUEST, TOKEN_URL));
  });
});

describe('callTimeoutFor', () => {
  it.each([
    [5000, 500],
    [29_000, 1000],
    [300, 30],
    [5, 1],
  ])('gives a deadline of %p ms table calls of %p ms', (deadline, timeout) => {
    expect(callTimeoutFor(deadline)).toBe(timeout);
  });
});
