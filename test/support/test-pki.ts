import { createHash, generateKeyPairSync, type KeyObject, randomBytes, sign, X509Certificate } from 'node:crypto';

/** A certificate and its private key, both PEM, as `https.createServer` takes them. */
export interface Credentials {
  readonly cert: string;
  readonly key: string;
}

/** A certificate authority made for one test run; its key never leaves memory. */
export interface TestCa {
  /** The CA's own certificate, PEM: what a process is told to trust. */
  readonly cert: string;
  /** A server certificate for `dnsNames`, signed by this CA. */
  issue(dnsNames: readonly string[]): Credentials;
}

// RFC 5280 object identifiers used below.
const OID = {
  commonName: '2.5.4.3',
  ecdsaWithSha256: '1.2.840.10045.4.3.2',
  basicConstraints: '2.5.29.19',
  keyUsage: '2.5.29.15',
  extKeyUsage: '2.5.29.37',
  subjectAltName: '2.5.29.17',
  subjectKeyIdentifier: '2.5.29.14',
  authorityKeyIdentifier: '2.5.29.35',
  serverAuth: '1.3.6.1.5.5.7.3.1',
} as const;

/**
 * A throwaway CA (ECDSA P-256) whose certificates live one day. Made with node:crypto and the few
 * DER encoders below rather than the openssl CLI or an X.509 package: no tool to install in CI, no
 * dependency tree, nothing written to disk. Node's TLS stack verifying the chain is what proves
 * the encoding right.
 */
export function createTestCa(name: string): TestCa {
  const ca = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const cert = certificate({
    issuer: name,
    subject: name,
    subjectKey: ca.publicKey,
    signingKey: ca.privateKey,
    issuerKey: ca.publicKey,
    extensions: [
      extension(OID.basicConstraints, true, sequence(boolean(true))),
      // keyCertSign and cRLSign (RFC 5280 4.2.1.3: bits 5 and 6).
      extension(OID.keyUsage, true, der(0x03, Buffer.from([0x01, 0x06]))),
    ],
  });
  return {
    cert,
    issue(dnsNames) {
      const server = generateKeyPairSync('ec', { namedCurve: 'P-256' });
      const leaf = certificate({
        issuer: name,
        subject: dnsNames[0] ?? 'server',
        subjectKey: server.publicKey,
        signingKey: ca.privateKey,
        issuerKey: ca.publicKey,
        extensions: [
          extension(OID.basicConstraints, true, sequence()),
          // digitalSignature (bit 0).
          extension(OID.keyUsage, true, der(0x03, Buffer.from([0x07, 0x80]))),
          extension(OID.extKeyUsage, false, sequence(objectId(OID.serverAuth))),
          // dNSName is [2] IMPLICIT IA5String (RFC 5280 4.2.1.6).
          extension(OID.subjectAltName, false, sequence(...dnsNames.map((dns) => der(0x82, Buffer.from(dns, 'ascii'))))),
        ],
      });
      return { cert: leaf, key: server.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() };
    },
  };
}

interface CertificateFields {
  issuer: string;
  subject: string;
  subjectKey: KeyObject;
  /** The issuer's private key, which signs. */
  signingKey: KeyObject;
  /** The issuer's public key, which the authority key identifier names. */
  issuerKey: KeyObject;
  extensions: Buffer[];
}

/** An X.509 v3 certificate (RFC 5280 4.1), returned as PEM. */
function certificate(fields: CertificateFields): string {
  const now = Date.now();
  const serial = randomBytes(16);
  serial[0] = ((serial[0] ?? 0) & 0x7f) | 0x40; // positive, and no leading zero byte to strip
  const algorithm = sequence(objectId(OID.ecdsaWithSha256));
  const tbs = sequence(
    der(0xa0, integer(Buffer.from([2]))), // version v3
    integer(serial),
    algorithm,
    distinguishedName(fields.issuer),
    sequence(utcTime(new Date(now - 3_600_000)), utcTime(new Date(now + 86_400_000))),
    distinguishedName(fields.subject),
    fields.subjectKey.export({ type: 'spki', format: 'der' }),
    der(
      0xa3,
      sequence(
        ...fields.extensions,
        // The key identifiers link the chain (RFC 5280 4.2.1.1, 4.2.1.2); OpenSSL's strict mode wants them.
        extension(OID.subjectKeyIdentifier, false, der(0x04, keyId(fields.subjectKey))),
        extension(OID.authorityKeyIdentifier, false, sequence(der(0x80, keyId(fields.issuerKey)))),
      ),
    ),
  );
  const signature = sign('sha256', tbs, fields.signingKey); // DER ECDSA-Sig-Value
  const encoded = sequence(tbs, algorithm, der(0x03, Buffer.concat([Buffer.from([0]), signature])));
  return new X509Certificate(encoded).toString();
}

/** SHA-1 of the public key's bits (RFC 5280 4.2.1.2, method 1): the uncompressed EC point. */
function keyId(publicKey: KeyObject): Buffer {
  const { x = '', y = '' } = publicKey.export({ format: 'jwk' });
  const point = Buffer.concat([Buffer.from([0x04]), Buffer.from(x, 'base64url'), Buffer.from(y, 'base64url')]);
  return createHash('sha1').update(point).digest();
}

// DER (ITU-T X.690): tag, definite length, contents.
function der(tag: number, ...contents: Buffer[]): Buffer {
  const body = Buffer.concat(contents);
  const length = body.length;
  const lengthBytes = length < 0x80 ? [length] : length < 0x100 ? [0x81, length] : [0x82, length >> 8, length & 0xff];
  return Buffer.concat([Buffer.from([tag, ...lengthBytes]), body]);
}

const sequence = (...items: Buffer[]): Buffer => der(0x30, ...items);
const boolean = (value: boolean): Buffer => der(0x01, Buffer.from([value ? 0xff : 0x00]));
// The bytes must already be a minimal, positive two's-complement number.
const integer = (bytes: Buffer): Buffer => der(0x02, bytes);

function objectId(dotted: string): Buffer {
  const [first = 0, second = 0, ...rest] = dotted.split('.').map(Number);
  const bytes = [first * 40 + second];
  for (const arc of rest) {
    const base128 = [arc & 0x7f];
    for (let value = arc >>> 7; value > 0; value >>>= 7) base128.unshift((value & 0x7f) | 0x80);
    bytes.push(...base128);
  }
  return der(0x06, Buffer.from(bytes));
}

function utcTime(date: Date): Buffer {
  // YYMMDDHHMMSSZ (RFC 5280 4.1.2.5.1), for dates before 2050.
  const text = date.toISOString().replace(/[-:T]/g, '').slice(2, 14) + 'Z';
  return der(0x17, Buffer.from(text, 'ascii'));
}

function distinguishedName(commonName: string): Buffer {
  return sequence(der(0x31, sequence(objectId(OID.commonName), der(0x0c, Buffer.from(commonName, 'utf8')))));
}

function extension(oid: string, critical: boolean, value: Buffer): Buffer {
  return sequence(objectId(oid), ...(critical ? [boolean(true)] : []), der(0x04, value));
}
