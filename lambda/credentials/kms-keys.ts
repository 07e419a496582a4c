import type * as Kms from '@aws-sdk/client-kms';
import { base64url } from '../request/client-assertion';
import { CALL_LIMIT_MS, SharedReads, sourceError, withinDeadline } from './aws-sources';
import { derToJose, type PublicJwk, publicJwk, type SigningAlg } from './jose';

/** Asymmetric KMS keys that sign `private_key_jwt` assertions; their private halves never leave KMS. */
export interface KeyRing {
  /** Start reading a key's public half now, as the function initialises: the JWKS and the first signature need it. */
  prefetch(keyId: string): void;
  /** The key's public JWK (`kid`: its RFC 7638 thumbprint): read once per instance, then kept. */
  publicKey(keyId: string, deadline: number): Promise<PublicJwk>;
  /** A compact JWS (RFC 7515) of the claims, signed inside KMS with the key's algorithm, `kid` in its header. */
  signJwt(keyId: string, claims: object, deadline: number): Promise<string>;
}

/** What a key spec signs as (RFC 7518 3.3 and 3.4), and KMS's name for that algorithm; undefined for a spec no JWS algorithm here fits. */
function algorithmOf(keySpec: string | undefined): { alg: SigningAlg; kms: Kms.SigningAlgorithmSpec } | undefined {
  if (keySpec?.startsWith('RSA_')) return { alg: 'RS256', kms: 'RSASSA_PKCS1_V1_5_SHA_256' };
  return keySpec === 'ECC_NIST_P256' ? { alg: 'ES256', kms: 'ECDSA_SHA_256' } : undefined;
}

/**
 * KMS through the AWS SDK, configured the standard way (AWS_ENDPOINT_URL_KMS points it at a local
 * stand-in). Called only when a stored credential has a key: the SDK module loads with it.
 */
export function kmsKeyRing(): KeyRing {
  /* eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded only when a credential has a key */
  const { GetPublicKeyCommand, KMSClient, SignCommand } = require('@aws-sdk/client-kms') as typeof Kms;
  const client = new KMSClient({ maxAttempts: 2 });
  const keys = new SharedReads(async (keyId) => {
    const key = await client.send(new GetPublicKeyCommand({ KeyId: keyId }), { abortSignal: AbortSignal.timeout(CALL_LIMIT_MS) });
    const algorithm = algorithmOf(key.KeySpec);
    if (!algorithm || key.KeyUsage !== 'SIGN_VERIFY') throw sourceError('KeyNotForSigning');
    return { algorithm, jwk: publicJwk(key.PublicKey as Uint8Array, algorithm.alg) };
  });
  return {
    prefetch: (keyId) => void keys.get(keyId).catch(() => undefined),
    publicKey: async (keyId, deadline) => (await withinDeadline(keys.get(keyId), deadline)).jwk,
    async signJwt(keyId, claims, deadline) {
      const { algorithm, jwk } = await withinDeadline(keys.get(keyId), deadline);
      const input = `${base64url({ alg: algorithm.alg, typ: 'JWT', kid: jwk.kid })}.${base64url(claims)}`;
      const sign = new SignCommand({ KeyId: keyId, Message: Buffer.from(input), MessageType: 'RAW', SigningAlgorithm: algorithm.kms });
      const signing = client
        .send(sign, { abortSignal: AbortSignal.timeout(CALL_LIMIT_MS) })
        .then(({ Signature: der }) => (algorithm.alg === 'ES256' ? derToJose(der as Uint8Array) : Buffer.from(der as Uint8Array)));
      return `${input}.${(await withinDeadline(signing, deadline)).toString('base64url')}`;
    },
  };
}
