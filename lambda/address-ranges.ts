import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

// NAT64 well-known prefix (RFC 6052): the last 32 bits are an IPv4 address that a translator will
// reach, so 64:ff9b::7f00:1 is 127.0.0.1 in disguise. The local-use prefix 64:ff9b:1::/48 (RFC 8215)
// only ever leads inside the network, so it is never public.
const NAT64_WELL_KNOWN = ipaddr.parseCIDR('64:ff9b::/96');
// Only 2000::/3 is global unicast (RFC 4291 2.4). ipaddr.js files the rest of the unassigned space,
// including the deprecated IPv4-compatible form ::a.b.c.d that URL parsers produce from
// `[::127.0.0.1]`, under plain "unicast".
const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');

/**
 * True only for a globally routable unicast address. Everything ipaddr.js files under another
 * range is refused: loopback, private, link-local, unique-local, carrier-grade NAT, multicast,
 * broadcast, unspecified, documentation and other reserved blocks, 6to4 and Teredo (which embed
 * an IPv4 address of the sender's choosing). IPv4-mapped and NAT64 addresses are judged by the
 * IPv4 address they carry.
 */
export function isPublicUnicast(address: string): boolean {
  if (isIP(address) === 0) return false;
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6') {
    const v6 = parsed as ipaddr.IPv6;
    if (v6.isIPv4MappedAddress()) {
      parsed = v6.toIPv4Address();
    } else if (v6.match(NAT64_WELL_KNOWN)) {
      const bytes = v6.toByteArray().slice(12);
      parsed = new ipaddr.IPv4(bytes);
    }
  }
  if (parsed.kind() === 'ipv6' && !(parsed as ipaddr.IPv6).match(GLOBAL_UNICAST_V6)) return false;
  return parsed.range() === 'unicast';
}

/** True for an address in 127.0.0.0/8, ::1, or an IPv4-mapped form of the former. */
export function isLoopback(address: string): boolean {
  if (isIP(address) === 0) return false;
  return ipaddr.process(address).range() === 'loopback';
}

/** Canonical text of an IP literal, so `::0001` and `::1` compare equal. */
export function canonicalAddress(address: string): string {
  return ipaddr.process(address).toNormalizedString();
}
