import { loadConfig } from '../lambda/config';
import { ExchangeError } from '../lambda/errors';
import { destroyAgents } from '../lambda/upstream/guarded-agents';
import { createHandler, type TokenHandler } from '../lambda/handler';
import { addressNotAllowed, type AllowlistEntry, checkTokenUrl, parseAllowlist, type TokenTarget } from '../lambda/policy/token-url-policy';
import { ADDRESS_NOT_ALLOWED_DESCRIPTION } from './support/contract';
import { bodyOf, recordingObservability, tokenEvent } from './support/events';
import { REFUSED, type Refusal } from './support/ssrf-payloads';
import { DEMO_TOKEN, startTokenServer, type TokenServer } from './support/token-server';

// The permit of any public token URL outside an allowlist: public unicast addresses only.
const PUBLIC_ONLY = checkTokenUrl('https://idp.example.com/token', []).permit;

/** The policy's answer for one URL: `accepted`, or the refusal as the caller would see it. */
function decide(url: string, allowlist: string | readonly AllowlistEntry[] = []): 'accepted' | Refusal {
  const entries = typeof allowlist === 'string' ? parseAllowlist(allowlist) : allowlist;
  try {
    checkTokenUrl(url, entries);
    return 'accepted';
  } catch (error) {
    if (!(error instanceof ExchangeError)) throw error;
    return { status: error.statusCode, code: error.code, description: error.description } as Refusal;
  }
}

const accepted = (url: string, allowlist: string | readonly AllowlistEntry[] = []): TokenTarget => {
  try {
    return checkTokenUrl(url, typeof allowlist === 'string' ? parseAllowlist(allowlist) : allowlist);
  } catch (error) {
    throw new Error(`${url} was refused: ${(error as Error).message}`);
  }
};

describe('parseAllowlist', () => {
  it.each([undefined, '', '   ', ',', ' , ,'])('reads %p as no allowlist', (value) => {
    expect(parseAllowlist(value)).toEqual([]);
  });

  it('reads an exact https entry with the default port and the root path', () => {
    // Act
    const [entry, ...rest] = parseAllowlist('https://login.example.com');

    // Assess
    expect(rest).toEqual([]);
    expect(entry).toMatchObject({ protocol: 'https:', host: 'login.example.com', wildcard: false, port: '443', pathPrefix: '/' });
    expect(entry?.permit).toBe(PUBLIC_ONLY);
  });

  it('reads a wildcard entry as the domain after *. with a public-only permit', () => {
    // Act
    const [entry] = parseAllowlist('https://*.auth0.com');

    // Assess
    expect(entry).toMatchObject({ protocol: 'https:', host: 'auth0.com', wildcard: true, port: '443', pathPrefix: '/' });
    expect(entry?.permit).toBe(PUBLIC_ONLY);
  });

  it('reads an entry as a wildcard only when *. leads its host, not when it appears in its path', () => {
    const [entry] = parseAllowlist('https://idp.example.com/tenants/https://*.example.net');

    expect(entry).toMatchObject({ host: 'idp.example.com', wildcard: false, pathPrefix: '/tenants/https://*.example.net' });
  });

  it('reads several entries, trimming blanks, lower-casing scheme and host but keeping the path', () => {
    // Act
    const entries = parseAllowlist(' HTTPS://LOGIN.Example.COM/OAuth2/ ,, http://127.0.0.1:8080 ,https://*.a-b.example:8443/x');

    // Assess
    expect(entries.map(({ protocol, host, wildcard, port, pathPrefix }) => ({ protocol, host, wildcard, port, pathPrefix }))).toEqual([
      { protocol: 'https:', host: 'login.example.com', wildcard: false, port: '443', pathPrefix: '/OAuth2/' },
      { protocol: 'http:', host: '127.0.0.1', wildcard: false, port: '8080', pathPrefix: '/' },
      { protocol: 'https:', host: 'a-b.example', wildcard: true, port: '8443', pathPrefix: '/x' },
    ]);
  });

  it.each([
    ['http://example.com', '80'],
    ['http://example.com:80', '80'],
    ['https://example.com:443', '443'],
    ['https://example.com:8443', '8443'],
    ['http://example.com:443', '443'],
  ])('gives %s the port %s', (text, port) => {
    expect(parseAllowlist(text)[0]?.port).toBe(port);
  });

  it.each([
    ['https://[::1]:8443', '::1'],
    ['https://[0:0:0:0:0:0:0:1]:8443', '::1'],
    ['https://[2606:4700:4700:0:0:0:0:1111]', '2606:4700:4700::1111'],
  ])('reads the IPv6 literal entry %s as host %s without brackets', (text, host) => {
    expect(parseAllowlist(text)[0]?.host).toBe(host);
  });
});

