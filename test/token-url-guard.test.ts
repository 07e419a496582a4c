import dns from 'node:dns';
import * as http from 'node:http';
import * as https from 'node:https';
import * as net from 'node:net';
import * as tls from 'node:tls';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { loadConfig } from '../lambda/config';
import { AddressNotAllowedError, agentFor, destroyAgents } from '../lambda/upstream/guarded-agents';
import { createHandler, type TokenHandler } from '../lambda/handler';
import type { Observability, RequestRecord } from '../lambda/observability';
import { type AddressPermit, checkTokenUrl, parseAllowlist } from '../lambda/policy/token-url-policy';
import {
  allowlistLookalikePayloads,
  atPort,
  dnsOnlyNames,
  type Payload,
  PORT,
  REFUSED,
  refusedEverywherePayloads,
} from './support/ssrf-payloads';
import { DEMO_TOKEN, startTokenServer, type TokenServer } from './support/token-server';
import { isJailLoopback, lockNetwork, type NetworkJail, startTrapListeners, type TrapListeners } from './support/trap-listeners';

// The permit of any public token URL outside an allowlist: public unicast addresses only.
const PUBLIC_ONLY = checkTokenUrl('https://idp.example.com/token', []).permit;

const SECRET = 'guard-test-client-secret';
const STANDARD_ALLOWLIST = 'https://login.example.com,https://*.auth0.com';

function tokenEvent(accessTokenUrl: string): APIGatewayProxyEventV2 {
  return {
    version: '2.0',
    routeKey: 'POST /v1/oauth/token',
    rawPath: '/v1/oauth/token',
    rawQueryString: '',
    headers: { 'content-type': 'application/json' },
    isBase64Encoded: false,
    body: JSON.stringify({ client_id: 'guard-test-client', client_secret: SECRET, access_token_url: accessTokenUrl }),
    requestContext: {
      accountId: 'test',
      apiId: 'test',
      domainName: 'localhost',
      domainPrefix: 'localhost',
      http: { method: 'POST', path: '/v1/oauth/token', protocol: 'HTTP/1.1', sourceIp: '127.0.0.1', userAgent: 'jest' },
      requestId: 'guard-test',
      routeKey: 'POST /v1/oauth/token',
      stage: '$default',
      time: '01/Jan/2026:00:00:00 +0000',
      timeEpoch: 0,
    },
  };
}

const records: RequestRecord[] = [];
const recordingObservability: Observability = { record: (entry) => records.push(entry) };
const handlerFor = (env: Record<string, string>): TokenHandler => createHandler(loadConfig(env), recordingObservability);

function errorBody(response: APIGatewayProxyStructuredResultV2): { code: string; description: string } {
  return JSON.parse(String(response.body)) as { code: string; description: string };
}

let trap: TrapListeners;
let jail: NetworkJail;
let acceptedAtStart = 0;
/** Connections the shared traps accepted during the current test. */
const trapHits = () => trap.accepted.slice(acceptedAtStart);

beforeAll(async () => {
  trap = await startTrapListeners();
  jail = lockNetwork();
});

afterAll(async () => {
  destroyAgents();
  jail.release();
  await trap.close();
});

beforeEach(() => {
  jail.reset();
  acceptedAtStart = trap.accepted.length;
  records.length = 0;
});

/**
 * Run one payload through a handler and check it was refused by the payload's rule, with no
 * socket, no DNS and no trap hit.
 */
async function expectRefusedBeforeAnySocket(handler: TokenHandler, payload: Payload): Promise<void> {
  // Prepare
  const url = atPort(payload.url, trap.port);

  // Act
  const response = await handler(tokenEvent(url));

  // Assess
  const { status, code, description } = payload.refusedBy;
  expect({
    status: response.statusCode,
    body: errorBody(response),
    refused: jail.refused,
    attempts: jail.attempts,
    lookups: jail.lookups,
  }).toEqual({
    status,
    body: { code, description },
    refused: [],
    attempts: [],
    lookups: [],
  });
  expect(jail.socketsCreated()).toBe(0);
  expect(trapHits()).toEqual([]);
  expect(response.body).not.toContain(SECRET);
  expect(records.map((record) => record.outcome)).toEqual([code]);
  expect(JSON.stringify(records)).not.toContain(SECRET);
}

// Test titles show the URL, cut short where it is long.
const titled = (payloads: Payload[]) =>
  payloads.map((payload) => ({ ...payload, shown: payload.url.length > 100 ? `${payload.url.slice(0, 60)}...` : payload.url }));
const refusedEverywhere = titled(refusedEverywherePayloads(PORT));

