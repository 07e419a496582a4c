import { grantConfig } from '../lambda/exchange';
import type { ClientAuthentication, TokenRequest } from '../lambda/token-request';
import { checkTokenUrl, parseAllowlist } from '../lambda/token-url-policy';

// simple-oauth2's own schema, the one its public constructors run. exchange.ts skips it to keep
// joi out of the bundle, so this holds the configuration it builds to exactly what joi would give.
const Joi = require('joi') as { attempt: (value: unknown, schema: unknown) => unknown };
const { ClientCredentialsSchema } = require('simple-oauth2/lib/config') as { ClientCredentialsSchema: unknown };

describe('the simple-oauth2 configuration built without joi', () => {
  const target = checkTokenUrl('https://login.example.com/tenant/oauth2/token?x=1', parseAllowlist(''));

  const methods: [string, ClientAuthentication][] = [
    [
      'client_secret_basic, form-encoded',
      { authMethod: 'client_secret_basic', clientSecret: 'demo-secret', basicCredentialsEncoding: 'form' },
    ],
    ['client_secret_basic, raw', { authMethod: 'client_secret_basic', clientSecret: 'demo-secret', basicCredentialsEncoding: 'raw' }],
    ['client_secret_post', { authMethod: 'client_secret_post', clientSecret: 'demo-secret' }],
    ['client_secret_jwt', { authMethod: 'client_secret_jwt', clientSecret: 'demo-secret' }],
    ['private_key_jwt', { authMethod: 'private_key_jwt', clientAssertion: 'eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJzZXJ2aWNlLWEifQ.c2ln' }],
  ];

  it.each(methods)('equals what simple-oauth2 normalises for %s', (_name, authentication) => {
    // Prepare
    const request: TokenRequest = {
      clientId: 'service-a',
      accessTokenUrl: target.url.href,
      grantType: 'client_credentials',
      ...authentication,
    };
    const built = grantConfig(request, target, performance.now() + 5000);

    // Act: the options a caller of `new ClientCredentials(options)` would pass
    const normalised = Joi.attempt(
      {
        client: { id: built.client.id, secret: built.client.secret, secretParamName: built.client.secretParamName },
        auth: { tokenHost: built.auth.tokenHost, tokenPath: built.auth.tokenPath },
        options: {
          authorizationMethod: built.options.authorizationMethod,
          credentialsEncodingMode: built.options.credentialsEncodingMode,
          bodyFormat: 'form',
        },
        http: built.http,
      },
      ClientCredentialsSchema,
    );

    // Assess
    expect(built).toEqual(normalised);
  });

  it.each([
    ['client_secret_basic', 'header', 'client_secret'],
    ['client_secret_post', 'body', 'client_secret'],
    ['client_secret_jwt', 'body', 'client_assertion'],
    ['private_key_jwt', 'body', 'client_assertion'],
  ])('sends %s in the %s, its credential as %s', (authMethod, authorizationMethod, secretParamName) => {
    // Prepare
    const authentication = methods.find(([, candidate]) => candidate.authMethod === authMethod)?.[1] as ClientAuthentication;

    // Act
    const built = grantConfig(
      { clientId: 'a', accessTokenUrl: target.url.href, grantType: 'client_credentials', ...authentication },
      target,
      0,
    );

    // Assess
    expect([built.options.authorizationMethod, built.client.secretParamName]).toEqual([authorizationMethod, secretParamName]);
  });

  it("uses simple-oauth2's loose credentials encoding for raw Basic credentials", () => {
    // Act
    const built = grantConfig(
      {
        clientId: 'a',
        clientSecret: 'b',
        authMethod: 'client_secret_basic',
        basicCredentialsEncoding: 'raw',
        accessTokenUrl: target.url.href,
        grantType: 'x',
      },
      target,
      0,
    );

    // Assess
    expect(built.options.credentialsEncodingMode).toBe('loose');
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