describe('checkTokenUrl with a wildcard entry', () => {
  const allowlist = 'https://*.auth0.com';

  it.each([
    'https://tenant.auth0.com/oauth/token',
    'https://tenant.eu.auth0.com/oauth/token',
    'https://a.b.c.auth0.com/',
    'https://TENANT.Auth0.COM/x',
  ])('admits %s (one or more labels before the domain)', (url) => {
    const target = accepted(url, allowlist);
    expect(target.url.hostname.endsWith('.auth0.com')).toBe(true);
    expect(target.permit).toBe(PUBLIC_ONLY);
  });

  it.each([
    'https://auth0.com/oauth/token',
    'https://evilauth0.com/oauth/token',
    'https://evil-auth0.com/oauth/token',
    'https://auth0.com.evil.test/oauth/token',
    'https://a.auth0.com.evil.test/oauth/token',
    'https://a.auth0.co/oauth/token',
    'https://a.auth0.com:444/oauth/token',
    'https://a.auth0.com:8443/oauth/token',
    'http://a.auth0.com/oauth/token',
    'http://a.auth0.com:443/oauth/token',
  ])('refuses the look-alike %s as not in the allowlist', (url) => {
    expect(decide(url, allowlist)).toEqual(REFUSED.notListed);
  });

  it('admits the default port written out', () => {
    expect(accepted('https://a.auth0.com:443/oauth/token', allowlist).url.href).toBe('https://a.auth0.com/oauth/token');
  });

  it.each(['https://a.auth0.com./oauth/token', 'https://.auth0.com/oauth/token'])('refuses %s with an empty label as malformed', (url) => {
    expect(decide(url, allowlist)).toEqual(REFUSED.badHost);
  });
});

describe('checkTokenUrl with an http wildcard entry', () => {
  const allowlist = 'http://*.example.com';

  it('reads the entry as an http wildcard on port 80 with a public-only permit', () => {
    // Act
    const [entry] = parseAllowlist(allowlist);

    // Assess
    expect(entry).toMatchObject({ protocol: 'http:', host: 'example.com', wildcard: true, port: '80', pathPrefix: '/' });
    expect(entry?.permit).toBe(PUBLIC_ONLY);
  });

  it('admits a subdomain over http', () => {
    expect(accepted('http://idp.example.com/token', allowlist).permit).toBe(PUBLIC_ONLY);
  });

  it.each(['https://idp.example.com/token', 'http://example.com/token', 'http://10.0.0.5/token'])(
    'refuses %s as not in the allowlist',
    (url) => {
      expect(decide(url, allowlist)).toEqual(REFUSED.notListed);
    },
  );
});

describe('checkTokenUrl with an exact entry and a port', () => {
  it.each([
    ['https://login.example.com:8443/token', 'https://login.example.com:8443', true],
    ['https://login.example.com/token', 'https://login.example.com:8443', false],
    ['https://login.example.com:443/token', 'https://login.example.com', true],
    ['https://login.example.com:8443/token', 'https://login.example.com', false],
    ['http://10.0.0.5/token', 'http://10.0.0.5:80', true],
    ['http://10.0.0.5:80/token', 'http://10.0.0.5', true],
    ['http://10.0.0.5:8080/token', 'http://10.0.0.5', false],
    ['https://10.0.0.5/token', 'http://10.0.0.5:443', false],
    ['https://evil.login.example.com/token', 'https://login.example.com', false],
    ['https://login.example.com.evil.test/token', 'https://login.example.com', false],
  ])('decides %s against %s: admitted %s', (url, allowlist, admitted) => {
    expect(decide(url, allowlist)).toEqual(admitted ? 'accepted' : REFUSED.notListed);
  });
});

