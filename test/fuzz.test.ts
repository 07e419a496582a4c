import { randomBytes } from 'node:crypto';
import * as net from 'node:net';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import fc from 'fast-check';
import { loadConfig } from '../lambda/config';
import { destroyAgents } from '../lambda/upstream/guarded-agents';
import { createHandler, type TokenHandler } from '../lambda/handler';
import type { Observability } from '../lambda/observability';
import { CONTRACT_ERROR_STATUS, CONTRACT_REQUEST_FIELDS } from './support/contract';
import { capturingOutput } from './support/captured-output';
import { tokenEvent } from './support/events';
import { atPort, REFUSED, refusedEverywherePayloads } from './support/ssrf-payloads';
import { DEMO_TOKEN, startTokenServer, type TokenServer } from './support/token-server';
import { lockNetwork, type NetworkJail, startTrapListeners, type TrapListeners } from './support/trap-listeners';

// Fixed so a run can be repeated; FUZZ_SEED explores others. fast-check prints the seed and the
// shrunk counterexample of any failure.
const SEED = Number(process.env.FUZZ_SEED ?? 3_1415_9265);
const HANDLER_DEADLINE_MS = 5000;

// Recognisable and fresh per run, so any copy of it in an answer or a log line is a leak.
const SECRET = `fuzz-secret-${randomBytes(16).toString('hex')}`;
// Every field the parser reads: a field added there needs a generator here before this compiles.
const CONTRACT_FIELDS = CONTRACT_REQUEST_FIELDS;
// Each only fits some authentication methods, so a body holds each of these one time in five and
// the others five times in six: otherwise nearly every body would be a 400 and no other answer seen.
const OCCASIONAL_FIELDS: readonly string[] = [
  'issuer',
  'client_assertion',
  'client_assertion_type',
  'resource',
  'basic_credentials_encoding',
  'credential',
];
const PROTOTYPE_KEYS = ['__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf'] as const;
const STATUS_BY_CODE: Record<string, number> = CONTRACT_ERROR_STATUS;

/** A token event with exactly the fuzzed headers, body and base64 flag (which may be a lie). */
function fuzzEvent(
  body: string | undefined,
  headers: Record<string, string>,
  isBase64Encoded: boolean,
  path: string,
): APIGatewayProxyEventV2 {
  return { ...tokenEvent(body, { path, contentType: null }), headers, isBase64Encoded };
}

