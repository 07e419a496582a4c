import type * as Kms from '@aws-sdk/client-kms';
import { base64url } from '../request/client-assertion';
import { SHARED_READ_LIMIT_MS, SharedReads, sourceError, withinDeadline } from './aws-sources';
import { derToJose, type PublicJwk, publicJwk, type SigningAlg } from './jose';

/** Asymmetric KMS keys that sign `private_key_jwt` assertions; their private halves never leave KMS. */
export interface KeyRing {
  /** The key's public JWK (`kid`: its RFC 7638 thumbprint): read once per instance, then kept. */
  publicKey(keyId: string, deadline: number): Promise<PublicJwk>;
  /** A compact JWS (RFC 7515) of the claims, signed inside KMS with the key's algorithm, `kid` in its header. */
  signJwt(keyId: string, claims: object, deadline: number): Promise<string>;
}

/** What each key spec signs as (RFC 7518 3.3 and 3.4), and KMS's name for that algorithm. */
const ALGORITHMS: Readonly<Record<string, { alg: SigningAlg; kms: Kms.SigningAlgorithmSpec }>> = {
  RSA_2048: { alg: 'RS256', kms: 'RSASSA_PKCS1_V1_5_SHA_256' },
  RSA_3072: { alg: 'RS256', kms: 'RSASSA_PKCS1_V1_5_SHA_256' },
  RSA_4096: { alg: 'RS256', kms: 'RSASSA_PKCS1_V1_5_SHA_256' },
  ECC_NIST_P256: { alg: 'ES256', kms: 'ECDSA_SHA_256' },
};

/**
 * KMS through the AWS SDK, configured the standard way (AWS_ENDPOINT_URL_KMS points it at a local
 * stand-in). The SDK module loads only when a stored credential has a key, and every key's public
 * half starts loading as the function initialises: the JWKS and the first signature need it.
 */
export function kmsKeyRing(keyIds: readonly string[]): KeyRing {
  /* eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded only when a credential has a key */
  const { GetPublicKeyCommand, KMSClient, SignCommand } = require('@aws-sdk/client-kms') as typeof Kms;
  const client = new KMSClient({ maxAttempts: 2 });
  const keys = new SharedReads(async (keyId) => {
    const key = await client.send(new GetPublicKeyCommand({ KeyId: keyId }), { abortSignal: AbortSignal.timeout(SHARED_READ_LIMIT_MS) });
    const algorithm = ALGORITHMS[String(key.KeySpec)];
    if (!algorithm || key.KeyUsage !== 'SIGN_VERIFY') throw sourceError('KeyNotForSigning');
    return { algorithm, jwk: publicJwk(key.PublicKey as Uint8Array, algorithm.alg) };
  });
  for (const keyId of keyIds) keys.get(keyId).catch(() => undefined);
  return {
    publicKey: async (keyId, deadline) => (await withinDeadline(keys.get(keyId), deadline)).jwk,
    async signJwt(keyId, claims, deadline) {
      const { algorithm, jwk } = await withinDeadline(keys.get(keyId), deadline);
      const input = `${base64url({ alg: algorithm.alg, typ: 'JWT', kid: jwk.kid })}.${base64url(claims)}`;
      // KMS is not waited for past the deadline, and is told so: the call is aborted then too.
      const sign = new SignCommand({ KeyId: keyId, Message: Buffer.from(input), MessageType: 'RAW', SigningAlgorithm: algorithm.kms });
      const abortSignal = AbortSignal.timeout(Math.max(1, Math.ceil(deadline - performance.now())));
      const signing = client
        .send(sign, { abortSignal })
        .then(({ Signature: der }) => (algorithm.alg === 'ES256' ? derToJose(der as Uint8Array) : Buffer.from(der as Uint8Array)));
      return `${input}.${(await withinDeadline(signing, deadline)).toString('base64url')}`;
    },
  };
}