describe('checkTokenUrl path prefixes', () => {
  const allowlist = 'https://idp.example.com/oauth2';

  it.each([
    'https://idp.example.com/oauth2',
    'https://idp.example.com/oauth2/',
    'https://idp.example.com/oauth2/token',
    'https://idp.example.com/oauth2/v1/token?tenant=a',
    'https://idp.example.com/oauth2/./token',
    'https://idp.example.com/admin/../oauth2/token',
    'https://idp.example.com/admin/%2e%2e/oauth2/token',
  ])('admits %s', (url) => {
    expect(accepted(url, allowlist).url.pathname.startsWith('/oauth2')).toBe(true);
  });

  it.each([
    'https://idp.example.com/',
    'https://idp.example.com/oauth',
    'https://idp.example.com/oauth2-admin',
    'https://idp.example.com/oauth2admin/token',
    'https://idp.example.com/OAUTH2/token',
    'https://idp.example.com/oauth2/../admin',
    'https://idp.example.com/oauth2/%2e%2e/admin',
    'https://idp.example.com/oauth2/%2E%2E/admin',
    'https://idp.example.com/oauth2/.%2e/admin',
    'https://idp.example.com/oauth2/%2e./admin',
    'https://idp.example.com/oauth2/token/../../admin',
    'https://idp.example.com//oauth2/token',
  ])('refuses %s (outside the prefix once normalised, or not at a segment boundary)', (url) => {
    expect(decide(url, allowlist)).toEqual(REFUSED.notListed);
  });

  it('treats an entry path ending in / as a directory: its own name without the slash is outside', () => {
    expect(decide('https://idp.example.com/oauth2', 'https://idp.example.com/oauth2/')).toEqual(REFUSED.notListed);
    expect(decide('https://idp.example.com/oauth2/token', 'https://idp.example.com/oauth2/')).toBe('accepted');
  });

  it.each([
    'https://idp.example.com/oauth2/..%2fadmin',
    'https://idp.example.com/oauth2/..%2Fadmin',
    'https://idp.example.com/oauth2/..%5cadmin',
  ])('refuses an encoded slash or backslash under a prefix, which a decoding server could resolve outside it: %s', (url) => {
    expect(decide(url, allowlist)).toEqual(REFUSED.notListed);
  });

  it('allows an encoded slash where the entry has no path prefix', () => {
    expect(decide('https://idp.example.com/a%2Fb/token', 'https://idp.example.com')).toBe('accepted');
  });

  it('normalises the entry path too', () => {
    expect(decide('https://idp.example.com/oauth2/token', 'https://idp.example.com/x/../oauth2')).toBe('accepted');
  });
});

describe('checkTokenUrl with IP literal entries', () => {
  it.each([
    ['https://[2606:4700:4700::1111]/token', 'https://[2606:4700:4700:0:0:0:0:1111]', true],
    ['https://[2606:4700:4700:0::1111]/token', 'https://[2606:4700:4700::1111]', true],
    ['https://[2606:4700:4700::1112]/token', 'https://[2606:4700:4700::1111]', false],
    ['http://[::1]:8080/token', 'http://[::1]:8080', true],
    ['http://[0:0:0:0:0:0:0:1]:8080/token', 'http://[::1]:8080', true],
    ['http://127.0.0.1:8080/token', 'http://[::1]:8080', false],
    ['http://[::1]:8080/token', 'http://127.0.0.1:8080', false],
    ['http://localhost:8080/token', 'http://127.0.0.1:8080', false],
    ['http://127.0.0.2:8080/token', 'http://127.0.0.1:8080', false],
    ['http://[::ffff:127.0.0.1]:8080/token', 'http://127.0.0.1:8080', true],
    ['http://[::ffff:7f00:1]:8080/token', 'http://127.0.0.1:8080', true],
    // An address is never compared with a name as if both were addresses.
    ['https://8.8.8.8/token', 'https://dns.example.com', false],
    ['https://[2001:4860:4860::8888]/token', 'https://dns.example.com', false],
  ])('decides %s against %s: admitted %s', (url, allowlist, admitted) => {
    expect(decide(url, allowlist)).toEqual(admitted ? 'accepted' : REFUSED.notListed);
  });

  it('permits only the one address an entry names literally', () => {
    // Act
    const target = accepted('http://10.0.0.5:8080/token', 'http://10.0.0.5:8080');

    // Assess
    expect(['10.0.0.5', '::ffff:10.0.0.5'].map((address) => target.permit.allows(address))).toEqual([true, true]);
    expect(['10.0.0.6', '127.0.0.1', '169.254.169.254', '::1', 'idp.internal'].map((address) => target.permit.allows(address))).toEqual([
      false,
      false,
      false,
      false,
      false,
    ]);
  });

  it('permits the loopback range, and nothing else, for an entry naming localhost', () => {
    // Act
    const target = accepted('http://localhost:3000/token', 'http://localhost:3000');

    // Assess
    expect(['127.0.0.1', '127.0.0.53', '::1', '::ffff:127.0.0.1'].every((address) => target.permit.allows(address))).toBe(true);
    expect(
      ['10.0.0.1', '169.254.169.254', '0.0.0.0', '::', 'fd00::1', '93.184.215.14'].some((address) => target.permit.allows(address)),
    ).toBe(false);
  });

  it('keeps the public-only permit for entries naming a host name or a public address', () => {
    expect(accepted('https://login.example.com/token', 'https://login.example.com').permit).toBe(PUBLIC_ONLY);
    expect(accepted('https://93.184.215.14/token', 'https://93.184.215.14').permit).toBe(PUBLIC_ONLY);
  });

  it('refuses subdomains of localhost under an entry naming localhost', () => {
    expect(decide('http://idp.localhost:3000/token', 'http://localhost:3000')).toEqual(REFUSED.notListed);
  });

  it('refuses *.localhost even when a wildcard entry names it', () => {
    expect(decide('https://idp.dev.localhost/token', 'https://*.dev.localhost')).toEqual(REFUSED.address);
  });
});

