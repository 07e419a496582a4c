import { ExchangeError } from '../lambda/errors';
import { type AllowlistEntry, checkTokenUrl, PUBLIC_ONLY, parseAllowlist, type TokenTarget } from '../lambda/token-url-policy';

/** The policy's answer for one URL: the target it accepted, or the error code it refused with. */
function decide(url: string, allowlist: string | readonly AllowlistEntry[] = []): TokenTarget | string {
  const entries = typeof allowlist === 'string' ? parseAllowlist(allowlist) : allowlist;
  try {
    return checkTokenUrl(url, entries);
  } catch (error) {
    if (error instanceof ExchangeError) return error.code;
    throw error;
  }
}

function refusal(url: string, allowlist: string | readonly AllowlistEntry[] = []): ExchangeError {
  const entries = typeof allowlist === 'string' ? parseAllowlist(allowlist) : allowlist;
  try {
    checkTokenUrl(url, entries);
  } catch (error) {
    if (error instanceof ExchangeError) return error;
    throw error;
  }
  throw new Error(`${url} was accepted`);
}

const accepted = (url: string, allowlist: string | readonly AllowlistEntry[] = []): TokenTarget => {
  const result = decide(url, allowlist);
  if (typeof result === 'string') throw new Error(`${url} was refused with ${result}`);
  return result;
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

  it.each([
    ['login.example.com', 'no scheme'],
    ['//login.example.com', 'no scheme'],
    ['ftp://login.example.com', 'another scheme'],
    ['https://', 'no host'],
    ['https://user@login.example.com', 'user-info'],
    ['https://user:pass@login.example.com', 'user-info with a password'],
    ['https://login.example.com/token?x=1', 'a query'],
    ['https://login.example.com/token#x', 'a fragment'],
    ['https://login.example.com:99999', 'a port out of range'],
    ['https://login..example.com', 'an empty label'],
    ['https://login.example.com.', 'a trailing dot'],
    ['https://*.com', 'a wildcard over a single label'],
    ['https://*.', 'a wildcard over nothing'],
    ['https://*.127.0.0.1', 'a wildcard over an IPv4 address'],
    ['https://*.[::1]', 'a wildcard over an IPv6 address'],
    ['https://*', 'a bare star'],
    ['https://*.*.auth0.com', 'a star after the wildcard'],
    ['https://login*.example.com', 'a star inside a label'],
    ['https://log in.example.com', 'a space in the host'],
  ])('refuses %s (%s) with a message naming TOKEN_URL_ALLOWLIST and the entry', (text) => {
    expect(() => parseAllowlist(`https://fine.example.com,${text}`)).toThrow(
      new RegExp(`^Environment variable TOKEN_URL_ALLOWLIST has an invalid entry "${text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}"`),
    );
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
  ])('refuses the look-alike %s with 403', (url) => {
    expect(decide(url, allowlist)).toBe('token_url_not_allowed');
  });

  it('admits the default port written out', () => {
    expect(accepted('https://a.auth0.com:443/oauth/token', allowlist).url.href).toBe('https://a.auth0.com/oauth/token');
  });

  it.each(['https://a.auth0.com./oauth/token', 'https://.auth0.com/oauth/token'])('refuses %s with an empty label as malformed', (url) => {
    expect(decide(url, allowlist)).toBe('invalid_request');
  });
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
    expect(typeof decide(url, allowlist) !== 'string').toBe(admitted);
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
    expect(decide(url, allowlist)).toBe('token_url_not_allowed');
  });

  it('treats an entry path ending in / as a directory: its own name without the slash is outside', () => {
    expect(decide('https://idp.example.com/oauth2', 'https://idp.example.com/oauth2/')).toBe('token_url_not_allowed');
    expect(typeof decide('https://idp.example.com/oauth2/token', 'https://idp.example.com/oauth2/')).toBe('object');
  });

  it.each([
    'https://idp.example.com/oauth2/..%2fadmin',
    'https://idp.example.com/oauth2/..%2Fadmin',
    'https://idp.example.com/oauth2/..%5cadmin',
  ])('refuses an encoded slash or backslash under a prefix, which a decoding server could resolve outside it: %s', (url) => {
    expect(decide(url, allowlist)).toBe('token_url_not_allowed');
  });

  it('allows an encoded slash where the entry has no path prefix', () => {
    expect(typeof decide('https://idp.example.com/a%2Fb/token', 'https://idp.example.com')).toBe('object');
  });

  it('normalises the entry path too', () => {
    expect(typeof decide('https://idp.example.com/oauth2/token', 'https://idp.example.com/x/../oauth2')).toBe('object');
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
  ])('decides %s against %s: admitted %s', (url, allowlist, admitted) => {
    expect(typeof decide(url, allowlist) !== 'string').toBe(admitted);
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
    expect(decide('http://idp.localhost:3000/token', 'http://localhost:3000')).toBe('token_url_not_allowed');
  });

  it('refuses *.localhost even when a wildcard entry names it', () => {
    expect(decide('https://idp.dev.localhost/token', 'https://*.dev.localhost')).toBe('token_url_not_allowed');
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
    ['http://login.example.com/token', 'token_url_not_allowed'],
    ['https://127.0.0.1/token', 'token_url_not_allowed'],
    ['https://[::ffff:169.254.169.254]/token', 'token_url_not_allowed'],
    ['https://[::127.0.0.1]/token', 'token_url_not_allowed'],
    ['https://[::2]/token', 'token_url_not_allowed'],
    ['https://localhost/token', 'token_url_not_allowed'],
    ['https://idp.localhost/token', 'token_url_not_allowed'],
    ['https://user@login.example.com/token', 'token_url_not_allowed'],
    ['https://@login.example.com/token', 'token_url_not_allowed'],
    ['https://login.example.com/token#', 'token_url_not_allowed'],
    ['https://login.example.com/token#x', 'token_url_not_allowed'],
    ['file:///etc/passwd', 'token_url_not_allowed'],
    ['javascript:alert(1)', 'token_url_not_allowed'],
    ['login.example.com/token', 'invalid_request'],
    ['/oauth/token', 'invalid_request'],
    ['https://login.example.com\\@127.0.0.1/', 'invalid_request'],
    ['https://login.example.com/to ken', 'invalid_request'],
    ['https://login.example.com/t\u00f6ken', 'invalid_request'],
    ['https://login.example.com./token', 'invalid_request'],
    ['https://[fe80::1%25eth0]/token', 'invalid_request'],
  ])('refuses %s with %s', (url, code) => {
    expect(decide(url)).toBe(code);
  });

  it('takes URLs up to 2048 characters and refuses longer ones as malformed', () => {
    // Prepare
    const base = 'https://login.example.com/';
    const atLimit = base + 'a'.repeat(2048 - base.length);

    // Act, Assess
    expect(typeof decide(atLimit)).toBe('object');
    expect(decide(`${atLimit}a`)).toBe('invalid_request');
  });
});

