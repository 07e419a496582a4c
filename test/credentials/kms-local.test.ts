import { createPublicKey, verify } from 'node:crypto';
import { GetPublicKeyCommand, KMSClient, SignCommand, type SigningAlgorithmSpec } from '@aws-sdk/client-kms';
import { type LocalKms, startLocalKms } from '../../local/kms-local';

// The KMS stand-in of npm start and the tests, spoken to by the real SDK client: if these pass, the
// function's KMS calls against it are the calls it makes against KMS.

let kms: LocalKms;
let client: KMSClient;

beforeAll(async () => {
  kms = await startLocalKms();
  client = new KMSClient({ endpoint: kms.endpoint, region: 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
});

afterAll(async () => {
  client.destroy();
  await kms.close();
});

const message = Buffer.from('eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0');

describe('the KMS stand-in, through the AWS SDK', () => {
  it('gives an RSA_2048 key as DER SubjectPublicKeyInfo with its spec, usage and signing algorithm', async () => {
    // Prepare
    const key = kms.createKey('RSA_2048');

    // Act
    const answer = await client.send(new GetPublicKeyCommand({ KeyId: key.keyId }));

    // Assess
    expect(answer).toMatchObject({
      KeyId: key.arn,
      KeySpec: 'RSA_2048',
      KeyUsage: 'SIGN_VERIFY',
      SigningAlgorithms: ['RSASSA_PKCS1_V1_5_SHA_256'],
    });
    const publicKey = createPublicKey({ key: Buffer.from(answer.PublicKey as Uint8Array), format: 'der', type: 'spki' });
    expect(publicKey.asymmetricKeyDetails?.modulusLength).toBe(2048);
  });

  it('signs a RAW message with RSASSA-PKCS1-v1_5 SHA-256, by key id, ARN or alias', async () => {
    // Prepare
    const key = kms.createKey('RSA_2048', 'alias/stand-in-rsa');
    const { PublicKey } = await client.send(new GetPublicKeyCommand({ KeyId: 'alias/stand-in-rsa' }));
    const publicKey = createPublicKey({ key: Buffer.from(PublicKey as Uint8Array), format: 'der', type: 'spki' });

    // Act
    const signatures = await Promise.all(
      [key.keyId, key.arn, 'alias/stand-in-rsa'].map((KeyId) =>
        client.send(new SignCommand({ KeyId, Message: message, MessageType: 'RAW', SigningAlgorithm: 'RSASSA_PKCS1_V1_5_SHA_256' })),
      ),
    );

    // Assess
    for (const signed of signatures) {
      expect(signed.KeyId).toBe(key.arn);
      expect(verify('sha256', message, publicKey, Buffer.from(signed.Signature as Uint8Array))).toBe(true);
    }
  });

  it('signs with ECDSA SHA-256 on P-256 and returns the signature in DER, as KMS does', async () => {
    // Prepare
    const key = kms.createKey('ECC_NIST_P256');
    const { PublicKey, KeySpec } = await client.send(new GetPublicKeyCommand({ KeyId: key.arn }));
    const publicKey = createPublicKey({ key: Buffer.from(PublicKey as Uint8Array), format: 'der', type: 'spki' });

    // Act
    const { Signature } = await client.send(new SignCommand({ KeyId: key.arn, Message: message, SigningAlgorithm: 'ECDSA_SHA_256' }));

    // Assess
    expect(KeySpec).toBe('ECC_NIST_P256');
    expect(Signature?.[0]).toBe(0x30);
    expect(verify('sha256', message, { key: publicKey, dsaEncoding: 'der' }, Buffer.from(Signature as Uint8Array))).toBe(true);
  });

  it.each<[string, () => string, SigningAlgorithmSpec, string]>([
    ['an unknown key', () => 'no-such-key', 'RSASSA_PKCS1_V1_5_SHA_256', 'NotFoundException'],
    ["another key type's algorithm", () => kms.createKey('RSA_2048').keyId, 'ECDSA_SHA_256', 'InvalidKeyUsageException'],
    [
      'a key made for encryption',
      () => kms.createKey('RSA_2048', undefined, 'ENCRYPT_DECRYPT').keyId,
      'RSASSA_PKCS1_V1_5_SHA_256',
      'InvalidKeyUsageException',
    ],
  ])('refuses to sign with %s, as KMS does', async (_case, keyId, algorithm, error) => {
    await expect(client.send(new SignCommand({ KeyId: keyId(), Message: message, SigningAlgorithm: algorithm }))).rejects.toMatchObject({
      name: error,
    });
  });

  it('refuses a DIGEST message, which it cannot sign as KMS would', async () => {
    // Prepare
    const key = kms.createKey('ECC_NIST_P256');

    // Act & Assess
    await expect(
      client.send(
        new SignCommand({ KeyId: key.keyId, Message: Buffer.alloc(32), MessageType: 'DIGEST', SigningAlgorithm: 'ECDSA_SHA_256' }),
      ),
    ).rejects.toMatchObject({ name: 'ValidationException' });
  });

  it('answers with the error it is told to, until told otherwise', async () => {
    // Prepare
    const key = kms.createKey('RSA_2048');
    kms.behave('GetPublicKey', { errorType: 'KMSInternalException' });

    // Act
    const failed = client.send(new GetPublicKeyCommand({ KeyId: key.keyId }));
    await expect(failed).rejects.toMatchObject({ name: 'KMSInternalException' });
    kms.behave('GetPublicKey', {});

    // Assess
    await expect(client.send(new GetPublicKeyCommand({ KeyId: key.keyId }))).resolves.toMatchObject({ KeyId: key.arn });
  });
});
