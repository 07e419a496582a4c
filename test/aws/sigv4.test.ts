import { SignatureV4 } from '@smithy/signature-v4';
import fc from 'fast-check';
import { type AwsCredentials, signPost } from '../../lambda/aws/sigv4';
import { NodeSha256 } from '../../smoke/sigv4';

// AWS's own signer (@smithy/signature-v4, what the SDK signs with) is the oracle: for any credentials,
// region, service, time, headers and body, the headers signed here are the ones it signs.

async function sdkSigned(
  post: { host: string; headers: Record<string, string>; body: string },
  credentials: AwsCredentials,
  service: string,
  region: string,
  now: number,
) {
  // No x-amz-content-sha256: only S3 needs it, and the calls here do not send it.
  const signer = new SignatureV4({ service, region, credentials, sha256: NodeSha256, applyChecksum: false });
  const request = {
    method: 'POST',
    protocol: 'https:',
    hostname: post.host,
    path: '/',
    headers: { ...post.headers, host: post.host },
    body: post.body,
  };
  const { headers } = await signer.sign(request, { signingDate: new Date(now) });
  return Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toLowerCase(), value]));
}

const printable = fc.string({ unit: fc.constantFrom(...'abcXYZ019/+=-_ '.split('')), minLength: 1, maxLength: 40 });
const word = fc.stringMatching(/^[a-z][a-z0-9-]{1,20}$/);

describe('signPost', () => {
  it('signs as the AWS SDK signs, whatever the credentials, scope, time, headers and body', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          accessKeyId: fc.stringMatching(/^[A-Z0-9]{16,24}$/),
          secretAccessKey: printable,
          sessionToken: fc.option(printable, { nil: undefined }),
        }),
        word,
        word,
        fc.integer({ min: Date.UTC(2020, 0, 1), max: Date.UTC(2040, 0, 1) }),
        fc.string({ unit: 'grapheme', maxLength: 200 }),
        fc.dictionary(fc.constantFrom('content-type', 'x-amz-target', 'x-custom'), printable, { maxKeys: 3 }),
        async (credentials, service, region, now, body, headers) => {
          const post = { host: `${service}.${region}.amazonaws.com`, headers, body };

          const ours = signPost(post, credentials, service, region, now);

          expect(ours).toEqual(await sdkSigned(post, credentials, service, region, now));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('adds the date, the token of temporary credentials and the authorization, and keeps what it was given', () => {
    const credentials = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'example-secret', sessionToken: 'example-token' };
    const post = { host: 'kms.eu-west-1.amazonaws.com', headers: { 'x-amz-target': 'TrentService.Sign' }, body: '{}' };

    const signed = signPost(post, credentials, 'kms', 'eu-west-1', Date.UTC(2026, 10, 27, 1, 2, 3, 456));

    expect(signed).toEqual({
      'x-amz-target': 'TrentService.Sign',
      host: 'kms.eu-west-1.amazonaws.com',
      'x-amz-date': '20261127T010203Z',
      'x-amz-security-token': 'example-token',
      authorization: expect.stringMatching(
        /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/20261127\/eu-west-1\/kms\/aws4_request, SignedHeaders=host;x-amz-date;x-amz-security-token;x-amz-target, Signature=[0-9a-f]{64}$/,
      ),
    });
    expect(JSON.stringify(signed)).not.toContain('example-secret');
    expect(signPost(post, { ...credentials, sessionToken: undefined }, 'kms', 'eu-west-1', 0)).not.toHaveProperty('x-amz-security-token');
  });
});