describe('checkTokenUrl refusals', () => {
  it.each(
    [
      ['http://echo-marker.example/token', ''],
      ['https://echo-marker.example/token', 'https://login.example.com'],
      ['https://echo-marker@login.example.com/token', ''],
      ['https://login.example.com/token#echo-marker', ''],
      ['https://127.0.0.1/echo-marker', ''],
      ['https://echo-marker.localhost/', ''],
      ['gopher://echo-marker.example/', ''],
      ['https://echo-marker.example/ token', ''],
      ['echo-marker', ''],
      [`https://echo-marker.example/${'a'.repeat(3000)}`, ''],
    ].map(([url = '', allowlist = '']) => ({ url, allowlist, shown: url.length > 80 ? `${url.slice(0, 60)}...` : url })),
  )('never echo the URL in the description: $shown', ({ url, allowlist }) => {
    // Act
    const error = refusal(url, allowlist);

    // Assess
    expect([400, 403]).toContain(error.statusCode);
    expect(error.description).not.toMatch(/echo-marker|127\.0\.0\.1|login\.example/);
    expect(error.message).not.toMatch(/echo-marker/);
  });

  it('names access_token_url in every refusal', () => {
    const urls = [
      'http://a.example/',
      'https://127.0.0.1/',
      'https://u@a.example/',
      'https://a.example/#',
      'not a url',
      'https://a.example./',
    ];
    for (const url of urls) expect(refusal(url).description).toContain('access_token_url');
  });
});
