import { KMS } from '../aws/endpoints';
import { awsJsonClient } from '../aws/json-client';
import { type Clock, Deadline } from '../clock';
import { base64url } from '../request/client-assertion';
import { CALL_LIMIT_MS, SharedReads, sourceError, withinDeadline } from './aws-sources';
import { derToJose, type PublicJwk, publicJwk, type SigningAlg } from './jose';

/** Asymmetric KMS keys that sign `private_key_jwt` assertions; their private halves never leave KMS. */
export interface KeyRing {
  /** Start reading a key's public half now, as the function initialises: the JWKS and the first signature need it. */
  prefetch(keyId: string): void;
  /** The key's public JWK (`kid`: its RFC 7638 thumbprint): read once per instance, then kept. */
  publicKey(keyId: string, deadline: Deadline): Promise<PublicJwk>;
  /** A compact JWS (RFC 7515) of the claims, signed inside KMS with the key's algorithm, `kid` in its header. */
  signJwt(keyId: string, claims: object, deadline: Deadline): Promise<string>;
}

/** What a key spec signs as (RFC 7518 3.3 and 3.4), and KMS's name for that algorithm; undefined for a spec no JWS algorithm here fits. */
function algorithmOf(keySpec: unknown): { alg: SigningAlg; kms: string } | undefined {
  if (typeof keySpec === 'string' && keySpec.startsWith('RSA_')) return { alg: 'RS256', kms: 'RSASSA_PKCS1_V1_5_SHA_256' };
  return keySpec === 'ECC_NIST_P256' ? { alg: 'ES256', kms: 'ECDSA_SHA_256' } : undefined;
}

/** A base64 blob of KMS's JSON answer, as bytes; an answer without it is not one KMS gives. */
function blob(value: unknown): Buffer {
  if (typeof value !== 'string') throw sourceError('AnswerNotKms');
  return Buffer.from(value, 'base64');
}

/**
 * KMS, configured the standard way (AWS_ENDPOINT_URL_KMS points it at a local stand-in). Called only
 * when a stored credential has a key.
 */
export function kmsKeyRing(clock: Clock, env: NodeJS.ProcessEnv = process.env): KeyRing {
  const client = awsJsonClient(KMS, env, clock);
  const keys = new SharedReads(async (keyId) => {
    // KMS is regional: a key named by an ARN of another region is not found from this one, so none is asked.
    const region = /^arn:[^:]+:kms:([^:]*):/.exec(keyId)?.[1];
    if (region !== undefined && region !== env.AWS_REGION) throw sourceError('KeyInAnotherRegion');
    const key = await client.call('GetPublicKey', { KeyId: keyId }, Deadline.after(clock, CALL_LIMIT_MS));
    const algorithm = algorithmOf(key.KeySpec);
    if (!algorithm || key.KeyUsage !== 'SIGN_VERIFY') throw sourceError('KeyNotForSigning');
    return { algorithm, jwk: publicJwk(blob(key.PublicKey), algorithm.alg) };
  });
  return {
    prefetch: (keyId) => void keys.get(keyId).catch(() => undefined),
    publicKey: async (keyId, deadline) => (await withinDeadline(keys.get(keyId), deadline)).jwk,
    async signJwt(keyId, claims, deadline) {
      const { algorithm, jwk } = await withinDeadline(keys.get(keyId), deadline);
      const input = `${base64url({ alg: algorithm.alg, typ: 'JWT', kid: jwk.kid })}.${base64url(claims)}`;
      const sign = { KeyId: keyId, Message: Buffer.from(input).toString('base64'), MessageType: 'RAW', SigningAlgorithm: algorithm.kms };
      const signing = client
        .call('Sign', sign, Deadline.after(clock, CALL_LIMIT_MS))
        .then(({ Signature: signature }) => (algorithm.alg === 'ES256' ? derToJose(blob(signature)) : blob(signature)));
      return `${input}.${(await withinDeadline(signing, deadline)).toString('base64url')}`;
    },
  };
}
