import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

// Both IPv6 ranges below are matched on the address's 16-bit groups rather than parsed from CIDR
// text when the module loads: ipaddr.js's IPv6 parser costs milliseconds of a cold start the first
// time it runs, and most token URLs resolve to IPv4.

// NAT64 well-known prefix 64:ff9b::/96 (RFC 6052): the last 32 bits are an IPv4 address that a
// translator will reach, so 64:ff9b::7f00:1 is 127.0.0.1 in disguise. The local-use prefix
// 64:ff9b:1::/48 (RFC 8215) only ever leads inside the network, so it is never public.
const isNat64WellKnown = ({ parts }: ipaddr.IPv6): boolean =>
  parts[0] === 0x64 && parts[1] === 0xff9b && parts.slice(2, 6).every((group) => group === 0);

// Only 2000::/3 is global unicast (RFC 4291 2.4): the first three bits are 001. ipaddr.js files the
// rest of the unassigned space, including the deprecated IPv4-compatible form ::a.b.c.d that URL
// parsers produce from `[::127.0.0.1]`, under plain "unicast".
const isGlobalUnicastV6 = ({ parts }: ipaddr.IPv6): boolean => ((parts[0] as number) & 0xe000) === 0x2000;

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
    } else if (isNat64WellKnown(v6)) {
      const bytes = v6.toByteArray().slice(12);
      parsed = new ipaddr.IPv4(bytes);
    }
  }
  if (parsed.kind() === 'ipv6' && !isGlobalUnicastV6(parsed as ipaddr.IPv6)) return false;
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