describe('checkTokenUrl for an issuer and the endpoint its metadata names', () => {
  it.each([
    ['issuer', 'http://login.example.com/', 'issuer must use https'],
    ['issuer', 'https://169.254.169.254/', 'issuer points to an address that is not allowed'],
    ['issuer', 'https://user@login.example.com/', 'issuer must not contain user-info'],
    ['issuer', 'login.example.com', 'issuer must be an absolute URL'],
    ["the issuer's token_endpoint", 'https://localhost/token', "the issuer's token_endpoint points to an address that is not allowed"],
    ["the issuer's token_endpoint", 'https://a..b/token', "the issuer's token_endpoint must have a valid host name"],
  ] as const)('names %s in its refusal of %s', (field, url, description) => {
    // Act
    let refusal: unknown;
    try {
      checkTokenUrl(url, [], field);
    } catch (error) {
      refusal = (error as ExchangeError).description;
    }

    // Assess
    expect(refusal).toBe(description);
  });

  it("words an address refusal of access_token_url as the exchange's connect-time refusal does", () => {
    expect(addressNotAllowed('access_token_url')).toBe(ADDRESS_NOT_ALLOWED_DESCRIPTION);
  });
});

describe('checkTokenUrl with no allowlist', () => {
  it.each([
    'https://login.example.com/oauth/token',
    'https://tenant.auth0.com/oauth/token?audience=x',
    'https://93.184.215.14/token',
    'https://[2606:4700:4700::1111]/',
  ])('admits the public https URL %s, to be checked again at connect time', (url) => {
    expect(accepted(url).permit).toBe(PUBLIC_ONLY);
  });

  it('keeps the path and query as given', () => {
    expect(accepted('https://login.example.com/oauth/token?tenant=a&x=%20y').url.href).toBe(
      'https://login.example.com/oauth/token?tenant=a&x=%20y',
    );
  });

  it.each([
    ['http://login.example.com/token', REFUSED.notHttps],
    ['file:///etc/passwd', REFUSED.notHttps],
    ['javascript:alert(1)', REFUSED.notHttps],
    ['https://127.0.0.1/token', REFUSED.address],
    ['https://[::ffff:169.254.169.254]/token', REFUSED.address],
    ['https://[::127.0.0.1]/token', REFUSED.address],
    ['https://[::2]/token', REFUSED.address],
    ['https://localhost/token', REFUSED.address],
    ['https://idp.localhost/token', REFUSED.address],
    ['https://user@login.example.com/token', REFUSED.userInfo],
    ['https://@login.example.com/token', REFUSED.userInfo],
    ['https://login.example.com/token#', REFUSED.fragment],
    ['https://login.example.com/token#x', REFUSED.fragment],
    ['login.example.com/token', REFUSED.notAbsolute],
    ['/oauth/token', REFUSED.notAbsolute],
    ['https://[fe80::1%25eth0]/token', REFUSED.notAbsolute],
    ['https://login.example.com\\@127.0.0.1/', REFUSED.notVisibleAscii],
    ['https://login.example.com/to ken', REFUSED.notVisibleAscii],
    ['https://login.example.com/t\u00f6ken', REFUSED.notVisibleAscii],
    ['https://login.example.com./token', REFUSED.badHost],
  ])('refuses %s with the fixed text of the rule that refuses it', (url, refusal) => {
    expect(decide(url)).toEqual(refusal);
  });

  it('takes URLs up to 2048 characters and refuses longer ones as malformed', () => {
    // Prepare
    const base = 'https://login.example.com/';
    const atLimit = base + 'a'.repeat(2048 - base.length);

    // Act, Assess
    expect(decide(atLimit)).toBe('accepted');
    expect(decide(`${atLimit}a`)).toEqual(REFUSED.notVisibleAscii);
  });
});

