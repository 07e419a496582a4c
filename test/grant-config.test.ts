import { grantConfig } from '../lambda/exchange';
import type { TokenRequest } from '../lambda/token-request';
import { checkTokenUrl, parseAllowlist } from '../lambda/token-url-policy';

// simple-oauth2's own schema, the one its public constructors run. exchange.ts skips it to keep
// joi out of the bundle, so this holds the configuration it builds to exactly what joi would give.
const Joi = require('joi') as { attempt: (value: unknown, schema: unknown) => unknown };
const { ClientCredentialsSchema } = require('simple-oauth2/lib/config') as { ClientCredentialsSchema: unknown };

describe('the simple-oauth2 configuration built without joi', () => {
  const target = checkTokenUrl('https://login.example.com/tenant/oauth2/token?x=1', parseAllowlist(''));

  it.each(['client_secret_basic', 'client_secret_post'] as const)('equals what simple-oauth2 normalises for %s', (authMethod) => {
    // Prepare
    const request: TokenRequest = {
      clientId: 'service-a',
      clientSecret: 'demo-secret',
      accessTokenUrl: target.url.href,
      grantType: 'client_credentials',
      authMethod,
    };
    const built = grantConfig(request, target, performance.now() + 5000);

    // Act: the options a caller of `new ClientCredentials(options)` would pass
    const normalised = Joi.attempt(
      {
        client: { id: built.client.id, secret: built.client.secret },
        auth: { tokenHost: built.auth.tokenHost, tokenPath: built.auth.tokenPath },
        options: {
          authorizationMethod: built.options.authorizationMethod,
          credentialsEncodingMode: 'strict',
          bodyFormat: 'form',
        },
        http: built.http,
      },
      ClientCredentialsSchema,
    );

    // Assess
    expect(built).toEqual(normalised);
  });

  it('posts to the absolute URL, so a path can never change the host', () => {
    const tricky = checkTokenUrl('https://login.example.com//169.254.169.254/latest', parseAllowlist(''));
    const request = {
      clientId: 'a',
      clientSecret: 'b',
      accessTokenUrl: tricky.url.href,
      grantType: 'x',
      authMethod: 'client_secret_basic',
    } as const;

    const built = grantConfig(request, tricky, performance.now() + 1000);

    expect(new URL(built.auth.tokenPath, built.auth.tokenHost).host).toBe('login.example.com');
    expect(built.auth.tokenPath).toBe('https://login.example.com//169.254.169.254/latest');
  });
});
