import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface LocalCert {
  /** PEM file the child processes trust through NODE_EXTRA_CA_CERTS. */
  readonly certPath: string;
  readonly cert: Buffer;
  readonly key: Buffer;
}

/**
 * A throwaway ECDSA P-256 self-signed certificate for 127.0.0.1, made with the openssl CLI in `dir`
 * at run time so no key is ever committed. It lives one day; the bench deletes `dir` when done.
 */
export function createLocalCert(dir: string): LocalCert {
  const certPath = join(dir, 'cert.pem');
  const keyPath = join(dir, 'key.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      keyPath,
      '-out',
      certPath,
      '-days',
      '1',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  return { certPath, cert: readFileSync(certPath), key: readFileSync(keyPath) };
}