describe('the policy as the caller sees it, through the handler', () => {
  let server: TokenServer;
  let otherServer: TokenServer;
  let observed: ReturnType<typeof recordingObservability>;
  const handlerFor = (env: Record<string, string>): TokenHandler => createHandler(loadConfig(env), observed);
  const body = (accessTokenUrl: string) => ({
    client_id: 'service-a',
    client_secret: 'policy-test-secret',
    access_token_url: accessTokenUrl,
  });

  beforeAll(async () => {
    server = await startTokenServer();
    // A second loopback address, so two literal entries name two different addresses.
    otherServer = await startTokenServer(undefined, undefined, '127.0.0.2');
  });

  beforeEach(() => {
    server.received.length = 0;
    otherServer.received.length = 0;
    observed = recordingObservability();
  });

  afterAll(async () => {
    destroyAgents();
    await Promise.all([server.close(), otherServer.close()]);
  });

  it.each([
    ['an http URL with no allowlist', {}, 'http://login.example.com/token', REFUSED.notHttps],
    ['a host outside the allowlist', { TOKEN_URL_ALLOWLIST: 'https://login.example.com' }, 'https://evil.example/token', REFUSED.notListed],
    ['a URL with user-info', {}, 'https://user@login.example.com/token', REFUSED.userInfo],
    ['a URL with a fragment', {}, 'https://login.example.com/token#x', REFUSED.fragment],
    ['an internal address', {}, 'https://10.0.0.1/token', REFUSED.address],
  ])('answers %s with the status, code and description of its rule', async (_case, env, url, refusal) => {
    // Act
    const result = await handlerFor(env)(tokenEvent(body(url)));

    // Assess
    expect({ status: result.statusCode, body: bodyOf(result) }).toEqual({
      status: refusal.status,
      body: { code: refusal.code, description: refusal.description },
    });
  });

  it('reaches an allowlisted 127.0.0.1 written as the IPv4-mapped [::ffff:127.0.0.1]', async () => {
    // Prepare
    const port = new URL(server.origin).port;
    const handle = handlerFor({ TOKEN_URL_ALLOWLIST: `http://127.0.0.1:${port}` });

    // Act
    const result = await handle(tokenEvent(body(`http://[::ffff:127.0.0.1]:${port}/token`)));

    // Assess
    expect(result.statusCode).toBe(200);
    expect(bodyOf(result)).toEqual(DEMO_TOKEN);
    expect(server.received.map((received) => received.url)).toEqual(['/token']);
  });

  it('lets each of two literal-address entries reach its own address', async () => {
    // Prepare
    const handle = handlerFor({ TOKEN_URL_ALLOWLIST: `${server.origin},${otherServer.origin}` });

    // Act
    const first = await handle(tokenEvent(body(`${server.origin}/token`)));
    const second = await handle(tokenEvent(body(`${otherServer.origin}/token`)));

    // Assess
    expect([first.statusCode, second.statusCode]).toEqual([200, 200]);
    expect([server.received.length, otherServer.received.length]).toEqual([1, 1]);
  });

  it("refuses one literal entry's port on the other entry's address", async () => {
    // Prepare
    const handle = handlerFor({ TOKEN_URL_ALLOWLIST: `${server.origin},${otherServer.origin}` });
    const crossed = `http://127.0.0.2:${new URL(server.origin).port}/token`;

    // Act
    const result = await handle(tokenEvent(body(crossed)));

    // Assess
    expect(result.statusCode).toBe(403);
    expect(bodyOf(result)).toEqual({ code: REFUSED.notListed.code, description: REFUSED.notListed.description });
    expect([server.received.length, otherServer.received.length]).toEqual([0, 0]);
  });
});