describe('the token URL guard with no allowlist (any public https URL)', () => {
  const handler = handlerFor({});

  it.each(refusedEverywhere)('refuses $name before any socket or DNS query: $shown', async (payload) => {
    await expectRefusedBeforeAnySocket(handler, payload);
  });

  it.each(dnsOnlyNames())('hands $name to the guarded resolver and never connects while it resolves nowhere', async ({ url }) => {
    // Prepare
    const hostname = new URL(url).hostname;

    // Act
    const response = await handler(tokenEvent(url));

    // Assess: the locked network answers every name ENOTFOUND, so the only honest result is 502.
    expect(response.statusCode).toBe(502);
    expect(errorBody(response)).toEqual({
      code: 'upstream_error',
      description: 'The identity provider could not be reached or gave an unusable answer',
    });
    expect(jail.lookups).toEqual([hostname]);
    expect(jail.refused).toEqual([]);
    expect(jail.attempts.every((attempt) => net.isIP(attempt.host) === 0)).toBe(true);
    expect(trapHits()).toEqual([]);
    expect(records.at(-1)).toMatchObject({ outcome: 'upstream_error', idp_error: 'dns' });
  });
});

describe('an allowlisted private address the network has no route to', () => {
  it('answers 502 and logs the IdP as unreachable: the jail refuses the connection before a packet leaves', async () => {
    // Prepare: an entry naming a private address literally lets the policy and the guard through.
    const handler = handlerFor({ TOKEN_URL_ALLOWLIST: 'http://10.255.255.1' });

    // Act
    const response = await handler(tokenEvent('http://10.255.255.1/token'));

    // Assess
    expect(response.statusCode).toBe(502);
    expect(jail.refused.map((attempt) => attempt.host)).toEqual(['10.255.255.1']);
    expect(records.at(-1)).toMatchObject({ outcome: 'upstream_error', idp_error: 'unreachable' });
  });
});

// The payloads above need no second run under an allowlist: none can match one, and the rule that
// refuses a URL outside it is shown by the look-alikes.
describe('the token URL guard with an allowlist of https://login.example.com and https://*.auth0.com', () => {
  const handler = handlerFor({ TOKEN_URL_ALLOWLIST: STANDARD_ALLOWLIST });

  it.each(titled(allowlistLookalikePayloads(PORT)))('refuses $name before any socket or DNS query: $shown', async (payload) => {
    await expectRefusedBeforeAnySocket(handler, payload);
  });
});

describe('an allowlist entry naming a loopback address literally', () => {
  it('lets a request to exactly that origin reach it (the traps count)', async () => {
    // Prepare
    const handler = handlerFor({ TOKEN_URL_ALLOWLIST: `http://127.0.0.1:${trap.port}` });

    // Act
    const response = await handler(tokenEvent(`http://127.0.0.1:${trap.port}/oauth/token`));

    // Assess: the trap hangs up at once, so the exchange fails upstream, after connecting.
    expect(response.statusCode).toBe(502);
    expect(trapHits().map((connection) => connection.localAddress)).toEqual(['127.0.0.1']);
    expect(jail.attempts).toEqual([{ host: '127.0.0.1', port: trap.port, allowed: true }]);
  });

  it.each<Payload>([
    { name: 'the IPv6 loopback', url: `http://[::1]:${PORT}/oauth/token`, refusedBy: REFUSED.notListed },
    { name: 'localhost', url: `http://localhost:${PORT}/oauth/token`, refusedBy: REFUSED.notListed },
    { name: 'a subdomain of localhost', url: `http://idp.localhost:${PORT}/oauth/token`, refusedBy: REFUSED.notListed },
    { name: 'another loopback address', url: `http://127.0.0.2:${PORT}/oauth/token`, refusedBy: REFUSED.notListed },
    { name: 'the same address over https', url: `https://127.0.0.1:${PORT}/oauth/token`, refusedBy: REFUSED.notListed },
    { name: 'the same address on the default port', url: 'http://127.0.0.1/oauth/token', refusedBy: REFUSED.notListed },
    {
      name: 'the Lambda runtime API port',
      url: 'http://127.0.0.1:9001/2018-06-01/runtime/invocation/next',
      refusedBy: REFUSED.notListed,
    },
    { name: 'a metadata address', url: `http://169.254.169.254:${PORT}/latest/meta-data/`, refusedBy: REFUSED.notListed },
  ])('refuses $name as not in the allowlist', async (payload) => {
    await expectRefusedBeforeAnySocket(handlerFor({ TOKEN_URL_ALLOWLIST: `http://127.0.0.1:${trap.port}` }), payload);
  });

  it('refuses another port of the same address', async () => {
    // Prepare: a port next to the trap's, which no entry names.
    const otherPort = trap.port === 65535 ? trap.port - 1 : trap.port + 1;
    const handler = handlerFor({ TOKEN_URL_ALLOWLIST: `http://127.0.0.1:${trap.port}` });

    // Act
    const response = await handler(tokenEvent(`http://127.0.0.1:${otherPort}/oauth/token`));

    // Assess
    expect(response.statusCode).toBe(403);
    expect(errorBody(response)).toEqual({ code: REFUSED.notListed.code, description: REFUSED.notListed.description });
    expect(jail.attempts).toEqual([]);
  });
});

