import { isIP } from 'node:net';
import { canonicalAddress, isLoopback, isPublicUnicast } from './address-ranges';
import { invalidRequest, tokenUrlNotAllowed } from '../errors';

/**
 * Which addresses a connection for one token URL may reach. The policy decides it from the URL and
 * the allowlist; the guarded agents enforce it on every resolved and connected address.
 */
export interface AddressPermit {
  /** Stable name, so agents can be pooled per permit. */
  readonly key: string;
  allows(address: string): boolean;
}

/** The default: only globally routable unicast addresses. */
const PUBLIC_ONLY: AddressPermit = { key: 'public', allows: isPublicUnicast };

/** One parsed `TOKEN_URL_ALLOWLIST` entry. */
export interface AllowlistEntry {
  readonly text: string;
  readonly protocol: 'https:' | 'http:';
  /** Lower-case host name or IP literal (IPv6 without brackets); for a wildcard, the part after `*.`. */
  readonly host: string;
  readonly wildcard: boolean;
  readonly port: string;
  readonly pathPrefix: string;
  readonly permit: AddressPermit;
}

/** A token URL the policy accepted: where to post, which addresses the connection may use, and what a refusal names it. */
export interface TokenTarget {
  readonly url: URL;
  readonly permit: AddressPermit;
  readonly field: PolicyField;
}

const MAX_URL_LENGTH = 2048;
// Visible ASCII without the backslash: WHATWG parsing silently drops tabs and newlines and turns `\`
// into `/`, which is how `https://good.example\@evil.test` tricks differ between parsers.
const URL_CHARACTERS = /^[\x21-\x5B\x5D-\x7E]+$/;
const DEFAULT_PORT = { 'https:': '443', 'http:': '80' } as const;

/**
 * Parse `TOKEN_URL_ALLOWLIST` (comma-separated `scheme://host[:port][/path]`, host may start with
 * `*.`). Throws a message naming the variable and the bad entry.
 */
export function parseAllowlist(value: string | undefined): AllowlistEntry[] {
  if (value === undefined) return [];
  return value
    .split(',')
    .map((text) => text.trim())
    .filter((text) => text !== '')
    .map(parseEntry);
}

