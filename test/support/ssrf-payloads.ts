/**
 * Stands for the trap port in payloads built before the traps listen (test titles are fixed when
 * the file loads); {@link atPort} fills it in.
 */
export const PORT = '{port}';

/** The payload's URL aimed at a real port. */
export function atPort(url: string, port: number): string {
  return url.replaceAll(PORT, String(port));
}

/** Which rule of the token URL policy refuses a URL, as the caller sees it. */
export interface Refusal {
  readonly status: 400 | 403;
  readonly code: 'invalid_request' | 'token_url_not_allowed';
  readonly description: string;
}

// The texts are written out here, not imported from lambda/, so a changed rule or text is noticed.
export const REFUSED = {
  notVisibleAscii: {
    status: 400,
    code: 'invalid_request',
    description: 'access_token_url must be an absolute URL of at most 2048 visible ASCII characters',
  },
  notAbsolute: { status: 400, code: 'invalid_request', description: 'access_token_url must be an absolute URL' },
  badHost: { status: 400, code: 'invalid_request', description: 'access_token_url must have a valid host name' },
  notHttps: { status: 403, code: 'token_url_not_allowed', description: 'access_token_url must use https' },
  userInfo: { status: 403, code: 'token_url_not_allowed', description: 'access_token_url must not contain user-info' },
  fragment: { status: 403, code: 'token_url_not_allowed', description: 'access_token_url must not contain a fragment' },
  notListed: { status: 403, code: 'token_url_not_allowed', description: 'access_token_url is not in the allowlist' },
  address: { status: 403, code: 'token_url_not_allowed', description: 'access_token_url points to an address that is not allowed' },
} as const satisfies Record<string, Refusal>;

/** One server-side request forgery attempt: a name for the test title, the `access_token_url`, and the rule that refuses it. */
export interface Payload {
  readonly name: string;
  readonly url: string;
  readonly refusedBy: Refusal;
}

/**
 * Every way a URL can spell "this machine" (127.0.0.0/8, ::1 and their disguises) at a port, each
 * refused as an internal address over https. Over http, with no allowlist, the scheme is refused
 * first; a malformed host is refused as malformed whatever the scheme.
 */
export function loopbackPayloads(port: number | string, scheme: 'https' | 'http' = 'https'): Payload[] {
  const at = (host: string): string => `${scheme}://${host}:${port}`;
  const internal = scheme === 'https' ? REFUSED.address : REFUSED.notHttps;
  return [
    { name: 'dotted quad', url: at('127.0.0.1'), refusedBy: internal },
    { name: 'another address of 127/8', url: at('127.127.127.127'), refusedBy: internal },
    { name: 'short form a.b', url: at('127.1'), refusedBy: internal },
    { name: 'short form a.b.c', url: at('127.0.1'), refusedBy: internal },
    { name: 'hexadecimal integer', url: at('0x7f000001'), refusedBy: internal },
    { name: 'upper-case hexadecimal integer', url: at('0X7F000001'), refusedBy: internal },
    { name: 'decimal integer', url: at('2130706433'), refusedBy: internal },
    { name: 'octal integer', url: at('017700000001'), refusedBy: internal },
    { name: 'octal first octet', url: at('0177.0.0.1'), refusedBy: internal },
    { name: 'hexadecimal octets', url: at('0x7f.0x0.0x0.0x1'), refusedBy: internal },
    { name: 'mixed hexadecimal and octal', url: at('0x7f.0.00.01'), refusedBy: internal },
    { name: 'zero-padded octets', url: at('127.000.000.001'), refusedBy: internal },
    { name: 'trailing dot on the quad', url: at('127.0.0.1.'), refusedBy: internal },
    { name: 'percent-encoded digits', url: at('%31%32%37.0.0.1'), refusedBy: internal },
    { name: 'percent-encoded last octet', url: at('127.0.0.%31'), refusedBy: internal },
    { name: 'IPv6 loopback', url: at('[::1]'), refusedBy: internal },
    { name: 'IPv6 loopback written out', url: at('[0000:0000:0000:0000:0000:0000:0000:0001]'), refusedBy: internal },
    { name: 'IPv4-mapped dotted', url: at('[::ffff:127.0.0.1]'), refusedBy: internal },
    { name: 'IPv4-mapped hexadecimal', url: at('[::ffff:7f00:1]'), refusedBy: internal },
    { name: 'IPv4-mapped written out', url: at('[0:0:0:0:0:ffff:127.0.0.1]'), refusedBy: internal },
    { name: 'IPv4-compatible dotted (deprecated ::/96)', url: at('[::127.0.0.1]'), refusedBy: internal },
    { name: 'IPv4-compatible hexadecimal (deprecated ::/96)', url: at('[::7f00:1]'), refusedBy: internal },
    { name: 'IPv4-translated (SIIT)', url: at('[::ffff:0:7f00:1]'), refusedBy: internal },
    { name: 'NAT64 well-known prefix', url: at('[64:ff9b::7f00:1]'), refusedBy: internal },
    { name: 'NAT64 well-known prefix dotted', url: at('[64:ff9b::127.0.0.1]'), refusedBy: internal },
    { name: 'NAT64 local-use prefix', url: at('[64:ff9b:1::7f00:1]'), refusedBy: internal },
    { name: '6to4 of 127.0.0.1', url: at('[2002:7f00:1::1]'), refusedBy: internal },
    { name: 'localhost', url: at('localhost'), refusedBy: internal },
    { name: 'upper-case localhost', url: at('LOCALHOST'), refusedBy: internal },
    { name: 'percent-encoded localhost', url: at('%6c%6f%63%61%6c%68%6f%73%74'), refusedBy: internal },
    { name: 'localhost with a trailing dot', url: at('localhost.'), refusedBy: REFUSED.badHost },
    { name: 'subdomain of localhost', url: at('foo.localhost'), refusedBy: internal },
    { name: 'deep subdomain of localhost', url: at('a.b.localhost'), refusedBy: internal },
    { name: 'zero', url: at('0'), refusedBy: internal },
    { name: 'unspecified IPv4', url: at('0.0.0.0'), refusedBy: internal },
    { name: 'unspecified IPv4 in hexadecimal', url: at('0x0'), refusedBy: internal },
    { name: 'unspecified IPv6', url: at('[::]'), refusedBy: internal },
    { name: 'IPv4-mapped unspecified', url: at('[::ffff:0.0.0.0]'), refusedBy: internal },
  ];
}