describe('the request path of an allowlisted URL', () => {
  let server: TokenServer;
  let handler: TokenHandler;

  beforeAll(async () => {
    server = await startTokenServer();
    handler = handlerFor({ TOKEN_URL_ALLOWLIST: server.origin });
  });

  afterAll(async () => {
    destroyAgents();
    await server.close();
  });

  // A fresh connection each time, so the jail sees where it goes.
  beforeEach(() => destroyAgents());

  it.each([
    { path: '//169.254.169.254/x', sent: '//169.254.169.254/x' },
    { path: '/..//169.254.169.254/x', sent: '//169.254.169.254/x' },
    { path: '///169.254.169.254/latest/meta-data/', sent: '///169.254.169.254/latest/meta-data/' },
    { path: '/%2F%2F169.254.169.254/x', sent: '/%2F%2F169.254.169.254/x' },
    { path: '/token?next=http://169.254.169.254/', sent: '/token?next=http://169.254.169.254/' },
  ])('cannot move the request off the allowlisted host: $path', async ({ path, sent }) => {
    // Prepare
    const port = Number(new URL(server.origin).port);

    // Act
    const response = await handler(tokenEvent(`${server.origin}${path}`));

    // Assess
    expect(response.statusCode).toBe(200);
    expect(JSON.parse(String(response.body))).toEqual(DEMO_TOKEN);
    expect(server.received.at(-1)?.url).toBe(sent);
    expect(jail.attempts).toEqual([{ host: '127.0.0.1', port, allowed: true }]);
    expect(jail.refused).toEqual([]);
    expect(jail.lookups).toEqual([]);
  });
});

type LookupAnswer = { address: string; family: 4 | 6 };
type LookupCallback = (err: NodeJS.ErrnoException | null, address?: string | LookupAnswer[], family?: number) => void;

/** A resolver that answers from a script, one answer set per call (the last one repeats). */
function scriptedLookup(...answers: LookupAnswer[][]): {
  lookup: (host: string, options: unknown, callback: LookupCallback) => void;
  calls: string[];
} {
  const calls: string[] = [];
  const lookup = (host: string, options: unknown, callback: LookupCallback): void => {
    const answer = answers[Math.min(calls.length, answers.length - 1)] ?? [];
    calls.push(host);
    const all = typeof options === 'object' && options !== null && (options as { all?: boolean }).all === true;
    process.nextTick(() => (all ? callback(null, answer) : callback(null, answer[0]?.address ?? '', answer[0]?.family ?? 4)));
  };
  return { lookup, calls };
}

const v4 = (address: string): LookupAnswer => ({ address, family: 4 });
const v6 = (address: string): LookupAnswer => ({ address, family: 6 });

/** POST through a guarded agent and report the response status or the request's error. */
function postThrough(
  protocol: 'http:' | 'https:',
  agent: http.Agent,
  options: http.RequestOptions,
): Promise<{ status?: number; error?: NodeJS.ErrnoException }> {
  return new Promise((resolve) => {
    const request = (protocol === 'https:' ? https.request : http.request)(
      { method: 'POST', path: '/oauth/token', agent, ...options },
      (response) => {
        response.resume();
        resolve({ status: response.statusCode });
      },
    );
    request.on('error', (error: NodeJS.ErrnoException) => resolve({ error }));
    request.setTimeout(5000, () => request.destroy(new Error('no answer in 5 s')));
    request.end('grant_type=client_credentials');
  });
}

