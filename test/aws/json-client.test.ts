import { type Clock, Deadline, epochMs, systemClock } from '../../lambda/clock';
import { DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { KMSClient, SignCommand } from '@aws-sdk/client-kms';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { type AwsJsonService, DYNAMODB, KMS, SECRETS_MANAGER } from '../../lambda/aws/endpoints';
import { AwsCallError, type AwsJson, awsJsonClient, callErrorName, socketFailureName, worthRetrying } from '../../lambda/aws/json-client';
import { createTestCa } from '../support/test-pki';
import { json, type Script, startTokenServer, type TokenServer } from '../support/token-server';

// The client against a scripted AWS on 127.0.0.1:0, over real sockets: what it sends, how it reads
// AWS's answers and errors, when it tries again, and where it gives up.

const CREDENTIALS = { AWS_ACCESS_KEY_ID: 'AKIDLOCAL', AWS_SECRET_ACCESS_KEY: 'local-secret', AWS_SESSION_TOKEN: 'local-token' };
const NOW = Date.UTC(2026, 10, 27, 1, 2, 3);
// Signed at a fixed moment; deadlines and timers on the system's own clock.
const fixedClock: Clock = { ...systemClock(), epoch: () => epochMs(NOW) };
let server: TokenServer;

beforeAll(async () => {
  server = await startTokenServer();
});
afterAll(async () => {
  await server.close();
});

/** A client of DynamoDB pointed at the scripted server, answering as `scripts` say, one after another (the last one stays). */
function scripted(...scripts: Script[]) {
  const queue = [...scripts];
  server.answer((request, response) => (queue.length > 1 ? queue.shift() : queue[0])?.(request, response));
  const env = { ...CREDENTIALS, AWS_REGION: 'eu-west-1', AWS_ENDPOINT_URL_DYNAMODB: server.origin };
  return { client: awsJsonClient(DYNAMODB, env, fixedClock), sent: server.received.length };
}
const failure = (call: Promise<AwsJson>) =>
  call.then(
    () => undefined,
    (error: unknown) => error as AwsCallError,
  );
const limit = () => Deadline.after(fixedClock, 2000);

const hang: Script = () => new Promise(() => undefined);
const cut: Script = (_request, response) => void response.socket?.destroy();

describe('awsJsonClient', () => {
  it('POSTs the input to / with its operation, content type and a signature, and gives the answer', async () => {
    const { client, sent } = scripted(json(200, { Item: { pk: { S: 'a' } } }));

    const answer = await client.call('GetItem', { TableName: 't', Key: { pk: { S: 'a' } } }, limit());

    const [request] = server.received.slice(sent);
    expect(answer).toEqual({ Item: { pk: { S: 'a' } } });
    expect(request).toMatchObject({ method: 'POST', url: '/', body: '{"TableName":"t","Key":{"pk":{"S":"a"}}}' });
    expect(request?.headers).toMatchObject({
      'content-type': 'application/x-amz-json-1.0',
      'x-amz-target': 'DynamoDB_20120810.GetItem',
      'x-amz-date': '20261127T010203Z',
      'x-amz-security-token': 'local-token',
      host: new URL(server.origin).host,
      'content-length': String(request?.body.length),
      authorization: expect.stringMatching(
        /^AWS4-HMAC-SHA256 Credential=AKIDLOCAL\/20261127\/eu-west-1\/dynamodb\/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-security-token;x-amz-target, Signature=[0-9a-f]{64}$/,
      ),
    });
    expect(JSON.stringify(request?.headers)).not.toContain('local-secret');
  });

  it('keeps its connection for the next call', async () => {
    const { client } = scripted(json(200, {}));
    const before = server.connections;

    await client.call('GetItem', {}, limit());
    await client.call('GetItem', {}, limit());

    expect(server.connections - before).toBeLessThanOrEqual(1);
  });

  it.each([
    [
      'the error type header',
      json(400, {}, { 'x-amzn-errortype': 'ConditionalCheckFailedException:http://internal.amazon.com/' }),
      'ConditionalCheckFailedException',
    ],
    [
      'the __type of the document',
      json(400, { __type: 'com.amazonaws.dynamodb.v20120810#ResourceNotFoundException' }),
      'ResourceNotFoundException',
    ],
    [
      'a __type that is a plain name',
      json(400, { __type: 'AccessDeniedException', message: 'User: arn:aws:iam::1:role/x' }),
      'AccessDeniedException',
    ],
    ['the status, for a type that is no name', json(403, { __type: 'com.example#Not a name' }), 'Http403'],
    ['the status, for an answer that is no JSON', json(404, '<html>not found</html>'), 'Http404'],
  ])('names a refusal by %s, and keeps its status and document', async (_case, script, name) => {
    const { client, sent } = scripted(script);

    const error = await failure(client.call('PutItem', {}, limit()));

    expect(error).toBeInstanceOf(AwsCallError);
    expect({ name: error?.name, message: error?.message, status: error?.status }).toEqual({
      name,
      message: name,
      status: expect.any(Number),
    });
    expect(server.received.length - sent).toBe(1);
  });

  it("keeps AWS's error document: a refused condition's item", async () => {
    const { client } = scripted(json(400, { __type: 'x#ConditionalCheckFailedException', Item: { rev: { S: 'r1' } } }));

    const error = await failure(client.call('PutItem', {}, limit()));

    expect(error?.body).toEqual({ __type: 'x#ConditionalCheckFailedException', Item: { rev: { S: 'r1' } } });
  });

  it.each([
    ['a server error', json(500, { __type: 'InternalServerError' })],
    ['a 503 with no document', json(503, '')],
    ['a 429', json(429, {})],
    ['throttling', json(400, { __type: 'com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException' })],
    ['a quota', json(400, { __type: 'LimitExceededException' })],
    ['a connection cut before the answer', cut],
    [
      'a connection cut in the middle of the answer',
      (_request, response) => {
        response.writeHead(200, { 'content-length': '100' }).write('{"Item":');
        setTimeout(() => response.socket?.destroy(), 10);
      },
    ],
  ])('tries once more after %s', async (_case, first) => {
    const { client, sent } = scripted(first, json(200, { ok: true }));

    const answer = await client.call('GetItem', {}, limit());

    expect(answer).toEqual({ ok: true });
    expect(server.received.length - sent).toBe(2);
  });

  it('tries twice at most, and gives the second failure', async () => {
    const { client, sent } = scripted(
      json(500, { __type: 'InternalServerError' }),
      json(503, { __type: 'ServiceUnavailable' }),
      json(200, {}),
    );

    const error = await failure(client.call('GetItem', {}, limit()));

    expect(error?.name).toBe('ServiceUnavailable');
    expect(server.received.length - sent).toBe(2);
  });

  it('takes an answer as large as any of these calls gives, and sends a body by its bytes, not its characters', async () => {
    const largest = { a: 'x'.repeat(2 * 1024 * 1024 - 8) };
    const { client, sent } = scripted(json(200, largest));

    const answer = await client.call('GetSecretValue', { SecretId: 'clé-é' }, limit());

    expect(JSON.stringify(largest)).toHaveLength(2 * 1024 * 1024);
    expect(answer).toEqual(largest);
    expect(server.received[sent]?.body).toBe('{"SecretId":"clé-é"}');
  });

  it.each([
    ['a refusal', json(400, { __type: 'AccessDeniedException' }), 'AccessDeniedException'],
    ['an answer that is no JSON', json(200, 'not json'), 'AnswerNotJson'],
    ['an answer that is no object', json(200, [1, 2]), 'AnswerNotJson'],
    ['an answer larger than any of these calls gives', json(200, `"${'x'.repeat(2 * 1024 * 1024 - 1)}"`), 'AnswerTooLarge'],
  ])('does not try again after %s', async (_case, first, name) => {
    const { client, sent } = scripted(first, json(200, {}));

    const error = await failure(client.call('GetItem', {}, limit()));

    expect(error?.name).toBe(name);
    expect(server.received.length - sent).toBe(1);
  });

  it.each([
    ['while AWS is silent', [hang]],
    ['while AWS is silent to the second attempt', [json(500, {}), hang]],
  ])('gives up when its signal fires %s, as timed out', async (_case, scripts) => {
    const { client } = scripted(...scripts);
    const started = performance.now();

    const error = await failure(client.call('GetItem', {}, Deadline.after(fixedClock, 100)));

    expect(error?.name).toBe('TimeoutError');
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it('fails the call after a pause cut short by its deadline, without a second request', async () => {
    const { client, sent } = scripted((_request, response) => void response.writeHead(500).end());
    // However long the pause would be, the deadline ends it.
    const jitter = jest.spyOn(Math, 'random').mockReturnValue(1e6);

    const error = await failure(client.call('GetItem', { Key: 'paused' }, Deadline.after(fixedClock, 300)));
    jitter.mockRestore();

    expect(error?.name).toBe('TimeoutError');
    // Counted by its own body: a hanging attempt of the test before may reach the server late on a loaded machine.
    expect(server.received.slice(sent).filter((request) => request.body === '{"Key":"paused"}')).toHaveLength(1);
  });

  it.each([
    ['credentials', { AWS_REGION: 'eu-west-1', AWS_ACCESS_KEY_ID: 'AKIDLOCAL' }, 'CredentialsMissing'],
    ['a secret key', { AWS_REGION: 'eu-west-1', AWS_SECRET_ACCESS_KEY: 'local-secret' }, 'CredentialsMissing'],
    ['a region', { ...CREDENTIALS }, 'EndpointSettingError'],
  ])('sends nothing without %s, and says which', async (_case, env, name) => {
    const sent = server.received.length;
    const client = awsJsonClient(KMS, { AWS_ENDPOINT_URL: server.origin, ...env }, fixedClock);

    const error = await failure(client.call('Sign', {}, limit()));

    expect(error?.name).toBe(name);
    expect(server.received.length).toBe(sent);
  });

  it('signs without a token for long-term credentials', async () => {
    const { sent } = scripted(json(200, {}));
    const env = { AWS_ACCESS_KEY_ID: 'AKIDLOCAL', AWS_SECRET_ACCESS_KEY: 'local-secret', AWS_SESSION_TOKEN: '', AWS_REGION: 'us-east-1' };

    await awsJsonClient(KMS, { ...env, AWS_ENDPOINT_URL_KMS: server.origin }, fixedClock).call('Sign', {}, limit());

    expect(server.received[sent]?.headers).not.toHaveProperty('x-amz-security-token');
    expect(server.received[sent]?.headers['x-amz-target']).toBe('TrentService.Sign');
  });

  it('verifies an https endpoint, and refuses a certificate no CA it trusts signed', async () => {
    const tls = await startTokenServer(json(200, {}), createTestCa('Untrusted AWS test CA').issue(['localhost']));
    const env = { ...CREDENTIALS, AWS_REGION: 'us-east-1', AWS_ENDPOINT_URL_KMS: tls.origin };

    const error = await failure(awsJsonClient(KMS, env, fixedClock).call('Sign', {}, limit()));
    await tls.close();

    expect(error?.name).toMatch(/^(UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_GET_ISSUER_CERT_LOCALLY)$/);
    expect(tls.received).toEqual([]);
  });
});

describe('the services, as the AWS SDK calls them', () => {
  const sdkConfig = () => ({
    endpoint: server.origin,
    region: 'eu-west-1',
    credentials: { accessKeyId: 'AKIDLOCAL', secretAccessKey: 'x' },
  });
  const cases: [AwsJsonService, string, () => Promise<unknown>][] = [
    [DYNAMODB, 'GetItem', () => new DynamoDBClient(sdkConfig()).send(new GetItemCommand({ TableName: 'table', Key: {} }))],
    [SECRETS_MANAGER, 'GetSecretValue', () => new SecretsManagerClient(sdkConfig()).send(new GetSecretValueCommand({ SecretId: 's' }))],
    [
      KMS,
      'Sign',
      () => new KMSClient(sdkConfig()).send(new SignCommand({ KeyId: 'k', Message: Buffer.from('m'), SigningAlgorithm: 'ECDSA_SHA_256' })),
    ],
  ];
  // What names the service and the operation: the content type, the target and the signature's scope.
  const named = (headers: Record<string, unknown>) => ({
    type: headers['content-type'],
    target: headers['x-amz-target'],
    scope: /Credential=AKIDLOCAL\/\d{8}\/([^,]+),/.exec(String(headers.authorization))?.[1],
  });

  it.each(cases.map(([service, operation, sdk]) => [service.hostPrefix, service, operation, sdk] as const))(
    'names %s as the SDK does',
    async (_name, service, operation, sdk) => {
      const { sent } = scripted(json(200, {}));
      const env = { ...CREDENTIALS, AWS_REGION: 'eu-west-1', AWS_ENDPOINT_URL: server.origin };

      await sdk();
      await awsJsonClient(service, env, fixedClock).call(operation, {}, limit());

      const [theirs, ours] = server.received.slice(sent).map(({ headers }) => named(headers));
      expect(ours).toEqual(theirs);
      expect(ours?.scope).toBe(`eu-west-1/${service.signingName}/aws4_request`);
    },
  );
});

describe('worthRetrying', () => {
  it.each(['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT'])('retries a socket that failed with %s', (code) => {
    expect(worthRetrying(new AwsCallError(code))).toBe(true);
  });

  it.each(['ENOTFOUND', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'TimeoutError', 'CredentialsMissing', 'AnswerNotJson'])(
    'does not retry %s, which no second attempt mends',
    (name) => {
      expect(worthRetrying(new AwsCallError(name))).toBe(false);
    },
  );

  it.each([
    [429, 'Http429', true],
    [500, 'InternalServerError', true],
    [503, 'Http503', true],
    [499, 'Http499', false],
    [400, 'ThrottlingException', true],
    [400, 'Throttling', true],
    [400, 'TooManyRequestsException', true],
    [400, 'RequestThrottledException', true],
    [400, 'ProvisionedThroughputExceededException', true],
    [400, 'LimitExceededException', true],
    [400, 'RequestLimitExceeded', true],
    [400, 'SlowDown', true],
    [400, 'AccessDeniedException', false],
    [400, 'NotThrottling', false],
    [400, 'SlowDownNow', false],
    [400, 'TooManyRequestsExceptions', false],
    [400, 'XProvisionedThroughputExceededException', false],
  ])('judges an answer %i %s worth retrying: %s', (status, name, retried) => {
    expect(worthRetrying(new AwsCallError(name, status))).toBe(retried);
  });
});

describe('the names of failures', () => {
  it.each([
    ['an errno code', Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:443'), { code: 'ECONNREFUSED' }), 'ECONNREFUSED'],
    ['a TLS code', Object.assign(new Error('x'), { code: 'CERT_HAS_EXPIRED' }), 'CERT_HAS_EXPIRED'],
    ['no code', new Error('socket hang up at 10.0.0.1'), 'NetworkError'],
    ['a code that is no name', Object.assign(new Error('x'), { code: 'ECONNRESET at 10.0.0.1' }), 'NetworkError'],
    ['a code that only ends as a name', Object.assign(new Error('x'), { code: 'at 10.0.0.1: ECONNRESET' }), 'NetworkError'],
    ['a code that is no string', Object.assign(new Error('x'), { code: 104 }), 'NetworkError'],
  ])('name a socket failure by its code: %s', (_case, error, name) => {
    expect(socketFailureName(error)).toBe(name);
  });

  it.each([
    ["the client's", new AwsCallError('ConditionalCheckFailedException'), 'ConditionalCheckFailedException'],
    [
      'a class name',
      Object.assign(new Error('User: arn:aws:iam::1:role/x is not authorized'), { name: 'AccessDeniedException' }),
      'AccessDeniedException',
    ],
    ['a plain Error', new Error('Requested resource not found: Table: secret-table'), 'Error'],
    ['a class name that could carry text', Object.assign(new Error('x'), { name: 'Table secret-table not found' }), 'Error'],
    ['a thrown value that is no object', undefined, 'Error'],
    ['a class name that is no string', Object.assign(new Error('x'), { name: 42 }), 'Error'],
  ])('log a failed call by its name, never its message: %s', (_case, error, name) => {
    expect(callErrorName(error)).toBe(name);
  });
});