/**
 * Cloud metadata services, container credential endpoints and the Lambda runtime API, by address
 * only: a host name would need DNS (see {@link dnsOnlyNames}).
 */
export function metadataPayloads(): Payload[] {
  return [
    { name: 'EC2 metadata over http', url: 'http://169.254.169.254/latest/meta-data/', refusedBy: REFUSED.notHttps },
    {
      name: 'EC2 metadata credentials',
      url: 'https://169.254.169.254/latest/meta-data/iam/security-credentials/',
      refusedBy: REFUSED.address,
    },
    { name: 'EC2 metadata root', url: 'https://169.254.169.254', refusedBy: REFUSED.address },
    { name: 'EC2 metadata as a decimal integer', url: 'https://2852039166/latest/meta-data/', refusedBy: REFUSED.address },
    { name: 'EC2 metadata as a hexadecimal integer', url: 'https://0xa9fea9fe/', refusedBy: REFUSED.address },
    { name: 'EC2 metadata in octal octets', url: 'https://0251.0376.0251.0376/', refusedBy: REFUSED.address },
    { name: 'EC2 metadata short form', url: 'https://169.254.43518/', refusedBy: REFUSED.address },
    { name: 'EC2 metadata IPv4-mapped', url: 'https://[::ffff:169.254.169.254]/', refusedBy: REFUSED.address },
    { name: 'EC2 metadata IPv4-mapped hexadecimal', url: 'https://[::ffff:a9fe:a9fe]/', refusedBy: REFUSED.address },
    { name: 'EC2 metadata NAT64', url: 'https://[64:ff9b::a9fe:a9fe]/', refusedBy: REFUSED.address },
    { name: 'EC2 metadata IPv4-compatible (deprecated ::/96)', url: 'https://[::a9fe:a9fe]/', refusedBy: REFUSED.address },
    { name: 'EC2 metadata over IPv6', url: 'https://[fd00:ec2::254]/latest/meta-data/', refusedBy: REFUSED.address },
    { name: 'ECS task credentials', url: 'https://169.254.170.2/v2/credentials/', refusedBy: REFUSED.address },
    { name: 'ECS task metadata over IPv6', url: 'https://[fd00:ec2::23]/', refusedBy: REFUSED.address },
    { name: 'Alibaba Cloud metadata (CGNAT range)', url: 'https://100.100.100.200/latest/meta-data/', refusedBy: REFUSED.address },
    { name: 'Oracle Cloud metadata', url: 'https://192.0.0.192/opc/v2/instance/', refusedBy: REFUSED.address },
    { name: 'Lambda runtime API by address', url: 'http://127.0.0.1:9001/2018-06-01/runtime/invocation/next', refusedBy: REFUSED.notHttps },
    { name: 'Lambda runtime API over https', url: 'https://127.0.0.1:9001/2018-06-01/runtime/invocation/next', refusedBy: REFUSED.address },
    {
      name: 'Lambda runtime API by localhost',
      url: 'https://localhost:9001/2018-06-01/runtime/invocation/next',
      refusedBy: REFUSED.address,
    },
  ];
}