describe('the guarded agents (connect-time enforcement)', () => {
  it.each([
    { protocol: 'http:', host: '169.254.169.254' },
    { protocol: 'https:', host: '169.254.169.254' },
    { protocol: 'https:', host: '10.0.0.1' },
    { protocol: 'https:', host: 'fd00:ec2::254' },
    { protocol: 'https:', host: '::ffff:169.254.169.254' },
    { protocol: 'http:', host: '127.0.0.1' },
    { protocol: 'https:', host: '::1' },
    { protocol: 'https:', host: '::ffff:7f00:1' },
    { protocol: 'https:', host: '::7f00:1' },
  ] as const)('refuses the IP literal $host over $protocol before a socket exists', async ({ protocol, host }) => {
    // Act
    const result = await postThrough(protocol, agentFor(protocol, PUBLIC_ONLY), { host, port: trap.port });

    // Assess: an error that says what was refused, by name and code as Node's own errors do
    expect(result.error).toBeInstanceOf(AddressNotAllowedError);
    expect(result.error).toMatchObject({
      name: 'AddressNotAllowedError',
      code: 'ERR_ADDRESS_NOT_ALLOWED',
      message: `${host} is not an allowed address`,
    });
    expect(jail.attempts).toEqual([]);
    expect(jail.socketsCreated()).toBe(0);
    expect(trapHits()).toEqual([]);
  });

  it('throws the refusal when called without a callback, as createConnection callers other than the Agent do', () => {
    const agent = agentFor('https:', PUBLIC_ONLY) as unknown as { createConnection(options: object): unknown };

    expect(() => agent.createConnection({ host: '127.0.0.1', port: trap.port })).toThrow(AddressNotAllowedError);
    expect(jail.socketsCreated()).toBe(0);
  });

  it.each([
    { name: 'a loopback address', answers: [v4('127.0.0.1')] },
    { name: 'another loopback address', answers: [v4('127.0.0.2')] },
    { name: 'the IPv6 loopback', answers: [v6('::1')] },
    { name: 'an IPv4-mapped loopback', answers: [v6('::ffff:127.0.0.1')] },
    { name: 'an IPv4-compatible loopback (deprecated ::/96)', answers: [v6('::7f00:1')] },
    { name: 'a NAT64 loopback', answers: [v6('64:ff9b::7f00:1')] },
    { name: 'the metadata address', answers: [v4('169.254.169.254')] },
    { name: 'the IPv6 metadata address', answers: [v6('fd00:ec2::254')] },
    { name: 'a private address', answers: [v4('10.0.0.1')] },
    { name: 'the unspecified address', answers: [v4('0.0.0.0')] },
    { name: 'a public address with a loopback one', answers: [v4('93.184.215.14'), v4('127.0.0.1')] },
    { name: 'a loopback address before a public one', answers: [v4('127.0.0.1'), v4('93.184.215.14')] },
    { name: 'a public address with the metadata one', answers: [v4('8.8.8.8'), v4('169.254.169.254')] },
    { name: 'a public IPv6 address with a unique-local one', answers: [v6('2606:4700:4700::1111'), v6('fd00:ec2::254')] },
    { name: 'no address at all', answers: [] },
  ])('refuses a name that resolves to $name, connecting nowhere', async ({ answers }) => {
    // Prepare
    const resolver = scriptedLookup(answers);

    // Act
    const result = await postThrough('http:', agentFor('http:', PUBLIC_ONLY), {
      host: 'metadata.google.internal',
      port: trap.port,
      lookup: resolver.lookup as never,
    });

    // Assess
    expect(resolver.calls).toEqual(['metadata.google.internal']);
    expect(result.error).toBeInstanceOf(AddressNotAllowedError);
    expect(jail.refused).toEqual([]);
    expect(trapHits()).toEqual([]);
  });

  it('lets a name resolving to the literally allowlisted address through (the control for the refusals above)', async () => {
    // Prepare
    const [entry] = parseAllowlist(`http://127.0.0.1:${trap.port}`);
    const resolver = scriptedLookup([v4('127.0.0.1')]);

    // Act
    const result = await postThrough('http:', agentFor('http:', entry?.permit as AddressPermit), {
      host: 'idp.test',
      port: trap.port,
      lookup: resolver.lookup as never,
    });

    // Assess: the trap accepted and hung up.
    expect(result.error?.code).toBe('ECONNRESET');
    expect(trapHits()).toHaveLength(1);
  });
});

