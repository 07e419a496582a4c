import { canonicalAddress, isLoopback, isPublicUnicast } from '../lambda/policy/address-ranges';

describe('isPublicUnicast', () => {
  it.each([
    '8.8.8.8',
    '1.1.1.1',
    '2606:4700::1111',
    '2a00:1450:4009::200e',
    '::ffff:8.8.8.8',
    '64:ff9b::808:808',
    // Both ends of 2000::/3.
    '2000::1',
    '3fff:ffff::1',
  ])('accepts the globally routable %s', (address) => {
    expect(isPublicUnicast(address)).toBe(true);
  });

  it.each([
    ['loopback', '127.0.0.1'],
    ['private', '10.1.2.3'],
    ['private', '172.31.255.255'],
    ['private', '192.168.0.1'],
    ['link-local (instance metadata)', '169.254.169.254'],
    ['carrier-grade NAT', '100.64.0.1'],
    ['unspecified', '0.0.0.0'],
    ['this network', '0.1.2.3'],
    ['broadcast', '255.255.255.255'],
    ['multicast', '224.0.0.1'],
    ['IETF protocol assignments', '192.0.0.1'],
    ['documentation', '203.0.113.7'],
    ['benchmarking', '198.18.0.1'],
    ['reserved', '240.0.0.1'],
    ['IPv6 loopback', '::1'],
    ['IPv6 unspecified', '::'],
    ['IPv6 unique-local (EC2 metadata)', 'fd00:ec2::254'],
    ['IPv6 link-local', 'fe80::1'],
    ['IPv6 multicast', 'ff02::1'],
    ['IPv6 documentation', '2001:db8::1'],
    ['IPv4-mapped loopback', '::ffff:127.0.0.1'],
    ['IPv4-mapped metadata', '::ffff:169.254.169.254'],
    ['NAT64 of loopback', '64:ff9b::7f00:1'],
    ['local-use NAT64', '64:ff9b:1::a00:1'],
    ['IPv4-compatible (deprecated) loopback', '::7f00:1'],
    ['unassigned IPv6 above 2000::/3', '4000::1'],
    ['unassigned IPv6 below 2000::/3', '1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff'],
    ['local-use NAT64 of a public address', '64:ff9b:1::808:808'],
    ['a public address under a prefix one group off NAT64 (first group)', '65:ff9b::808:808'],
    ['a public address under a prefix one group off NAT64 (second group)', '64:ff9a::808:808'],
    ['a public address under 64:ff9b:: outside its /96', '64:ff9b:0:0:0:1:808:808'],
    ['6to4', '2002:7f00:1::'],
    ['Teredo', '2001::1'],
  ])('refuses %s %s', (_kind, address) => {
    expect(isPublicUnicast(address)).toBe(false);
  });

  it('refuses anything that is not an IP address', () => {
    expect(isPublicUnicast('example.com')).toBe(false);
    expect(isPublicUnicast('')).toBe(false);
  });
});

describe('isLoopback', () => {
  it.each(['127.0.0.1', '127.255.0.9', '::1', '::ffff:127.0.0.1'])('is true for %s', (address) => {
    expect(isLoopback(address)).toBe(true);
  });

  it.each(['10.0.0.1', '::', 'localhost'])('is false for %s', (address) => {
    expect(isLoopback(address)).toBe(false);
  });
});

describe('canonicalAddress', () => {
  it('gives one spelling per address', () => {
    expect(canonicalAddress('::0001')).toBe(canonicalAddress('::1'));
    expect(canonicalAddress('::ffff:7f00:1')).toBe('127.0.0.1');
  });
});