/** Private, shared, link-local, reserved, multicast and documentation ranges, IPv4 and IPv6. */
export function internalRangePayloads(): Payload[] {
  const addresses = [
    '10.0.0.1',
    '10.255.255.254',
    '172.16.0.1',
    '172.31.255.254',
    '192.168.1.1',
    '100.64.0.1',
    '100.127.255.254',
    '198.18.0.1',
    '198.19.255.254',
    '192.0.0.1',
    '192.0.2.1',
    '198.51.100.1',
    '203.0.113.1',
    '192.88.99.1',
    '169.254.0.1',
    '224.0.0.1',
    '239.255.255.250',
    '240.0.0.1',
    '255.255.255.255',
    '0.1.2.3',
    '[fc00::1]',
    '[fd12:3456:789a::1]',
    '[fe80::1]',
    '[fec0::1]',
    '[ff02::1]',
    '[ff05::1:3]',
    '[2001:db8::1]',
    '[3fff::1]',
    '[100::1]',
    '[2001::1]',
    '[2002:a00:1::1]',
    '[::ffff:10.0.0.1]',
    '[::ffff:192.168.1.1]',
    '[64:ff9b::a00:1]',
    '[::a00:1]',
    '[::2]',
  ];
  return addresses.map((host) => ({ name: `internal address ${host}`, url: `https://${host}/oauth/token`, refusedBy: REFUSED.address }));
}

/** URL parser confusion: user-info, fragments, whitespace, backslashes, control characters. */
export function parserTrickPayloads(port: number | string): Payload[] {
  const p = String(port);
  return [
    { name: 'user-info before a loopback host', url: `https://evil.example@127.0.0.1:${p}`, refusedBy: REFUSED.userInfo },
    { name: 'trusted name as user-info', url: `https://login.example.com@127.0.0.1:${p}/oauth/token`, refusedBy: REFUSED.userInfo },
    { name: 'user and password before a loopback host', url: `https://user:pass@127.0.0.1:${p}`, refusedBy: REFUSED.userInfo },
    { name: 'empty user-info', url: `https://:@127.0.0.1:${p}`, refusedBy: REFUSED.userInfo },
    { name: 'user-info with a port', url: `https://login.example.com:443@127.0.0.1:${p}`, refusedBy: REFUSED.userInfo },
    {
      name: 'backslash before @ (parser differential)',
      url: `https://127.0.0.1:${p}\\@login.example.com`,
      refusedBy: REFUSED.notVisibleAscii,
    },
    { name: 'fragment hiding a loopback host', url: `https://login.example.com#@127.0.0.1:${p}`, refusedBy: REFUSED.userInfo },
    { name: 'query hiding a loopback host', url: `https://login.example.com?@127.0.0.1:${p}`, refusedBy: REFUSED.userInfo },
    {
      name: 'loopback host with a trusted name in the query',
      url: `https://127.0.0.1:${p}?@login.example.com`,
      refusedBy: REFUSED.userInfo,
    },
    { name: 'encoded NUL in the host', url: 'https://login.example.com%00.127.0.0.1/', refusedBy: REFUSED.notAbsolute },
    { name: 'encoded tab in the host', url: `https://127.0.0.1%09:${p}`, refusedBy: REFUSED.notAbsolute },
    { name: 'encoded slash in the host', url: `https://127.0.0.1%2f@login.example.com:${p}`, refusedBy: REFUSED.userInfo },
    { name: 'tab inside the host', url: `https://127.0.\t0.1:${p}`, refusedBy: REFUSED.notVisibleAscii },
    { name: 'newline inside the host', url: `https://127.0.0.1\n:${p}`, refusedBy: REFUSED.notVisibleAscii },
    {
      name: 'carriage return and newline in the path',
      url: `https://127.0.0.1:${p}/\r\nHost: login.example.com`,
      refusedBy: REFUSED.notVisibleAscii,
    },
    { name: 'space inside the host', url: `https://127.0.0.1 :${p}`, refusedBy: REFUSED.notVisibleAscii },
    { name: 'leading space', url: ` https://127.0.0.1:${p}`, refusedBy: REFUSED.notVisibleAscii },
    { name: 'trailing space', url: `https://127.0.0.1:${p} `, refusedBy: REFUSED.notVisibleAscii },
    { name: 'backslashes for slashes', url: `https:\\\\127.0.0.1:${p}`, refusedBy: REFUSED.notVisibleAscii },
    { name: 'slash and backslash', url: `https:/\\127.0.0.1:${p}`, refusedBy: REFUSED.notVisibleAscii },
    { name: 'no slashes', url: `https:127.0.0.1:${p}`, refusedBy: REFUSED.address },
    { name: 'one slash', url: `https:/127.0.0.1:${p}`, refusedBy: REFUSED.address },
    { name: 'three slashes', url: `https:///127.0.0.1:${p}`, refusedBy: REFUSED.address },
    { name: 'scheme-relative', url: `//127.0.0.1:${p}`, refusedBy: REFUSED.notAbsolute },
    { name: 'no scheme', url: `127.0.0.1:${p}`, refusedBy: REFUSED.notAbsolute },
    { name: 'mixed-case scheme', url: `hTtPs://127.0.0.1:${p}`, refusedBy: REFUSED.address },
    { name: 'two ports', url: `https://127.0.0.1:${p}:${p}`, refusedBy: REFUSED.notAbsolute },
    { name: 'IPv4 in brackets', url: `https://[127.0.0.1]:${p}`, refusedBy: REFUSED.notAbsolute },
    { name: 'IPv6 zone identifier', url: `https://[fe80::1%25lo]:${p}`, refusedBy: REFUSED.notAbsolute },
    { name: 'IPv6 loopback with a zone identifier', url: `https://[::1%25lo]:${p}`, refusedBy: REFUSED.notAbsolute },
    { name: 'full-width digits', url: `https://\uff11\uff12\uff17.0.0.1:${p}`, refusedBy: REFUSED.notVisibleAscii },
    { name: 'ideographic full stops', url: `https://127\u30020\u30020\u30021:${p}`, refusedBy: REFUSED.notVisibleAscii },
    { name: 'encoded brackets', url: `https://%5b::1%5d:${p}`, refusedBy: REFUSED.notAbsolute },
    { name: 'empty host', url: 'https:///', refusedBy: REFUSED.notAbsolute },
    { name: 'an empty string', url: '', refusedBy: REFUSED.notVisibleAscii },
    { name: 'over-long URL', url: `https://login.example.com/${'a'.repeat(3000)}`, refusedBy: REFUSED.notVisibleAscii },
  ];
}