function parseEntry(text: string): AllowlistEntry {
  const fail = (why: string): never => {
    throw new Error(`Environment variable TOKEN_URL_ALLOWLIST has an invalid entry "${text}": ${why}`);
  };
  // `*` is not a URL host character everywhere, so the wildcard is taken off before parsing.
  const wildcard = /^https?:\/\/\*\./i.test(text);
  let url: URL;
  try {
    url = new URL(wildcard ? text.replace('*.', '') : text);
  } catch {
    return fail('it is not a URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') fail('it must start with https:// or http://');
  if (url.username || url.password) fail('user-info is not allowed');
  // The text, not the parsed URL: an empty query (`?`) or fragment (`#`) parses to ''.
  if (text.includes('?') || text.includes('#')) fail('query and fragment are not allowed');
  const host = stripBrackets(url.hostname);
  if (wildcard && (isIP(host) !== 0 || !host.includes('.'))) fail('*. must precede a domain with at least two labels');
  if (host.split('.').some((label) => label === '')) fail('the host has an empty label');
  if (host.includes('*')) fail('* is only allowed as the leading *. of a wildcard entry');
  const protocol = url.protocol as AllowlistEntry['protocol'];
  return {
    text,
    protocol,
    host,
    wildcard,
    port: url.port || DEFAULT_PORT[protocol],
    pathPrefix: url.pathname,
    permit: wildcard ? PUBLIC_ONLY : permitFor(host),
  };
}

/**
 * An entry that names a loopback or private host literally is how operators reach an IdP inside
 * their own network (and how the local server and tests reach theirs): that one address, or for
 * `localhost` the loopback range, is allowed for URLs matching the entry. A host name is never
 * trusted to stay private, so any other entry keeps the public-only rule.
 */
function permitFor(host: string): AddressPermit {
  if (host === 'localhost') return { key: 'loopback', allows: isLoopback };
  if (isIP(host) !== 0 && !isPublicUnicast(host)) {
    const only = canonicalAddress(host);
    return { key: `literal:${only}`, allows: (address) => isIP(address) !== 0 && canonicalAddress(address) === only };
  }
  return PUBLIC_ONLY;
}

/** What a checked URL is, as its refusals name it: the caller's two fields, or the endpoint an issuer's metadata names. */
export type PolicyField = 'access_token_url' | 'issuer' | "the issuer's token_endpoint";

/**
 * Decide whether the service may post client credentials to `raw` (the contract's "Token URL
 * policy"), or fetch an issuer's metadata from under it. Malformed input is a 400 naming `field`; a
 * URL that parses but breaks a rule is a 403. Addresses of host names are checked later, at connect
 * time, by the guarded agents.
 */
export function checkTokenUrl(raw: string, allowlist: readonly AllowlistEntry[], field: PolicyField = 'access_token_url'): TokenTarget {
  if (raw.length > MAX_URL_LENGTH || !URL_CHARACTERS.test(raw)) {
    throw invalidRequest(`${field} must be an absolute URL of at most ${MAX_URL_LENGTH} visible ASCII characters`);
  }
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalidRequest(`${field} must be an absolute URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw tokenUrlNotAllowed(`${field} must use https`);
  }
  // An `@` anywhere is refused, not only in the authority (where user-info needs one): it is where
  // URL parsers disagree about the host (`https://good.example?@127.0.0.1`), and token URLs have no
  // use for it.
  if (raw.includes('@')) {
    throw tokenUrlNotAllowed(`${field} must not contain user-info`);
  }
  if (raw.includes('#')) throw tokenUrlNotAllowed(`${field} must not contain a fragment`);
  const host = stripBrackets(url.hostname);
  if (host.split('.').some((label) => label === '')) {
    throw invalidRequest(`${field} must have a valid host name`);
  }

  let permit = PUBLIC_ONLY;
  if (allowlist.length > 0) {
    const entry = allowlist.find((candidate) => matches(candidate, url, host));
    if (!entry) throw tokenUrlNotAllowed(`${field} is not in the allowlist`);
    permit = entry.permit;
  } else if (url.protocol !== 'https:') {
    throw tokenUrlNotAllowed(`${field} must use https`);
  }

  // Refuse what is refusable before any socket exists; names are resolved and checked by the agent.
  if (isIP(host) !== 0 && !permit.allows(host)) {
    throw tokenUrlNotAllowed(addressNotAllowed(field));
  }
  if (permit === PUBLIC_ONLY && (host === 'localhost' || host.endsWith('.localhost'))) {
    throw tokenUrlNotAllowed(addressNotAllowed(field));
  }
  return { url, permit, field };
}

function matches(entry: AllowlistEntry, url: URL, host: string): boolean {
  if (url.protocol !== entry.protocol) return false;
  if ((url.port || DEFAULT_PORT[entry.protocol]) !== entry.port) return false;
  // No IP address ends with a wildcard entry's domain: a host whose last label is a number is read
  // as IPv4 by the URL parser, so no entry that parsed ends in one.
  const hostMatches = entry.wildcard
    ? host.endsWith(`.${entry.host}`)
    : host === entry.host || (isIP(host) !== 0 && isIP(entry.host) !== 0 && canonicalAddress(host) === canonicalAddress(entry.host));
  return hostMatches && pathStartsWith(url.pathname, entry.pathPrefix);
}

// A prefix matches at a segment boundary: `/oauth2` admits `/oauth2` and `/oauth2/token`, not
// `/oauth2-admin`, which a plain string prefix would let through. Under a prefix an encoded `/` or
// `\` is refused: a server or proxy that decodes it before resolving `..` would turn
// `/oauth2/..%2fadmin` into `/admin`.
function pathStartsWith(path: string, prefix: string): boolean {
  if (prefix === '/') return true;
  if (/%2f|%5c/i.test(path)) return false;
  if (path === prefix) return true;
  const withSlash = prefix.endsWith('/') ? prefix : `${prefix}/`;
  return path.startsWith(withSlash);
}

/** The refusal of an address, whether the policy sees it in the URL or a guarded agent at connect time. */
export const addressNotAllowed = (field: PolicyField): string => `${field} points to an address that is not allowed`;

function stripBrackets(hostname: string): string {
  return hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
}
