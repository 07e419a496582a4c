import { Deadline, systemClock } from '../lambda/clock';
import { ClientCredentials } from 'simple-oauth2';
import { loadConfig } from '../lambda/config';
import { grantConfig } from '../lambda/upstream/grant-config';
import { destroyAgents } from '../lambda/upstream/guarded-agents';
import { createHandler } from '../lambda/handler';
import type { TokenRequest } from '../lambda/request/token-request';
import { checkTokenUrl, parseAllowlist } from '../lambda/policy/token-url-policy';
import { recordingObservability, tokenEvent } from './support/events';
import { type ReceivedRequest, startTokenServer, type TokenServer } from './support/token-server';

// simple-oauth2's own schema, the one its public constructors run. exchange.ts skips it to keep
// joi out of the bundle, so these tests hold what it builds to what joi would give, and what it
// sends to what the public API sends.
const Joi = require('joi') as { attempt: (value: unknown, schema: unknown) => unknown };
const { ClientCredentialsSchema } = require('simple-oauth2/lib/config') as { ClientCredentialsSchema: unknown };

const TOKEN_URL = 'https://login.example.com/tenant/oauth2/token?x=1';

describe('the simple-oauth2 configuration built without joi', () => {
  it.each([
    ['client_secret_basic', 'header'],
    ['client_secret_post', 'body'],
  ] as const)('equals what simple-oauth2 normalises from the options a caller would give for %s', (authMethod, authorizationMethod) => {
    // Prepare
    const target = checkTokenUrl(TOKEN_URL, parseAllowlist(''));
    const request: TokenRequest = {
      clientId: 'service-a',
      clientSecret: 'demo-secret',
      accessTokenUrl: TOKEN_URL,
      grantType: 'client_credentials',
      authMethod,
    };
    const built = grantConfig(request, target, Deadline.after(systemClock(), 5000));

    // Act: the options a caller of `new ClientCredentials(options)` would write for this request
    const normalised = Joi.attempt(
      {
        client: { id: 'service-a', secret: 'demo-secret' },
        auth: { tokenHost: 'https://login.example.com', tokenPath: TOKEN_URL },
        options: { authorizationMethod, credentialsEncodingMode: 'strict', bodyFormat: 'form' },
        http: {
          headers: { accept: 'application/json', 'user-agent': 'token-exchange-service' },
          redirects: false,
          json: 'force',
          maxBytes: 1024 * 1024,
          timeout: built.http.timeout,
        },
      },
      ClientCredentialsSchema,
    );

    // Assess
    expect(built).toEqual(normalised);
  });
});

describe('what reaches the IdP', () => {
  let server: TokenServer;

  beforeAll(async () => {
    server = await startTokenServer();
  });

  beforeEach(() => {
    server.received.length = 0;
  });

  afterAll(async () => {
    destroyAgents();
    await server.close();
  });

  // What a request is on the wire, less what differs between two connections.
  const onTheWire = ({ method, url, headers, body }: ReceivedRequest) => {
    const { connection: _connection, ...rest } = headers;
    return { method, url, headers: rest, body };
  };

  it.each([
    ['client_secret_basic', 'header'],
    ['client_secret_post', 'body'],
  ] as const)('is what the public ClientCredentials API sends for %s, connection header aside', async (authMethod, authorizationMethod) => {
    // Prepare
    const path = '//169.254.169.254/tenant/oauth2/token?x=a%20b';
    const handler = createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: server.origin }), recordingObservability());
    const publicClient = new ClientCredentials({
      client: { id: 'svc:a b', secret: "s3cr:t/!'()*~ %" },
      auth: { tokenHost: server.origin, tokenPath: `${server.origin}${path}` },
      options: { authorizationMethod, credentialsEncodingMode: 'strict', bodyFormat: 'form' },
      http: { headers: { accept: 'application/json', 'user-agent': 'token-exchange-service' }, redirects: false },
    });

    // Act
    await handler(
      tokenEvent({
        client_id: 'svc:a b',
        client_secret: "s3cr:t/!'()*~ %",
        access_token_url: `${server.origin}${path}`,
        token_endpoint_auth_method: authMethod,
        scope: 'read write',
        audience: 'https://api.example.com',
      }),
    );
    await publicClient.getToken({ scope: 'read write', audience: 'https://api.example.com' });

    // Assess
    const [ours, theirs] = server.received;
    expect(server.received).toHaveLength(2);
    expect(onTheWire(ours as ReceivedRequest)).toEqual(onTheWire(theirs as ReceivedRequest));
    expect(ours?.url).toBe(path);
    expect(ours?.headers.host).toBe(new URL(server.origin).host);
  });
});