/** The handler's answer, or a failure if it throws or takes longer than the deadline. */
async function answerWithin(handler: TokenHandler, event: APIGatewayProxyEventV2): Promise<APIGatewayProxyStructuredResultV2> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${HANDLER_DEADLINE_MS} ms`)), HANDLER_DEADLINE_MS);
  });
  try {
    return await Promise.race([handler(event), deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/** Checks every answer must pass: the contract's headers, and a token or a `{code, description}` body. */
function expectContractAnswer(response: APIGatewayProxyStructuredResultV2, statuses: readonly number[]): Record<string, unknown> {
  expect(statuses).toContain(response.statusCode);
  expect(response.headers).toMatchObject({ 'content-type': 'application/json', 'cache-control': 'no-store', pragma: 'no-cache' });
  const body = JSON.parse(String(response.body)) as Record<string, unknown>;
  if (response.statusCode === 200) {
    expect(body).toEqual(DEMO_TOKEN);
  } else {
    expect(Object.keys(body).sort()).toEqual(['code', 'description']);
    expect(typeof body.description).toBe('string');
    expect(STATUS_BY_CODE[String(body.code)]).toBe(response.statusCode);
  }
  expect(String(response.body)).not.toContain(SECRET);
  return body;
}

const anyJson = fc.jsonValue({ maxDepth: 3 });

/** A value for a contract field: usually well-formed, sometimes anything JSON can hold. */
function fieldValue(field: (typeof CONTRACT_FIELDS)[number], tokenUrl: string): fc.Arbitrary<unknown> {
  const good: Record<(typeof CONTRACT_FIELDS)[number], fc.Arbitrary<unknown>> = {
    client_id: fc.oneof(fc.constant('fuzz-client'), fc.string({ minLength: 1, maxLength: 300 })),
    client_secret: fc.constant(SECRET),
    access_token_url: fc.oneof(
      fc.constantFrom(tokenUrl, `${tokenUrl}?tenant=a`, tokenUrl.replace('/token', '/')),
      fc.webUrl({ validSchemes: ['http', 'https'] }),
      fc.string(),
    ),
    // Never this server's origin: an issuer it could answer for is the discovery tests' business.
    issuer: fc.oneof(fc.constantFrom('https://login.example.com/', 'http://169.254.169.254/'), fc.webUrl(), fc.string()),
    grant_type: fc.oneof(fc.constantFrom('client_credentials', 'urn:ietf:params:oauth:grant-type:jwt-bearer'), fc.string()),
    scope: fc.oneof(fc.constantFrom('read', 'read write'), fc.string(), fc.array(fc.string(), { maxLength: 4 })),
    audience: fc.oneof(fc.constant('https://api.example.com'), fc.string()),
    token_endpoint_auth_method: fc.oneof(
      fc.constantFrom('client_secret_basic', 'client_secret_post', 'client_secret_jwt', 'private_key_jwt'),
      fc.string(),
    ),
    // Shaped like a JWT (three base64url parts) or not; the scripted IdP accepts any.
    client_assertion: fc.oneof(fc.constant('eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJmdXp6In0.c2lnbmF0dXJl'), fc.string()),
    client_assertion_type: fc.oneof(fc.constant('urn:ietf:params:oauth:client-assertion-type:jwt-bearer'), fc.string()),
    resource: fc.oneof(
      fc.constantFrom('https://api.example.com/', 'urn:example:resource'),
      fc.string(),
      fc.array(fc.oneof(fc.webUrl(), fc.string()), { maxLength: 3 }),
    ),
    basic_credentials_encoding: fc.oneof(fc.constantFrom('form', 'raw'), fc.string()),
    // No credential is stored here: a well-formed name is refused like any other.
    credential: fc.oneof(fc.constantFrom('orders-api', 'a'.repeat(65)), fc.string({ maxLength: 70 })),
  };
  return fc.oneof({ arbitrary: good[field], weight: 4 }, { arbitrary: anyJson, weight: 1 });
}

type Entry = [string, unknown];

/** Key-value pairs in the order they will be written, with prototype keys and pollution attempts mixed in. */
function bodyEntries(tokenUrl: string): fc.Arbitrary<Entry[]> {
  const fields = fc.tuple(
    ...CONTRACT_FIELDS.map((field) => {
      const entry = fieldValue(field, tokenUrl).map((value): Entry => [field, value]);
      return OCCASIONAL_FIELDS.includes(field)
        ? fc.oneof({ arbitrary: fc.constant(undefined), weight: 4 }, { arbitrary: entry, weight: 1 })
        : fc.option(entry, { nil: undefined, freq: 6 });
    }),
  );
  const pollution: fc.Arbitrary<Entry> = fc.oneof(
    fc.constant<Entry>(['__proto__', { polluted: 'yes', client_id: 'from-proto', access_token_url: 'http://169.254.169.254/' }]),
    fc.constant<Entry>(['constructor', { prototype: { polluted: 'yes' } }]),
    fc.tuple(fc.constantFrom(...PROTOTYPE_KEYS), anyJson),
    fc.tuple(fc.string({ maxLength: 12 }), anyJson),
  );
  return fc.tuple(fields, fc.array(pollution, { maxLength: 3 }), fc.boolean()).map(([present, extras, extrasFirst]) => {
    const own = present.filter((entry): entry is Entry => entry !== undefined);
    return extrasFirst ? [...extras, ...own] : [...own, ...extras];
  });
}

// Written by hand so duplicate and `__proto__` keys reach the parser as text.
const asJsonObject = (entries: Entry[]): string =>
  `{${entries.map(([key, value]) => `${JSON.stringify(key)}:${JSON.stringify(value)}`).join(',')}}`;
const asForm = (entries: Entry[]): string =>
  entries
    .map(([key, value]) => `${encodeURIComponent(key)}=${encodeURIComponent(typeof value === 'string' ? value : JSON.stringify(value))}`)
    .join('&');

const JSON_TYPES = ['application/json', 'application/json; charset=utf-8', 'Application/JSON'];
const FORM_TYPES = ['application/x-www-form-urlencoded', 'application/x-www-form-urlencoded; charset=UTF-8'];
const OTHER_TYPES = ['text/plain', 'multipart/form-data; boundary=x', 'application/xml', '', ';', 'application/json-patch+json'];

interface BodyCase {
  body: string | undefined;
  contentType: string | undefined;
}

function bodyCases(tokenUrl: string): fc.Arbitrary<BodyCase> {
  const entries = bodyEntries(tokenUrl);
  const contentType = (choices: string[]) => fc.option(fc.constantFrom(...choices), { nil: undefined, freq: 4 });
  return fc.oneof(
    { weight: 5, arbitrary: fc.record({ body: entries.map(asJsonObject), contentType: contentType(JSON_TYPES) }) },
    { weight: 3, arbitrary: fc.record({ body: entries.map(asForm), contentType: fc.constantFrom(...FORM_TYPES) }) },
    { weight: 1, arbitrary: fc.record({ body: anyJson.map((value) => JSON.stringify(value)), contentType: contentType(JSON_TYPES) }) },
    {
      weight: 1,
      arbitrary: fc.record({
        body: fc.oneof(
          fc.string({ unit: 'binary', maxLength: 200 }),
          fc.string({ unit: fc.constantFrom('a', '=', '&', '%', '+', '_', '2', 'F', '{', '"') }),
        ),
        contentType: fc.option(fc.oneof(fc.constantFrom(...JSON_TYPES, ...FORM_TYPES, ...OTHER_TYPES), fc.string({ maxLength: 40 })), {
          nil: undefined,
        }),
      }),
    },
    {
      weight: 1,
      // Over the 64 KiB limit once decoded, in either encoding.
      arbitrary: fc.record({
        body: fc.integer({ min: 64 * 1024 - 40, max: 64 * 1024 + 200 }).map((size) => asJsonObject([['client_id', 'x'.repeat(size)]])),
        contentType: contentType(JSON_TYPES),
      }),
    },
    { weight: 1, arbitrary: fc.record({ body: fc.constant(undefined), contentType: contentType([...JSON_TYPES, ...FORM_TYPES]) }) },
  );
}

const eventCases = (tokenUrl: string) =>
  fc.record({
    bodyCase: bodyCases(tokenUrl),
    headerName: fc.constantFrom('content-type', 'Content-Type', 'CONTENT-TYPE'),
    // true: base64 as API Gateway sends it; 'lie': flagged base64 but sent raw.
    base64: fc.constantFrom(false, true, 'lie' as const),
    path: fc.constantFrom('/v1/oauth/token', '/oauth/token'),
  });

describe('fuzzing the handler with arbitrary request bodies', () => {
  let server: TokenServer;
  let jail: NetworkJail;

  beforeAll(async () => {
    server = await startTokenServer();
    jail = lockNetwork();
  });

  afterAll(async () => {
    destroyAgents();
    jail.release();
    await server.close();
  });

  it('answers every body with a contract status and shape, never 500, never leaking the secret or polluting prototypes', async () => {
    // Prepare
    const handler = createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: server.origin, UPSTREAM_TIMEOUT_MS: '2000', LOG_LEVEL: 'DEBUG' }));
    const tokenUrl = `${server.origin}/token`;
    const prototypeKeysBefore = Object.getOwnPropertyNames(Object.prototype).sort();
    const statuses = new Map<number, number>();

    // Act
    const { output } = await capturingOutput(() =>
      fc.assert(
        fc.asyncProperty(eventCases(tokenUrl), async ({ bodyCase, headerName, base64, path }) => {
          const headers = bodyCase.contentType === undefined ? {} : { [headerName]: bodyCase.contentType };
          const body =
            base64 === true && bodyCase.body !== undefined ? Buffer.from(bodyCase.body, 'utf8').toString('base64') : bodyCase.body;
          const response = await answerWithin(handler, fuzzEvent(body, headers, base64 !== false, path));
          expectContractAnswer(response, [200, 400, 403, 413]);
          statuses.set(response.statusCode ?? 0, (statuses.get(response.statusCode ?? 0) ?? 0) + 1);
        }),
        { seed: SEED, numRuns: 1000 },
      ),
    );

    // Assess
    expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(prototypeKeysBefore);
    expect((Object.prototype as Record<string, unknown>).polluted).toBeUndefined();
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    // The logs were captured (so the next check means something) and hold no secret.
    expect(output).toContain('token request');
    expect(output).not.toContain(SECRET);
    expect(output).not.toMatch(/basic\s+[a-z0-9+/=]{8,}/i);
    // Every kind of answer was reached, so the bodies were not all refused at the door.
    expect([...statuses.keys()].sort()).toEqual([200, 400, 403, 413]);
    expect(server.received.length).toBe(statuses.get(200));
    expect(jail.refused).toEqual([]);
    const port = Number(new URL(server.origin).port);
    for (const attempt of jail.attempts) expect(attempt).toEqual({ host: '127.0.0.1', port, allowed: true });
  });
});

// IANA special-purpose registries (RFC 6890 and successors): everything not globally reachable,
// plus multicast and the reserved 240/4. Written apart from lambda/policy/address-ranges.ts so the two
// can disagree.
const NOT_PUBLIC = new net.BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  NOT_PUBLIC.addSubnet(network, prefix, 'ipv4');
}
for (const [network, prefix] of [
  ['2001::', 23],
  ['2001:db8::', 32],
  ['2002::', 16],
  ['3fff::', 20],
] as const) {
  NOT_PUBLIC.addSubnet(network, prefix, 'ipv6');
}
const GLOBAL_UNICAST_V6 = new net.BlockList();
GLOBAL_UNICAST_V6.addSubnet('2000::', 3, 'ipv6');

function ipv6Words(address: string): number[] {
  const [head = '', tail = ''] = address.split('::');
  const words = (part: string) => (part === '' ? [] : part.split(':').map((word) => Number.parseInt(word, 16)));
  const left = words(head);
  const right = address.includes('::') ? words(tail) : [];
  return [...left, ...new Array(8 - left.length - right.length).fill(0), ...right];
}

/** Independent oracle: is this an address the service may connect to with no allowlist? */
function isPublicByIana(address: string): boolean {
  const family = net.isIP(address);
  if (family === 4) return !NOT_PUBLIC.check(address, 'ipv4');
  if (family !== 6) return false;
  // Embedded IPv4 forms the guard judges by the IPv4 address they carry: mapped and NAT64 (RFC 6052).
  // The URL parser writes any IPv6 address in one canonical, all-hexadecimal form.
  const canonical = new URL(`http://[${address}]`).hostname.slice(1, -1);
  const words = ipv6Words(canonical);
  const embedded = (high: number, low: number) => `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;
  const isMapped = words.slice(0, 5).every((word) => word === 0) && words[5] === 0xffff;
  const isNat64 = words[0] === 0x64 && words[1] === 0xff9b && words.slice(2, 6).every((word) => word === 0);
  if (isMapped || isNat64) return isPublicByIana(embedded(words[6] ?? 0, words[7] ?? 0));
  return GLOBAL_UNICAST_V6.check(canonical, 'ipv6') && !NOT_PUBLIC.check(canonical, 'ipv6');
}

const ipv4Parts = (n: number): number[] => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255];

/** The ways WHATWG URL parsing accepts to write one IPv4 address as a host. */
const IPV4_SPELLINGS: Array<(n: number) => string> = [
  (n) => ipv4Parts(n).join('.'),
  (n) => String(n),
  (n) => `0x${n.toString(16)}`,
  (n) => `0${n.toString(8)}`,
  (n) =>
    ipv4Parts(n)
      .map((part) => `0${part.toString(8)}`)
      .join('.'),
  (n) =>
    ipv4Parts(n)
      .map((part) => `0x${part.toString(16)}`)
      .join('.'),
  (n) => `${n >>> 24}.${(n >>> 16) & 255}.${n & 0xffff}`,
  (n) => `${n >>> 24}.${n & 0xffffff}`,
  (n) => `${ipv4Parts(n).join('.')}.`,
  (n) => `%3${String(n >>> 24)[0]}${String(n >>> 24).slice(1)}.${ipv4Parts(n).slice(1).join('.')}`,
  (n) => `[::ffff:${ipv4Parts(n).join('.')}]`,
  (n) => `[64:ff9b::${ipv4Parts(n).join('.')}]`,
  (n) => `[::${ipv4Parts(n).join('.')}]`,
];

// Address blocks worth hitting far more often than chance would: [base, prefix length].
const INTERESTING_V4: ReadonlyArray<readonly [number, number]> = [
  [0x7f000000, 8],
  [0x0a000000, 8],
  [0xa9fe0000, 16],
  [0xac100000, 12],
  [0xc0a80000, 16],
  [0x64400000, 10],
  [0x00000000, 8],
  [0xc0000000, 24],
  [0xc6120000, 15],
  [0xe0000000, 4],
  [0xf0000000, 4],
];

// noBias: fast-check otherwise favours small integers, which are all in 0.0.0.0/8.
const ipv4Number = fc.oneof(
  fc.noBias(fc.integer({ min: 0, max: 0xffffffff })),
  fc
    .tuple(fc.constantFrom(...INTERESTING_V4), fc.integer({ min: 0, max: 0xffffffff }))
    .map(([[base, prefix], noise]) => (base | (noise & (prefix === 32 ? 0 : 0xffffffff >>> prefix))) >>> 0),
);

function tokenUrlCases(trapPort: number): fc.Arbitrary<string> {
  const ipv4Host = fc
    .tuple(ipv4Number, fc.integer({ min: 0, max: IPV4_SPELLINGS.length - 1 }))
    .map(([n, spelling]) => IPV4_SPELLINGS[spelling]?.(n) ?? '');
  const ipv6Host = fc
    .oneof(
      fc.ipV6(),
      fc.constantFrom('::1', '::', 'fe80::1', 'fd00:ec2::254', 'ff02::1', '64:ff9b:1::a00:1', '2002:a9fe:a9fe::1', '2001:db8::5'),
    )
    .map((address) => `[${address}]`);
  const host = fc.oneof(
    { arbitrary: ipv4Host, weight: 4 },
    { arbitrary: ipv6Host, weight: 2 },
    { arbitrary: fc.domain(), weight: 2 },
    fc.constantFrom('localhost', 'idp.localhost'),
  );
  const structured = fc
    .tuple(
      fc.constantFrom('https', 'https', 'http', 'HTTPS'),
      fc.constantFrom('://', '://', ':/', ':'),
      fc.oneof({ arbitrary: fc.constant(''), weight: 6 }, fc.constantFrom('user@', 'a:b@')),
      host,
      fc.option(fc.constantFrom(trapPort, 443, 80, 8443), { freq: 2 }),
      fc.constantFrom('', '/', '/oauth/token', '/x?y=1', '/#f'),
    )
    .map(
      ([scheme, separator, userInfo, hostText, port, path]) =>
        `${scheme}${separator}${userInfo}${hostText}${port === null ? '' : `:${port}`}${path}`,
    );
  const payloads = refusedEverywherePayloads(trapPort).map(({ url }) => atPort(url, trapPort));
  return fc.oneof(
    { arbitrary: structured, weight: 6 },
    {
      weight: 2,
      arbitrary: fc.webUrl({
        validSchemes: ['http', 'https'],
        withQueryParameters: true,
        withFragments: true,
        authoritySettings: { withIPv4: true, withIPv6: true, withIPv4Extended: true, withUserInfo: true, withPort: true },
      }),
    },
    { weight: 1, arbitrary: fc.constantFrom(...payloads) },
    { weight: 1, arbitrary: fc.domain().map((name) => `https://${name}/oauth/token`) },
    { weight: 1, arbitrary: fc.string({ maxLength: 60 }) },
  );
}