/** Schemes other than http(s), and http where only https is allowed. */
export function schemePayloads(port: number | string): Payload[] {
  const p = String(port);
  return [
    { name: 'file', url: 'file:///etc/passwd', refusedBy: REFUSED.notHttps },
    { name: 'file with a host', url: 'file://127.0.0.1/etc/passwd', refusedBy: REFUSED.notHttps },
    { name: 'gopher', url: `gopher://127.0.0.1:${p}/_POST%20/token`, refusedBy: REFUSED.notHttps },
    { name: 'ftp', url: `ftp://127.0.0.1:${p}/`, refusedBy: REFUSED.notHttps },
    { name: 'sftp', url: `sftp://127.0.0.1:${p}/`, refusedBy: REFUSED.notHttps },
    { name: 'tftp', url: `tftp://127.0.0.1:${p}/x`, refusedBy: REFUSED.notHttps },
    { name: 'dict', url: `dict://127.0.0.1:${p}/info`, refusedBy: REFUSED.notHttps },
    { name: 'ldap', url: `ldap://127.0.0.1:${p}/`, refusedBy: REFUSED.notHttps },
    { name: 'javascript', url: 'javascript:alert(1)', refusedBy: REFUSED.notHttps },
    { name: 'data', url: 'data:application/json,{"access_token":"x"}', refusedBy: REFUSED.notHttps },
    { name: 'ws', url: `ws://127.0.0.1:${p}/`, refusedBy: REFUSED.notHttps },
    { name: 'wss', url: `wss://127.0.0.1:${p}/`, refusedBy: REFUSED.notHttps },
    { name: 'jar', url: 'jar:https://login.example.com!/', refusedBy: REFUSED.notHttps },
    { name: 'blob', url: 'blob:https://login.example.com/0', refusedBy: REFUSED.notHttps },
    { name: 'http to a loopback address', url: `http://127.0.0.1:${p}/oauth/token`, refusedBy: REFUSED.notHttps },
    { name: 'http to a public name, no allowlist', url: 'http://login.example.com/oauth/token', refusedBy: REFUSED.notHttps },
    { name: 'http to a public address, no allowlist', url: 'http://93.184.215.14/oauth/token', refusedBy: REFUSED.notHttps },
  ];
}