describe('DNS rebinding against the guarded agents', () => {
  let rebindTrap: TrapListeners;
  let rebindAcceptedAtStart = 0;
  const rebindTrapHits = () => rebindTrap.accepted.slice(rebindAcceptedAtStart).map((connection) => connection.localAddress);

  beforeAll(async () => {
    rebindTrap = await startTrapListeners({ hosts: ['127.0.0.1', '127.0.0.2', '::1'] });
  });

  beforeEach(() => {
    rebindAcceptedAtStart = rebindTrap.accepted.length;
  });

  afterAll(async () => {
    destroyAgents();
    await rebindTrap.close();
  });

  it('cannot turn an allowed answer into another address on a later resolution', async () => {
    // Prepare: an operator allowlisted one internal address; the name's answers change every time.
    const [entry] = parseAllowlist(`http://127.0.0.1:${rebindTrap.port}`);
    const agent = agentFor('http:', entry?.permit as AddressPermit);
    const resolver = scriptedLookup(
      [v4('127.0.0.1')],
      [v4('127.0.0.2')],
      [v6('::1')],
      [v4('127.0.0.1'), v4('127.0.0.2')],
      [v6('::ffff:127.0.0.2')],
      [v4('169.254.169.254')],
    );
    const post = () => postThrough('http:', agent, { host: 'rebind.test', port: rebindTrap.port, lookup: resolver.lookup as never });

    // Act
    const results = [];
    for (let i = 0; i < 6; i++) results.push(await post());

    // Assess
    expect(resolver.calls).toHaveLength(6);
    expect(results[0]?.error?.code).toBe('ECONNRESET');
    for (const later of results.slice(1)) expect(later.error).toBeInstanceOf(AddressNotAllowedError);
    expect(rebindTrapHits()).toEqual(['127.0.0.1']);
    expect(jail.refused).toEqual([]);
  });

  it('cannot slip a later answer in under a public-only permit', async () => {
    // Prepare: every answer set holds an internal address; only the set's order and mix change.
    const agent = agentFor('https:', PUBLIC_ONLY);
    const resolver = scriptedLookup(
      [v4('93.184.215.14'), v4('127.0.0.1')],
      [v4('127.0.0.1')],
      [v6('2606:4700:4700::1111'), v6('::1')],
      [v6('::ffff:127.0.0.2')],
    );

    // Act
    const results = [];
    for (let i = 0; i < 4; i++) {
      results.push(await postThrough('https:', agent, { host: 'rebind.test', port: rebindTrap.port, lookup: resolver.lookup as never }));
    }

    // Assess
    for (const result of results) expect(result.error).toBeInstanceOf(AddressNotAllowedError);
    expect(rebindTrapHits()).toEqual([]);
    expect(jail.refused).toEqual([]);
  });
});

describe('the connected-address check', () => {
  let holdingTrap: TrapListeners;

  beforeAll(async () => {
    holdingTrap = await startTrapListeners({ hosts: ['127.0.0.1'], hold: true });
  });

  afterAll(async () => {
    destroyAgents();
    await holdingTrap.close();
  });

  // The check on 'connect' is the last line behind the lookup check, so reaching it takes a permit
  // whose answer changes after the first question: as if the address connected to were not the one
  // that was resolved and allowed.
  let permits = 0;
  const allowsOnlyOnce = (): AddressPermit => {
    let asked = 0;
    return { key: `allows-once-${++permits}`, allows: () => asked++ === 0 };
  };

  it.each(['http:', 'https:'] as const)('closes a %s connection to a refused address before sending a byte', async (protocol) => {
    // Prepare
    const acceptedBefore = holdingTrap.accepted.length;

    // Act
    const result = await postThrough(protocol, agentFor(protocol, allowsOnlyOnce()), { host: '127.0.0.1', port: holdingTrap.port });
    await holdingTrap.settled();

    // Assess: the connection was made (so the check ran on it) and nothing was written to it.
    expect(result.error).toBeInstanceOf(AddressNotAllowedError);
    expect((result.error as Error).message).toBe('connected to 127.0.0.1, which is not allowed');
    expect(holdingTrap.accepted.length).toBe(acceptedBefore + 1);
    expect(holdingTrap.accepted.at(-1)?.bytes).toBe(0);
  });
});

describe('the network jail these tests rely on', () => {
  it('is installed where both net.connect and tls.connect go', () => {
    // Assess
    expect(jest.isMockFunction(net.Socket.prototype.connect)).toBe(true);
    expect(tls.TLSSocket.prototype.connect).toBe(net.Socket.prototype.connect);
    expect(jest.isMockFunction(dns.lookup)).toBe(true);
  });

  it.each([
    ['127.0.0.1', true],
    ['127.255.255.254', true],
    ['::1', true],
    ['::ffff:127.0.0.1', true],
    ['::ffff:7f00:1', true],
    ['0.0.0.0', false],
    ['::', false],
    ['::7f00:1', false],
    ['169.254.169.254', false],
    ['10.0.0.1', false],
    ['::ffff:a9fe:a9fe', false],
    ['localhost', false],
  ])('counts %s as loopback: %s', (address, loopback) => {
    expect(isJailLoopback(address)).toBe(loopback);
  });
});
