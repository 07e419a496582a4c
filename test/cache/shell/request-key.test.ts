import { createHash } from 'node:crypto';
import type { CredentialRequest } from '../../../lambda/credentials/access-policy';
import {
  assertionHoldKey,
  cacheable,
  clientHoldKey,
  credentialHoldKey,
  earnedHoldKey,
  holdKeysOf,
  keySecret,
  memoryKey,
  requestText,
  type SecretRequest,
  vouched,
} from '../../../lambda/cache/request-key';
import { parseTokenRequest, type TokenRequest } from '../../../lambda/request/token-request';
import { SECRET_REQUEST, tokenEvent } from '../../support/events';

// How a request is keyed: what the cache may answer, the text and secret that key its token, and the holds that cover it.

const URL = 'https://idp.example/t';
const STORED: CredentialRequest = {
  credential: 'orders',
  clientId: 'c',
  accessTokenUrl: URL,
  grantType: 'client_credentials',
  authMethod: 'private_key_jwt',
};
const ASSERTION = {
  clientId: 'c',
  accessTokenUrl: URL,
  grantType: 'g',
  authMethod: 'private_key_jwt',
  clientAssertion: 'a.b.c',
} as TokenRequest;

describe('cacheable', () => {
  it.each(['client_secret_basic', 'client_secret_post', 'client_secret_jwt'] as const)('lets a cache answer a %s request', (authMethod) => {
    expect(cacheable({ ...SECRET_REQUEST, authMethod })).toBe(true);
  });

  it("never lets a cache answer a caller's private_key_jwt request, whose assertion the service cannot verify", () => {
    expect(cacheable(ASSERTION)).toBe(false);
  });

  it("lets a cache answer a stored credential's request whatever its method: the broker authenticates the client", () => {
    expect([cacheable(STORED), cacheable({ ...STORED, authMethod: 'client_secret_basic' })]).toEqual([true, true]);
  });
});

describe('requestText', () => {
  it('holds every field but the secret, by name in code unit order, with the token URL as the policy normalised it', () => {
    const request = { ...SECRET_REQUEST, scope: 'read write', audience: 'api', clientSecret: 'request-key-test-secret' };

    const text = requestText(request, `${URL}?normalised`);

    // A stored format: shared items are keyed by it, across deployments.
    expect(text).toBe(
      '[["accessTokenUrl","https://idp.example/t?normalised"],["audience","api"],["authMethod","client_secret_post"],' +
        '["clientId","c"],["grantType","g"],["scope","read write"]]',
    );
    expect(text).not.toContain('request-key-test-secret');
  });

  it('of a request as parsed names only the fields it was sent, and the defaults', () => {
    const event = tokenEvent({ client_id: 'c', client_secret: 'request-key-test-secret', access_token_url: URL });

    const text = requestText(parseTokenRequest(event) as SecretRequest, URL);

    // No scope, audience or resource: one read as absent (`null` in the text) would key every token anew.
    expect(text).toBe(
      '[["accessTokenUrl","https://idp.example/t"],["authMethod","client_secret_basic"],["basicCredentialsEncoding","form"],' +
        '["clientId","c"],["grantType","client_credentials"]]',
    );
  });

  it('is the same whatever order the fields came in, in code unit order whatever the locale', () => {
    const { clientId, ...rest } = { ...SECRET_REQUEST, Zeta: 'z', zeta: 'y' };

    expect(requestText({ ...rest, clientId }, URL)).toBe(requestText({ clientId, ...rest }, URL));
    expect(JSON.parse(requestText({ clientId, ...rest }, URL)).map(([name]: [string]) => name)).toEqual([
      'Zeta',
      'accessTokenUrl',
      'authMethod',
      'clientId',
      'grantType',
      'zeta',
    ]);
  });

  it("names a stored credential's request by its credential", () => {
    expect(requestText(STORED, URL)).toBe(
      '[["accessTokenUrl","https://idp.example/t"],["authMethod","private_key_jwt"],["clientId","c"],' +
        '["credential","orders"],["grantType","client_credentials"]]',
    );
  });
});

describe('keySecret and memoryKey', () => {
  it("keys a caller's request by its secret, a stored credential's by none", () => {
    expect([keySecret(SECRET_REQUEST), keySecret(STORED)]).toEqual(['s', null]);
  });

  it('is a SHA-256 of the secret and the request text, so no secret is kept as a key', () => {
    const expected = createHash('sha256')
      .update(JSON.stringify(['s', requestText(SECRET_REQUEST, URL)]))
      .digest('base64url');

    expect(memoryKey(SECRET_REQUEST, URL)).toBe(expected);
    expect(memoryKey(STORED, URL)).toBe(
      createHash('sha256')
        .update(JSON.stringify([null, requestText(STORED, URL)]))
        .digest('base64url'),
    );
  });

  it('keeps secrets, clients and token URLs apart', () => {
    const keys = [
      memoryKey(SECRET_REQUEST, URL),
      memoryKey({ ...SECRET_REQUEST, clientSecret: 'another' }, URL),
      memoryKey({ ...SECRET_REQUEST, clientId: 'another' }, URL),
      memoryKey(SECRET_REQUEST, `${URL}?tenant=2`),
    ];

    expect(new Set(keys).size).toBe(4);
    expect(memoryKey({ ...SECRET_REQUEST }, URL)).toBe(keys[0]);
  });
});

describe('the hold keys', () => {
  it('hold one client id at one token URL, the whole URL with its query', () => {
    expect(clientHoldKey('c', `${URL}?tenant=1`)).toBe('["c","https://idp.example/t?tenant=1"]');
  });

  it("keep a client's private_key_jwt holds apart from the holds on the whole client", () => {
    expect(assertionHoldKey('c', URL)).toBe('["c","https://idp.example/t","private_key_jwt"]');
  });

  it('hold one stored credential at its token URL, apart from any client id', () => {
    expect(credentialHoldKey('c', URL)).toBe('{"credential":"c","tokenUrl":"https://idp.example/t"}');
  });

  it("cover a caller's request by its client id's hold", () => {
    expect(holdKeysOf(SECRET_REQUEST, URL)).toEqual([clientHoldKey('c', URL)]);
    expect(earnedHoldKey(SECRET_REQUEST, URL)).toBe(clientHoldKey('c', URL));
    expect(vouched(SECRET_REQUEST)).toBe(false);
  });

  it("cover a stored credential's request by its own hold and its client id's, and its hold goes to its own, vouched for by the broker", () => {
    expect(holdKeysOf(STORED, URL)).toEqual([credentialHoldKey('orders', URL), clientHoldKey('c', URL)]);
    expect(earnedHoldKey(STORED, URL)).toBe(credentialHoldKey('orders', URL));
    expect(vouched(STORED)).toBe(true);
  });
});