/**
 * Every payload that must be refused before any socket or DNS query exists, under any allowlist
 * that does not name the target literally.
 */
export function refusedEverywherePayloads(port: number | string): Payload[] {
  return [
    ...loopbackPayloads(port, 'https').map((payload) => ({ ...payload, name: `loopback: ${payload.name}` })),
    ...loopbackPayloads(port, 'http').map((payload) => ({ ...payload, name: `loopback over http: ${payload.name}` })),
    ...metadataPayloads().map((payload) => ({ ...payload, name: `metadata: ${payload.name}` })),
    ...internalRangePayloads(),
    ...parserTrickPayloads(port).map((payload) => ({ ...payload, name: `parser: ${payload.name}` })),
    ...schemePayloads(port).map((payload) => ({ ...payload, name: `scheme: ${payload.name}` })),
  ];
}

/**
 * Host names that an allowlist of `https://login.example.com` and `https://*.auth0.com` must refuse
 * before resolving them: look-alikes of the entries, and names that point home.
 */
export function allowlistLookalikePayloads(port: number | string): Payload[] {
  const p = String(port);
  return [
    { name: 'the bare domain of a wildcard entry', url: 'https://auth0.com/oauth/token', refusedBy: REFUSED.notListed },
    { name: 'a suffix look-alike', url: 'https://evilauth0.com/oauth/token', refusedBy: REFUSED.notListed },
    { name: 'a look-alike with a hyphen', url: 'https://tenant.evil-auth0.com/oauth/token', refusedBy: REFUSED.notListed },
    { name: 'the entry as a subdomain of another domain', url: 'https://auth0.com.evil.test/oauth/token', refusedBy: REFUSED.notListed },
    {
      name: 'a matching name as a subdomain of another domain',
      url: 'https://a.auth0.com.evil.test/oauth/token',
      refusedBy: REFUSED.notListed,
    },
    { name: 'a matching name with another port', url: 'https://a.auth0.com:444/oauth/token', refusedBy: REFUSED.notListed },
    { name: 'a matching name over http', url: 'http://a.auth0.com/oauth/token', refusedBy: REFUSED.notListed },
    { name: 'an exact entry over http', url: 'http://login.example.com/oauth/token', refusedBy: REFUSED.notListed },
    { name: 'an exact entry with another port', url: `https://login.example.com:${p}/oauth/token`, refusedBy: REFUSED.notListed },
    { name: 'a subdomain of an exact entry', url: 'https://evil.login.example.com/oauth/token', refusedBy: REFUSED.notListed },
    { name: 'an exact entry as a prefix', url: 'https://login.example.com.evil.test/oauth/token', refusedBy: REFUSED.notListed },
    { name: 'an exact entry with a trailing dot', url: 'https://login.example.com./oauth/token', refusedBy: REFUSED.badHost },
    { name: 'a wildcard match with a trailing dot', url: 'https://a.auth0.com./oauth/token', refusedBy: REFUSED.badHost },
    {
      name: 'an exact entry resolving home via a wildcard DNS service',
      url: 'https://login.example.com.127.0.0.1.nip.io/',
      refusedBy: REFUSED.notListed,
    },
    { name: 'a wildcard DNS service pointing home', url: 'https://127.0.0.1.nip.io/', refusedBy: REFUSED.notListed },
    { name: 'a name that resolves to loopback publicly', url: 'https://localtest.me/', refusedBy: REFUSED.notListed },
    { name: 'GCP metadata by name', url: 'https://metadata.google.internal/computeMetadata/v1/', refusedBy: REFUSED.notListed },
    { name: 'AWS metadata by name', url: 'https://instance-data.ec2.internal/latest/meta-data/', refusedBy: REFUSED.notListed },
    { name: 'a single-label name', url: 'https://metadata/', refusedBy: REFUSED.notListed },
  ];
}

/**
 * Names whose addresses only DNS can tell: with no allowlist the policy must let them through to
 * resolution, where the guarded lookup judges the answers. Here nothing resolves (the network is
 * locked), so the handler can only show that no connection was tried.
 */
export function dnsOnlyNames(): Array<{ name: string; url: string }> {
  return [
    { name: 'GCP metadata by name', url: 'https://metadata.google.internal/computeMetadata/v1/' },
    { name: 'AWS metadata by name', url: 'https://instance-data.ec2.internal/latest/meta-data/' },
    { name: 'a single-label name', url: 'https://metadata/' },
    { name: 'a wildcard DNS service pointing home', url: 'https://127.0.0.1.nip.io/' },
    { name: 'a name that resolves to loopback publicly', url: 'https://localtest.me/' },
  ];
}
