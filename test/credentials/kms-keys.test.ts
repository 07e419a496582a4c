import { Deadline, systemClock } from '../../lambda/clock';
import { generateKeyPairSync } from 'node:crypto';
import type { CredentialSourceError } from '../../lambda/credentials/aws-sources';
import { kmsKeyRing } from '../../lambda/credentials/kms-keys';
import { type LocalKms, startLocalKms } from '../../local/kms-local';
import { json, startTokenServer, type TokenServer } from '../support/token-server';

// What KMS answers, read strictly: an answer without the key or the signature it promised is refused
// by name. KMS itself never gives one; a scripted KMS on 127.0.0.1 does.

let kms: LocalKms;
let scripted: TokenServer;

beforeAll(async () => {
  [kms, scripted] = await Promise.all([startLocalKms(), startTokenServer()]);
});
afterAll(async () => {
  await Promise.all([kms.close(), scripted.close()]);
});

const ring = (endpoint: string) =>
  kmsKeyRing(systemClock(), {
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'local',
    AWS_SECRET_ACCESS_KEY: 'local',
    AWS_ENDPOINT_URL_KMS: endpoint,
  });
const refusal = (work: Promise<unknown>) =>
  work.then(
    () => 'answered',
    (error: unknown) => (error as CredentialSourceError).errorName,
  );
const deadline = () => Deadline.after(systemClock(), 2000);

describe('kmsKeyRing, given answers KMS does not give', () => {
  it('refuses a public key answer without the key', async () => {
    scripted.answer(json(200, { KeySpec: 'RSA_2048', KeyUsage: 'SIGN_VERIFY' }));

    await expect(refusal(ring(scripted.origin).publicKey('alias/any', deadline()))).resolves.toBe('AnswerNotKms');
  });

  it('refuses a signing answer without the signature', async () => {
    const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const key = {
      PublicKey: publicKey.export({ format: 'der', type: 'spki' }).toString('base64'),
      KeySpec: 'ECC_NIST_P256',
      KeyUsage: 'SIGN_VERIFY',
    };
    scripted.answer((request, response) =>
      json(200, request.headers['x-amz-target'] === 'TrentService.GetPublicKey' ? key : { KeyId: 'alias/any' })(request, response),
    );

    const signing = ring(scripted.origin).signJwt('alias/any', { sub: 'x' }, deadline());

    await expect(refusal(signing)).resolves.toBe('AnswerNotKms');
  });

  it('signs with the KMS stand-in, the control: the same ring reads a real answer', async () => {
    const key = kms.createKey('RSA_2048');

    const jwt = await ring(kms.endpoint).signJwt(key.keyId, { sub: 'x' }, deadline());

    expect(jwt.split('.')).toHaveLength(3);
  });
});
