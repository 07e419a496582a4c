import { createPublicKey, generateKeyPairSync, sign, verify } from 'node:crypto';
import fc from 'fast-check';
import { awsErrorName, CredentialSourceError } from '../../lambda/credentials/aws-sources';
import { derToJose, publicJwk } from '../../lambda/credentials/jose';

const spki = (key: ReturnType<typeof generateKeyPairSync>['publicKey']) => key.export({ format: 'der', type: 'spki' });

describe('publicJwk', () => {
  it("gives an RSA key the RFC 7638 thumbprint as kid: RFC 7638 3.1's own example", () => {
    // Prepare: the RSA key of RFC 7638 3.1, whose thumbprint the RFC gives.
    const n =
      '0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw';
    const der = createPublicKey({ key: { kty: 'RSA', n, e: 'AQAB' }, format: 'jwk' }).export({ format: 'der', type: 'spki' });

    // Act
    const jwk = publicJwk(der, 'RS256');

    // Assess
    expect(jwk).toEqual({ kty: 'RSA', n, e: 'AQAB', kid: 'NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs', use: 'sig', alg: 'RS256' });
  });

  it('gives a P-256 key its public members only, and a kid from crv, kty, x and y', () => {
    // Prepare
    const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });

    // Act
    const jwk = publicJwk(spki(publicKey), 'ES256');

    // Assess
    expect(Object.keys(jwk).sort()).toEqual(['alg', 'crv', 'kid', 'kty', 'use', 'x', 'y']);
    expect(jwk).toMatchObject({ kty: 'EC', crv: 'P-256', use: 'sig', alg: 'ES256' });
    expect(jwk.kid).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it.each<[string, ReturnType<typeof generateKeyPairSync>, 'RS256' | 'ES256']>([
    ['an EC key for RS256', generateKeyPairSync('ec', { namedCurve: 'P-256' }), 'RS256'],
    ['an RSA key for ES256', generateKeyPairSync('rsa', { modulusLength: 2048 }), 'ES256'],
    ['a secp256k1 key for ES256', generateKeyPairSync('ec', { namedCurve: 'secp256k1' }), 'ES256'],
  ])('refuses %s', (_case, pair, alg) => {
    expect(() => publicJwk(spki(pair.publicKey), alg)).toThrow(new CredentialSourceError('KeyNotForAlgorithm'));
  });
});

describe('derToJose', () => {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });

  it('turns any DER ECDSA signature into the 64-octet R || S that verifies as ieee-p1363 (RFC 7518 3.4)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (message) => {
        const der = sign('sha256', message, { key: privateKey, dsaEncoding: 'der' });
        const jose = derToJose(der);
        expect(jose).toHaveLength(64);
        expect(verify('sha256', message, { key: publicKey, dsaEncoding: 'ieee-p1363' }, jose)).toBe(true);
      }),
      { seed: 11, numRuns: 300 },
    );
  });

  it('pads short integers and drops the zero DER puts before a high bit', () => {
    // r = 0x01 (one octet), s = 0x00 0x80 ... (a high bit, so DER prefixes a zero).
    const s = Buffer.concat([Buffer.of(0x80), Buffer.alloc(31, 7)]);
    const der = Buffer.concat([Buffer.of(0x30, 3 + 35, 0x02, 1, 0x01, 0x02, 33, 0x00), s]);

    expect(derToJose(der)).toEqual(Buffer.concat([Buffer.alloc(31), Buffer.of(1), s]));
  });

  it.each([
    ['no sequence', Buffer.of(0x31, 6, 0x02, 1, 1, 0x02, 1, 1)],
    ['a length that is not the rest', Buffer.of(0x30, 7, 0x02, 1, 1, 0x02, 1, 1)],
    ['no integer first', Buffer.of(0x30, 6, 0x04, 1, 1, 0x02, 1, 1)],
    ['no integer second', Buffer.of(0x30, 6, 0x02, 1, 1, 0x04, 1, 1)],
    ['an empty integer', Buffer.of(0x30, 5, 0x02, 0, 0x02, 1, 1)],
    ['an integer past the end', Buffer.of(0x30, 6, 0x02, 1, 1, 0x02, 9, 1)],
    ['bytes after the second integer', Buffer.of(0x30, 7, 0x02, 1, 1, 0x02, 1, 1, 0)],
    [
      'an integer longer than 32 octets',
      Buffer.concat([Buffer.of(0x30, 3 + 35, 0x02, 33, 0x01), Buffer.alloc(32, 1), Buffer.of(0x02, 1, 1)]),
    ],
    ['nothing at all', Buffer.alloc(0)],
    ['a sequence that ends after its first integer', Buffer.of(0x30, 3, 0x02, 1, 1)],
  ])('refuses %s', (_case, der) => {
    expect(() => derToJose(der)).toThrow(new CredentialSourceError('SignatureUnusable'));
  });
});

describe('awsErrorName', () => {
  it.each<[string, unknown, string]>([
    [
      'an SDK exception',
      Object.assign(new Error('User: arn:aws:sts::1:assumed-role/x is not authorized'), { name: 'AccessDeniedException' }),
      'AccessDeniedException',
    ],
    ["one of the broker's own", new CredentialSourceError('SecretUnusable'), 'SecretUnusable'],
    ['a name that could carry text', Object.assign(new Error(), { name: 'Access denied for arn:aws:iam::1:role/x' }), 'Error'],
    ['nothing at all', undefined, 'Error'],
    ['a name of 64 characters', Object.assign(new Error(), { name: 'E'.repeat(64) }), 'E'.repeat(64)],
    ['a name of 65 characters', Object.assign(new Error(), { name: 'E'.repeat(65) }), 'Error'],
  ])('names %s by its name alone, never its message', (_case, error, name) => {
    expect(awsErrorName(error)).toBe(name);
  });
});
