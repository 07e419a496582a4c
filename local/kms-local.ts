import { generateKeyPairSync, type KeyObject, randomUUID, sign } from 'node:crypto';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { answerJson, readJson } from './aws-json-protocol';

/** The key specs the stand-in makes: the two the broker signs with, and one it refuses (secp256k1). */
export type LocalKeySpec = 'RSA_2048' | 'ECC_NIST_P256' | 'ECC_SECG_P256K1';

/** How the stand-in answers an operation: with an AWS error, and after a delay. */
export interface Behaviour {
  readonly errorType?: string;
  readonly delayMs?: number;
}

export interface LocalKey {
  readonly keyId: string;
  readonly arn: string;
}

export interface LocalKms {
  /** `http://127.0.0.1:PORT`, for AWS_ENDPOINT_URL_KMS. */
  readonly endpoint: string;
  /**
   * Make an asymmetric key, reachable by its id, its ARN and `alias` (`alias/NAME`) if given; for
   * signing unless `usage` says `ENCRYPT_DECRYPT`, as an RSA key made for encryption would.
   */
  createKey(spec: LocalKeySpec, alias?: string, usage?: 'SIGN_VERIFY' | 'ENCRYPT_DECRYPT'): LocalKey;
  /** The operations received so far (`Sign`, `GetPublicKey`), in order. */
  readonly calls: string[];
  /** How every call of `operation` is answered from now on; `{}` answers normally again. */
  behave(operation: 'Sign' | 'GetPublicKey', behaviour: Behaviour): void;
  close(): Promise<void>;
}

interface Key {
  readonly arn: string;
  readonly spec: LocalKeySpec;
  readonly usage: 'SIGN_VERIFY' | 'ENCRYPT_DECRYPT';
  readonly privateKey: KeyObject;
  readonly publicDer: Buffer;
}

const ACCOUNT = '000000000000';
const REGION = 'us-east-1';
// What KMS signs with for each spec, as its SigningAlgorithmSpec names it.
const ALGORITHMS: Record<LocalKeySpec, string[]> = {
  RSA_2048: ['RSASSA_PKCS1_V1_5_SHA_256'],
  ECC_NIST_P256: ['ECDSA_SHA_256'],
  ECC_SECG_P256K1: ['ECDSA_SHA_256'],
};
const CURVES = { ECC_NIST_P256: 'P-256', ECC_SECG_P256K1: 'secp256k1' } as const;

/**
 * A loopback stand-in for AWS KMS's asymmetric signing (the JSON 1.1 protocol the SDK's client speaks:
 * `TrentService.GetPublicKey` and `TrentService.Sign`, RAW messages), with keys made by node:crypto.
 * Like KMS it returns the public key as DER SubjectPublicKeyInfo and an ECDSA signature as DER; the
 * private keys never leave this process. What `npm start` and the tests use instead of an AWS account.
 */
export async function startLocalKms(): Promise<LocalKms> {
  const keys = new Map<string, Key>();
  const calls: string[] = [];
  const behaviours = new Map<string, Behaviour>();
  const server = createServer((request, response) => {
    void readJson(request).then(async (body) => {
      const answer = (status: number, payload: object) => answerJson(response, status, payload);
      const error = (type: string, message: string) => answer(400, { __type: type, message });
      const operation = String(request.headers['x-amz-target']).replace(/^TrentService\./, '');
      if (operation !== 'Sign' && operation !== 'GetPublicKey')
        return error('UnknownOperationException', 'Only Sign and GetPublicKey are served here');
      calls.push(operation);
      const { errorType, delayMs = 0 } = behaviours.get(operation) ?? {};
      await sleep(delayMs);
      if (errorType !== undefined) return error(errorType, `${operation} fails here, as asked`);
      const key = keys.get(String(body.KeyId));
      if (!key) return error('NotFoundException', 'Invalid keyId');
      if (operation === 'GetPublicKey') {
        return answer(200, {
          KeyId: key.arn,
          PublicKey: key.publicDer.toString('base64'),
          KeySpec: key.spec,
          CustomerMasterKeySpec: key.spec,
          KeyUsage: key.usage,
          ...(key.usage === 'SIGN_VERIFY' ? { SigningAlgorithms: ALGORITHMS[key.spec] } : { EncryptionAlgorithms: ['RSAES_OAEP_SHA_256'] }),
        });
      }
      if (key.usage !== 'SIGN_VERIFY' || !ALGORITHMS[key.spec].includes(String(body.SigningAlgorithm))) {
        return error('InvalidKeyUsageException', 'The key cannot sign with this algorithm');
      }
      if (body.MessageType !== undefined && body.MessageType !== 'RAW')
        return error('ValidationException', 'Only RAW messages are signed here');
      const message = Buffer.from(String(body.Message), 'base64');
      if (message.length === 0 || message.length > 4096) return error('ValidationException', 'Message must be 1 to 4096 bytes');
      // DER for ECDSA, as KMS returns it; PKCS #1 v1.5 for RSA.
      const signature = sign('sha256', message, { key: key.privateKey, dsaEncoding: 'der' });
      return answer(200, { KeyId: key.arn, Signature: signature.toString('base64'), SigningAlgorithm: body.SigningAlgorithm });
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    createKey(spec, alias, usage = 'SIGN_VERIFY') {
      const keyId = randomUUID();
      const arn = `arn:aws:kms:${REGION}:${ACCOUNT}:key/${keyId}`;
      const { privateKey, publicKey } =
        spec === 'RSA_2048' ? generateKeyPairSync('rsa', { modulusLength: 2048 }) : generateKeyPairSync('ec', { namedCurve: CURVES[spec] });
      const key: Key = { arn, spec, usage, privateKey, publicDer: publicKey.export({ format: 'der', type: 'spki' }) };
      for (const name of [keyId, arn, ...(alias ? [alias, `arn:aws:kms:${REGION}:${ACCOUNT}:${alias}`] : [])]) keys.set(name, key);
      return { keyId, arn };
    },
    calls,
    behave(operation, behaviour) {
      behaviours.set(operation, behaviour);
    },
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}
