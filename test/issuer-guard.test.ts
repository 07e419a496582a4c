import type { APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { loadConfig } from '../lambda/config';
import { destroyAgents } from '../lambda/upstream/guarded-agents';
import { createHandler, type TokenHandler } from '../lambda/handler';
import { withPermit } from './support/configs';
import { recordingObservability, tokenEvent } from './support/events';
import { issuerScript, metadataDocument, requestLines, wellKnownPaths } from './support/scripted-issuer';
import { allowlistLookalikePayloads, atPort, dnsOnlyNames, type Payload, PORT, refusedEverywherePayloads } from './support/ssrf-payloads';
import { json, startTokenServer, type TokenServer } from './support/token-server';
import { lockNetwork, type NetworkJail, startTrapListeners, type TrapListeners } from './support/trap-listeners';

// The issuer is held to the token URL policy exactly as access_token_url is, and neither the
// metadata request nor the endpoint a document names can be turned against the service's network.
// The network is locked to loopback; the traps on 127.0.0.1 and ::1 count every connection.

const SECRET = 'issuer-guard-secret';
const STANDARD_ALLOWLIST = 'https://login.example.com,https://*.auth0.com';

let trap: TrapListeners;
let jail: NetworkJail;
let server: TokenServer;
let observed: ReturnType<typeof recordingObservability>;

beforeAll(async () => {
  trap = await startTrapListeners();
  server = await startTokenServer();
  jail = lockNetwork();
});

afterAll(async () => {
  destroyAgents();
  jail.release();
  await trap.close();
  await server.close();
});

beforeEach(() => {
  destroyAgents();
  jail.reset();
  server.received.length = 0;
  observed = recordingObservability();
});

const handlerFor = (env: Record<string, string>): TokenHandler => createHandler(loadConfig(env), observed);
const byIssuer = (issuer: string) => tokenEvent({ client_id: 'guard-client', client_secret: SECRET, issuer });
const errorBody = (response: APIGatewayProxyStructuredResultV2): unknown => JSON.parse(String(response.body));
const serverPort = (): number => Number(new URL(server.origin).port);
const titled = (payloads: Payload[]) =>
  payloads.map((payload) => ({ ...payload, shown: payload.url.length > 100 ? `${payload.url.slice(0, 60)}...` : payload.url }));

/** An issuer the access_token_url payload would be refused for is refused for the same rule, naming issuer, before any socket. */
async function expectIssuerRefusedBeforeAnySocket(handler: TokenHandler, payload: Payload): Promise<void> {
  // Act
  const response = await handler(byIssuer(atPort(payload.url, trap.port)));

  // Assess
  const { status, code, description } = payload.refusedBy;
  expect({ status: response.statusCode, body: errorBody(response), attempts: jail.attempts, lookups: jail.lookups }).toEqual({
    status,
    body: { code, description: description.replace(/^access_token_url /, 'issuer ') },
    attempts: [],
    lookups: [],
  });
  expect(jail.socketsCreated()).toBe(0);
  expect(trap.accepted).toEqual([]);
  expect(JSON.stringify(observed.records)).not.toContain(SECRET);
}

describe('an issuer under the token URL policy with no allowlist', () => {
  const handler = (): TokenHandler => handlerFor({});

  it.each(titled(refusedEverywherePayloads(PORT)))('refuses $name before any socket or DNS query: $shown', async (payload) => {
    await expectIssuerRefusedBeforeAnySocket(handler(), payload);
  });

  it.each(dnsOnlyNames())(
    'hands $name to the guarded resolver for its metadata, and never connects while it resolves nowhere',
    async ({ url }) => {
      // Act
      const response = await handler()(byIssuer(url));

      // Assess: the locked network answers every name ENOTFOUND.
      expect(response.statusCode).toBe(502);
      expect(jail.lookups).toEqual([new URL(url).hostname]);
      expect(jail.refused).toEqual([]);
      expect(trap.accepted).toEqual([]);
      expect(observed.records[0]).toMatchObject({ outcome: 'upstream_error', metadata_error: 'unreachable' });
    },
  );
});

describe('an issuer under an allowlist of https://login.example.com and https://*.auth0.com', () => {
  it.each(titled(allowlistLookalikePayloads(PORT)))('refuses $name before any socket or DNS query: $shown', async (payload) => {
    await expectIssuerRefusedBeforeAnySocket(handlerFor({ TOKEN_URL_ALLOWLIST: STANDARD_ALLOWLIST }), payload);
  });
});

describe('the metadata request of an allowlisted issuer', () => {
  it.each([
    { path: '//169.254.169.254/x', oidc: '//169.254.169.254/x/.well-known/openid-configuration' },
    { path: '/..//169.254.169.254/x', oidc: '//169.254.169.254/x/.well-known/openid-configuration' },
    { path: '/%2F%2F169.254.169.254/x', oidc: '/%2F%2F169.254.169.254/x/.well-known/openid-configuration' },
  ])("stays on the issuer's host whatever its path: $path", async ({ path, oidc }) => {
    // Prepare
    server.answer(issuerScript({}));

    // Act
    const response = await handlerFor({ TOKEN_URL_ALLOWLIST: server.origin })(byIssuer(`${server.origin}${path}`));

    // Assess: nothing publishes there, so 502 after asking this server, and only it.
    expect(response.statusCode).toBe(502);
    expect(server.received[0]?.url).toBe(oidc);
    expect(jail.attempts.every((attempt) => attempt.host === '127.0.0.1' && attempt.port === serverPort())).toBe(true);
    expect(jail.refused).toEqual([]);
    expect(jail.lookups).toEqual([]);
  });

  it("is refused at connect time when the address connected to is not the permit's, before a byte is sent", async () => {
    // Prepare: the permit says yes to the policy's look at the URL, then no to the connection, as a
    // name that resolved elsewhere by the time of connecting would get.
    let answers = 0;
    const config = withPermit(loadConfig({ TOKEN_URL_ALLOWLIST: server.origin }), 'yes-then-no', () => ++answers === 1);
    const connectionsBefore = server.connections;

    // Act
    const response = await createHandler(config, observed)(byIssuer(`${server.origin}/realms/payments`));

    // Assess
    expect(response.statusCode).toBe(403);
    expect(errorBody(response)).toEqual({ code: 'token_url_not_allowed', description: 'issuer points to an address that is not allowed' });
    expect(server.connections).toBe(connectionsBefore);
    expect(server.received).toEqual([]);
    expect(observed.records[0]).toMatchObject({ metadata_error: 'address_not_allowed' });
  });
});

describe('the token endpoint an allowlisted issuer names', () => {
  it("is refused at connect time, naming the issuer's token_endpoint, when the address connected to is not the permit's", async () => {
    // Prepare: the endpoint on a server of its own (so on a connection of its own), and a permit
    // that says yes until the metadata has been served, then yes to the policy's look at the
    // endpoint and no to the connection, as a name that resolved elsewhere by then would get.
    const endpointServer = await startTokenServer();
    const issuer = `${server.origin}/realms/payments`;
    server.answer(
      issuerScript({ [wellKnownPaths('/realms/payments').oidc]: json(200, metadataDocument(issuer, `${endpointServer.origin}/token`)) }),
    );
    let afterMetadata = 0;
    const config = withPermit(
      loadConfig({ TOKEN_URL_ALLOWLIST: `${server.origin},${endpointServer.origin}` }),
      'yes-then-no-for-the-endpoint',
      () => server.received.length === 0 || ++afterMetadata === 1,
    );

    // Act
    const response = await createHandler(config, observed)(byIssuer(issuer));
    await endpointServer.close();

    // Assess
    expect(response.statusCode).toBe(403);
    expect(errorBody(response)).toEqual({
      code: 'token_url_not_allowed',
      description: "the issuer's token_endpoint points to an address that is not allowed",
    });
    expect(endpointServer.connections).toBe(0);
    expect(observed.records[0]).toMatchObject({ outcome: 'token_url_not_allowed', idp_error: 'address_not_allowed' });
  });
});

describe('a token endpoint the metadata names outside the allowlist', () => {
  it.each([
    ['a loopback port of the traps', 'http://127.0.0.1:{trap}/token'],
    ['the IPv6 loopback', 'http://[::1]:{trap}/token'],
    ['localhost', 'http://localhost:{trap}/token'],
    ['the EC2 metadata address', 'http://169.254.169.254/latest/meta-data/iam/security-credentials/'],
    ['the EC2 metadata address over https', 'https://169.254.169.254/latest/meta-data/'],
    ['the ECS credentials address', 'http://169.254.170.2/v2/credentials/'],
    ['the Lambda runtime API', 'http://127.0.0.1:9001/2018-06-01/runtime/invocation/next'],
  ])('is refused with 403 when it is %s, and nothing but the metadata request leaves', async (_case, endpoint) => {
    // Prepare
    const issuer = `${server.origin}/realms/payments`;
    const url = endpoint.replace('{trap}', String(trap.port));
    server.answer(issuerScript({ [wellKnownPaths('/realms/payments').oidc]: json(200, metadataDocument(issuer, url)) }));

    // Act
    const response = await handlerFor({ TOKEN_URL_ALLOWLIST: server.origin })(byIssuer(issuer));

    // Assess
    expect(response.statusCode).toBe(403);
    expect(errorBody(response)).toEqual({
      code: 'token_url_not_allowed',
      description: "the issuer's token_endpoint is not in the allowlist",
    });
    expect(requestLines(server.received)).toEqual(['GET /realms/payments/.well-known/openid-configuration']);
    expect(jail.attempts).toEqual([{ host: '127.0.0.1', port: serverPort(), allowed: true }]);
    expect(jail.lookups).toEqual([]);
    expect(trap.accepted).toEqual([]);
  });
});
