import { loopbackUrls } from './trap-listeners';

/**
 * Stands for the trap port in payloads built before the traps listen (test titles are fixed when
 * the file loads); {@link atPort} fills it in.
 */
export const PORT = '{port}';

/** The payload's URL aimed at a real port. */
export function atPort(url: string, port: number): string {
  return url.replaceAll(PORT, String(port));
}

/** One server-side request forgery attempt: a name for the test title and the `access_token_url`. */
export interface Payload {
  readonly name: string;
  readonly url: string;
}

/**
 * Cloud metadata services, container credential endpoints and the Lambda runtime API, by address
 * only: a host name would need DNS (see {@link dnsOnlyNames}).
 */
export function metadataPayloads(): Payload[] {
  return [
    { name: 'EC2 metadata over http', url: 'http://169.254.169.254/latest/meta-data/' },
    { name: 'EC2 metadata credentials', url: 'https://169.254.169.254/latest/meta-data/iam/security-credentials/' },
    { name: 'EC2 metadata root', url: 'https://169.254.169.254' },
    { name: 'EC2 metadata as a decimal integer', url: 'https://2852039166/latest/meta-data/' },
    { name: 'EC2 metadata as a hexadecimal integer', url: 'https://0xa9fea9fe/' },
    { name: 'EC2 metadata in octal octets', url: 'https://0251.0376.0251.0376/' },
    { name: 'EC2 metadata short form', url: 'https://169.254.43518/' },
    { name: 'EC2 metadata IPv4-mapped', url: 'https://[::ffff:169.254.169.254]/' },
    { name: 'EC2 metadata IPv4-mapped hexadecimal', url: 'https://[::ffff:a9fe:a9fe]/' },
    { name: 'EC2 metadata NAT64', url: 'https://[64:ff9b::a9fe:a9fe]/' },
    { name: 'EC2 metadata IPv4-compatible (deprecated ::/96)', url: 'https://[::a9fe:a9fe]/' },
    { name: 'EC2 metadata over IPv6', url: 'https://[fd00:ec2::254]/latest/meta-data/' },
    { name: 'ECS task credentials', url: 'https://169.254.170.2/v2/credentials/' },
    { name: 'ECS task metadata over IPv6', url: 'https://[fd00:ec2::23]/' },
    { name: 'Alibaba Cloud metadata (CGNAT range)', url: 'https://100.100.100.200/latest/meta-data/' },
    { name: 'Oracle Cloud metadata', url: 'https://192.0.0.192/opc/v2/instance/' },
    { name: 'Lambda runtime API by address', url: 'http://127.0.0.1:9001/2018-06-01/runtime/invocation/next' },
    { name: 'Lambda runtime API over https', url: 'https://127.0.0.1:9001/2018-06-01/runtime/invocation/next' },
    { name: 'Lambda runtime API by localhost', url: 'https://localhost:9001/2018-06-01/runtime/invocation/next' },
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
  return addresses.map((host) => ({ name: `internal address ${host}`, url: `https://${host}/oauth/token` }));
}

/** URL parser confusion: user-info, fragments, whitespace, backslashes, control characters. */
export function parserTrickPayloads(port: number | string): Payload[] {
  const p = String(port);
  return [
    { name: 'user-info before a loopback host', url: `https://evil.example@127.0.0.1:${p}` },
    { name: 'trusted name as user-info', url: `https://login.example.com@127.0.0.1:${p}/oauth/token` },
    { name: 'user and password before a loopback host', url: `https://user:pass@127.0.0.1:${p}` },
    { name: 'empty user-info', url: `https://:@127.0.0.1:${p}` },
    { name: 'user-info with a port', url: `https://login.example.com:443@127.0.0.1:${p}` },
    { name: 'backslash before @ (parser differential)', url: `https://127.0.0.1:${p}\\@login.example.com` },
    { name: 'fragment hiding a loopback host', url: `https://login.example.com#@127.0.0.1:${p}` },
    { name: 'query hiding a loopback host', url: `https://login.example.com?@127.0.0.1:${p}` },
    { name: 'loopback host with a trusted name in the query', url: `https://127.0.0.1:${p}?@login.example.com` },
    { name: 'encoded NUL in the host', url: 'https://login.example.com%00.127.0.0.1/' },
    { name: 'encoded tab in the host', url: `https://127.0.0.1%09:${p}` },
    { name: 'encoded slash in the host', url: `https://127.0.0.1%2f@login.example.com:${p}` },
    { name: 'tab inside the host', url: `https://127.0.\t0.1:${p}` },
    { name: 'newline inside the host', url: `https://127.0.0.1\n:${p}` },
    { name: 'carriage return and newline in the path', url: `https://127.0.0.1:${p}/\r\nHost: login.example.com` },
    { name: 'space inside the host', url: `https://127.0.0.1 :${p}` },
    { name: 'leading space', url: ` https://127.0.0.1:${p}` },
    { name: 'trailing space', url: `https://127.0.0.1:${p} ` },
    { name: 'backslashes for slashes', url: `https:\\\\127.0.0.1:${p}` },
    { name: 'slash and backslash', url: `https:/\\127.0.0.1:${p}` },
    { name: 'no slashes', url: `https:127.0.0.1:${p}` },
    { name: 'one slash', url: `https:/127.0.0.1:${p}` },
    { name: 'three slashes', url: `https:///127.0.0.1:${p}` },
    { name: 'scheme-relative', url: `//127.0.0.1:${p}` },
    { name: 'no scheme', url: `127.0.0.1:${p}` },
    { name: 'mixed-case scheme', url: `hTtPs://127.0.0.1:${p}` },
    { name: 'two ports', url: `https://127.0.0.1:${p}:${p}` },
    { name: 'IPv4 in brackets', url: `https://[127.0.0.1]:${p}` },
    { name: 'IPv6 zone identifier', url: `https://[fe80::1%25lo]:${p}` },
    { name: 'IPv6 loopback with a zone identifier', url: `https://[::1%25lo]:${p}` },
    { name: 'full-width digits', url: `https://\uff11\uff12\uff17.0.0.1:${p}` },
    { name: 'ideographic full stops', url: `https://127\u30020\u30020\u30021:${p}` },
    { name: 'encoded brackets', url: `https://%5b::1%5d:${p}` },
    { name: 'empty host', url: 'https:///' },
    { name: 'an empty string', url: '' },
    { name: 'over-long URL', url: `https://login.example.com/${'a'.repeat(3000)}` },
  ];
}

/** Schemes other than http(s), and http where only https is allowed. */
export function schemePayloads(port: number | string): Payload[] {
  const p = String(port);
  return [
    { name: 'file', url: 'file:///etc/passwd' },
    { name: 'file with a host', url: 'file://127.0.0.1/etc/passwd' },
    { name: 'gopher', url: `gopher://127.0.0.1:${p}/_POST%20/token` },
    { name: 'ftp', url: `ftp://127.0.0.1:${p}/` },
    { name: 'sftp', url: `sftp://127.0.0.1:${p}/` },
    { name: 'tftp', url: `tftp://127.0.0.1:${p}/x` },
    { name: 'dict', url: `dict://127.0.0.1:${p}/info` },
    { name: 'ldap', url: `ldap://127.0.0.1:${p}/` },
    { name: 'javascript', url: 'javascript:alert(1)' },
    { name: 'data', url: 'data:application/json,{"access_token":"x"}' },
    { name: 'ws', url: `ws://127.0.0.1:${p}/` },
    { name: 'wss', url: `wss://127.0.0.1:${p}/` },
    { name: 'jar', url: 'jar:https://login.example.com!/' },
    { name: 'blob', url: 'blob:https://login.example.com/0' },
    { name: 'http to a loopback address', url: `http://127.0.0.1:${p}/oauth/token` },
    { name: 'http to a public name, no allowlist', url: 'http://login.example.com/oauth/token' },
    { name: 'http to a public address, no allowlist', url: 'http://93.184.215.14/oauth/token' },
  ];
}

/**
 * Every payload that must be refused before any socket or DNS query exists, under any allowlist
 * that does not name the target literally.
 */
export function refusedEverywherePayloads(port: number | string): Payload[] {
  return [
    ...loopbackUrls(port, 'https').map(({ name, url }) => ({ name: `loopback: ${name}`, url })),
    ...loopbackUrls(port, 'http').map(({ name, url }) => ({ name: `loopback over http: ${name}`, url })),
    ...metadataPayloads().map(({ name, url }) => ({ name: `metadata: ${name}`, url })),
    ...internalRangePayloads(),
    ...parserTrickPayloads(port).map(({ name, url }) => ({ name: `parser: ${name}`, url })),
    ...schemePayloads(port).map(({ name, url }) => ({ name: `scheme: ${name}`, url })),
  ];
}

/**
 * Host names that an allowlist of `https://login.example.com` and `https://*.auth0.com` must refuse
 * before resolving them: look-alikes of the entries, and names that point home.
 */
export function allowlistLookalikePayloads(port: number | string): Payload[] {
  const p = String(port);
  return [
    { name: 'the bare domain of a wildcard entry', url: 'https://auth0.com/oauth/token' },
    { name: 'a suffix look-alike', url: 'https://evilauth0.com/oauth/token' },
    { name: 'a look-alike with a hyphen', url: 'https://tenant.evil-auth0.com/oauth/token' },
    { name: 'the entry as a subdomain of another domain', url: 'https://auth0.com.evil.test/oauth/token' },
    { name: 'a matching name as a subdomain of another domain', url: 'https://a.auth0.com.evil.test/oauth/token' },
    { name: 'a matching name with another port', url: 'https://a.auth0.com:444/oauth/token' },
    { name: 'a matching name over http', url: 'http://a.auth0.com/oauth/token' },
    { name: 'an exact entry over http', url: 'http://login.example.com/oauth/token' },
    { name: 'an exact entry with another port', url: `https://login.example.com:${p}/oauth/token` },
    { name: 'a subdomain of an exact entry', url: 'https://evil.login.example.com/oauth/token' },
    { name: 'an exact entry as a prefix', url: 'https://login.example.com.evil.test/oauth/token' },
    { name: 'an exact entry with a trailing dot', url: 'https://login.example.com./oauth/token' },
    { name: 'a wildcard match with a trailing dot', url: 'https://a.auth0.com./oauth/token' },
    { name: 'an exact entry resolving home via a wildcard DNS service', url: 'https://login.example.com.127.0.0.1.nip.io/' },
    { name: 'a wildcard DNS service pointing home', url: 'https://127.0.0.1.nip.io/' },
    { name: 'a name that resolves to loopback publicly', url: 'https://localtest.me/' },
    { name: 'GCP metadata by name', url: 'https://metadata.google.internal/computeMetadata/v1/' },
    { name: 'AWS metadata by name', url: 'https://instance-data.ec2.internal/latest/meta-data/' },
    { name: 'a single-label name', url: 'https://metadata/' },
  ];
}

/**
 * Names whose addresses only DNS can tell: with no allowlist the policy must let them through to
 * resolution, where the guarded lookup judges the answers. Here nothing resolves (the network is
 * locked), so the handler can only show that no connection was tried.
 */
export function dnsOnlyNames(): Payload[] {
  return [
    { name: 'GCP metadata by name', url: 'https://metadata.google.internal/computeMetadata/v1/' },
    { name: 'AWS metadata by name', url: 'https://instance-data.ec2.internal/latest/meta-data/' },
    { name: 'a single-label name', url: 'https://metadata/' },
    { name: 'a wildcard DNS service pointing home', url: 'https://127.0.0.1.nip.io/' },
    { name: 'a name that resolves to loopback publicly', url: 'https://localtest.me/' },
  ];
}