describe('fuzzing access_token_url with no allowlist', () => {
  let trap: TrapListeners;
  let jail: NetworkJail;

  beforeAll(async () => {
    trap = await startTrapListeners();
    jail = lockNetwork();
  });

  afterAll(async () => {
    destroyAgents();
    jail.release();
    await trap.close();
  });

  /**
   * What a request that got past the policy (a 502: nothing listens) may have done on the network:
   * looked up a name the URL parser would not read as an address, never localhost; or had the jail
   * refuse its connection to a public address. Never a connection the jail let through.
   */
  function expectOnlyPublicReach(seen: Pick<NetworkJail, 'attempts' | 'refused' | 'lookups'>) {
    expect(seen.attempts.filter((attempt) => attempt.allowed && net.isIP(attempt.host) !== 0)).toEqual([]);
    if (seen.lookups.length > 0) {
      expect(seen.refused).toEqual([]);
      for (const name of seen.lookups) {
        expect(net.isIP(name)).toBe(0);
        expect(name).not.toMatch(/(^|\.)localhost$/);
        expect(name.split('.').at(-1)).not.toMatch(/^(0x[0-9a-f]*|\d+)$/i);
      }
      return 'resolvedByName' as const;
    }
    // An address literal went to the jail, which refused it: it must have been public.
    expect(seen.refused.length).toBeGreaterThan(0);
    for (const attempt of seen.refused)
      expect({ host: attempt.host, public: isPublicByIana(attempt.host) }).toEqual({ host: attempt.host, public: true });
    return 'connectedToPublicAddress' as const;
  }

  it('lets a URL reach the network only as a lookup of a name or a connection to a public address', async () => {
    // Prepare
    const quiet: Observability = { record: () => undefined };
    const handler = createHandler(loadConfig({ UPSTREAM_TIMEOUT_MS: '2000' }), quiet);
    const outcomes = { refusedByGuard: 0, resolvedByName: 0, connectedToPublicAddress: 0 };

    // Act, Assess
    await fc.assert(
      fc.asyncProperty(tokenUrlCases(trap.port), async (accessTokenUrl) => {
        jail.reset();
        const body = JSON.stringify({ client_id: 'fuzz-client', client_secret: SECRET, access_token_url: accessTokenUrl });
        const response = await answerWithin(handler, fuzzEvent(body, { 'content-type': 'application/json' }, false, '/v1/oauth/token'));
        const answer = expectContractAnswer(response, [400, 403, 502]);
        const seen = { attempts: [...jail.attempts], refused: [...jail.refused], lookups: [...jail.lookups] };

        if (response.statusCode !== 502) {
          // Refused by one of the policy's rules, with that rule's status, code and text, and
          // nothing was resolved or connected.
          const refusals = Object.values(REFUSED).map(({ status, code, description }) => ({ status, answer: { code, description } }));
          expect(refusals).toContainEqual({ status: response.statusCode, answer });
          expect(seen).toEqual({ attempts: [], refused: [], lookups: [] });
          outcomes.refusedByGuard++;
        } else {
          outcomes[expectOnlyPublicReach(seen)]++;
        }
      }),
      { seed: SEED, numRuns: 3000 },
    );

    // Assess: no trap was reached, and every branch above was exercised.
    expect(trap.accepted).toHaveLength(0);
    expect(outcomes.refusedByGuard).toBeGreaterThan(100);
    expect(outcomes.resolvedByName).toBeGreaterThan(20);
    expect(outcomes.connectedToPublicAddress).toBeGreaterThan(20);
  });

  it('lets an issuer reach the network for its metadata only as a lookup of a name or a connection to a public address', async () => {
    // Prepare
    const quiet: Observability = { record: () => undefined };
    const handler = createHandler(loadConfig({ UPSTREAM_TIMEOUT_MS: '2000' }), quiet);
    const refusals = [
      ...Object.values(REFUSED).map(({ status, code, description }) => ({
        status,
        answer: { code, description: description.replace(/^access_token_url /, 'issuer ') },
      })),
      { status: 400, answer: { code: 'invalid_request', description: 'issuer must not have a query (RFC 8414 2)' } },
    ];
    const outcomes = { refused: 0, resolvedByName: 0, connectedToPublicAddress: 0 };

    // Act, Assess
    await fc.assert(
      fc.asyncProperty(tokenUrlCases(trap.port), async (issuer) => {
        jail.reset();
        const body = JSON.stringify({ client_id: 'fuzz-client', client_secret: SECRET, issuer });
        const response = await answerWithin(handler, fuzzEvent(body, { 'content-type': 'application/json' }, false, '/v1/oauth/token'));
        const answer = expectContractAnswer(response, [400, 403, 502]);
        const seen = { attempts: [...jail.attempts], refused: [...jail.refused], lookups: [...jail.lookups] };

        if (response.statusCode !== 502) {
          expect(refusals).toContainEqual({ status: response.statusCode, answer });
          expect(seen).toEqual({ attempts: [], refused: [], lookups: [] });
          outcomes.refused++;
        } else {
          outcomes[expectOnlyPublicReach(seen)]++;
        }
      }),
      { seed: SEED, numRuns: 1000 },
    );

    // Assess
    expect(trap.accepted).toHaveLength(0);
    expect(outcomes.refused).toBeGreaterThan(30);
    expect(outcomes.resolvedByName).toBeGreaterThan(5);
    expect(outcomes.connectedToPublicAddress).toBeGreaterThan(5);
  });

  it.each([
    ['8.8.8.8', true],
    ['10.1.2.3', false],
    ['::ffff:8.8.8.8', true],
    ['::ffff:a9fe:a9fe', false],
    ['64:ff9b::808:808', true],
    ['64:ff9b::7f00:1', false],
    ['::7f00:1', false],
    ['::2', false],
    ['2606:4700:4700::1111', true],
    ['2001:db8::1', false],
    ['fd00::1', false],
    ['example.com', false],
  ])('has an oracle that calls %s public: %s', (address, expected) => {
    expect(isPublicByIana(address)).toBe(expected);
  });
});
