import type { CredentialRequest } from '../../lambda/credentials/access-policy';
import {
  assertionHoldKey,
  cacheable,
  clientHoldKey,
  holdKeyOf,
  keySecret,
  memoryKey,
  requestText,
  type SecretRequest,
  vouched,
} from '../../lambda/cache/request-key';
import { parseTokenRequest } from '../../lambda/request/token-request';
import { SECRET_REQUEST, tokenEvent } from '../support/events';

const URL = 'https://idp.example/t';

describe('requestText', () => {
  it('holds every field but the secret, by name in code unit order, with the token URL as the policy normalised it', () => {
    const request = { ...SECRET_REQUEST, scope: 'read write', audience: 'api', clientSecret: 'request-key-test-secret' };

    const text = requestText(request, `${URL}?normalised`);

    // A stored format: shared items are keyed by it, across deployments
    expect(text).toBe(
      '[["accessTokenUrl","https://idp.example/t?normalised"],["audience","api"],["authMethod","client_secret_post"],' +
        '["clientId","c"],["grantType","g"],["scope","read write"]]',
    );
    expect(text).not.toContain('request-key-test-secret');
  });

  it('of a request as parsed names only the fields it was sent, and the defaults', () => {
    const event = tokenEvent({ client_id: 'c', client_secret: 'request-key-test-secret', access_token_url: URL });

    const text = requestText(parseTokenRequest(event) as SecretRequest, URL);

    // No scope, audience or resource: one read as absent (`null` in the text) would key every token anew
    expect(text).toBe(
      '[["accessTokenUrl","https://idp.example/t"],["authMethod","client_secret_basic"],["basicCredentialsEncoding","form"],' +
        '["clientId","c"],["grantType","client_credentials"]]',
    );
  });

  it('is the same whatever order the fields came in', () => {
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
});

describe('memoryKey and the hold keys', () => {
  it('keep secrets and clients apart, and a hold is one client id at one token URL', () => {
    const other = { ...SECRET_REQUEST, clientSecret: 'another' };

    expect(memoryKey(other, URL)).not.toBe(memoryKey(SECRET_REQUEST, URL));
    expect(memoryKey(SECRET_REQUEST, URL)).toBe(memoryKey({ ...SECRET_REQUEST }, URL));
    expect(clientHoldKey('c', URL)).toBe('["c","https://idp.example/t"]');
    expect(cacheable(SECRET_REQUEST)).toBe(true);
  });

  it("keep a client's private_key_jwt holds apart from the holds on the whole client", () => {
    expect(assertionHoldKey('c', URL)).toBe('["c","https://idp.example/t","private_key_jwt"]');
    expect(assertionHoldKey('c', URL)).not.toBe(clientHoldKey('c', URL));
  });
});

describe("a stored credential's request", () => {
  const STORED: CredentialRequest = {
    credential: 'orders',
    clientId: 'c',
    accessTokenUrl: URL,
    grantType: 'client_credentials',
    authMethod: 'private_key_jwt',
  };

  it("is cacheable whatever its method, where a caller's private_key_jwt request is not", () => {
    const assertion = { clientId: 'c', accessTokenUrl: URL, grantType: 'g', authMethod: 'private_key_jwt', clientAssertion: 'a.b.c' };

    expect(cacheable(STORED)).toBe(true);
    expect(cacheable(assertion as Parameters<typeof cacheable>[0])).toBe(false);
  });

  it('is keyed by no secret, and holds its credential at its token URL, vouched for by the broker', () => {
    expect(keySecret(STORED)).toBeNull();
    expect(holdKeyOf(STORED, URL)).toBe('{"credential":"orders","tokenUrl":"https://idp.example/t"}');
    expect(vouched(STORED)).toBe(true);
  });

  it("differs from a caller's secret request, held at its client id and vouched for by nobody", () => {
    expect(keySecret(SECRET_REQUEST)).toBe('s');
    expect(holdKeyOf(SECRET_REQUEST, URL)).toBe(clientHoldKey('c', URL));
    expect(vouched(SECRET_REQUEST)).toBe(false);
  });
});
