// Regression tests from the security review of 2026-11-27 (lambda/aws/json-client.ts): what the function's AWS
// client does with answers an AWS endpoint, or something in its place, might send, and that its signatures agree
// with the SDK's signer.
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DYNAMODB } from '../lambda/aws/endpoints';
import { awsJsonClient } from '../lambda/aws/json-client';
import { DynamoDbTable } from '../lambda/cache/shell/table-calls';
import { Deadline, systemClock } from '../lambda/clock';
import { signPost } from '../lambda/aws/sigv4';
import { SignatureV4 } from '@smithy/signature-v4';
import fc from 'fast-check';
import { NodeSha256 } from '../smoke/sigv4';

let server: Server;
let answer: (request: IncomingMessage, response: ServerResponse) => void;
const seen: { headers: IncomingMessage['headers']; body: string }[] = [];
let endpoint: string;
const clock = systemClock();
beforeAll(async () => {
  server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request
      .on('data', (c: Buffer) => chunks.push(c))
      .on('end', () => {
        seen.push({ headers: request.headers, body: Buffer.concat(chunks).toString() });
        answer(request, response);
      });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => server.close());
const env = () => ({
  AWS_REGION: 'eu-west-1',
  AWS_ACCESS_KEY_ID: 'AKIDREVIEW',
  AWS_SECRET_ACCESS_KEY: 'review-secret',
  AWS_SESSION_TOKEN: 'review-token',
  AWS_ENDPOINT_URL_DYNAMODB: endpoint,
});

describe('answers', () => {
  it('a __proto__ key in an answer is an own key: nothing reaches Object.prototype, no attribute is read from it', async () => {
    answer = (_q, r) =>
      r
        .writeHead(200, { 'content-type': 'application/x-amz-json-1.0' })
        .end('{"__proto__":{"polluted":1},"Item":{"__proto__":{"rev":{"S":"x"}},"pk":{"S":"k"}}}');
    const table = new DynamoDbTable(awsJsonClient(DYNAMODB, env(), clock), 'review', 2000, clock);
    const item = await table.calls({}).get('k');
    expect(item).toEqual({ rev: undefined, expiresSeconds: undefined, sealed: undefined });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(({} as Record<string, unknown>).rev).toBeUndefined();
  });

  it('an answer past 2 MiB is cut off (AnswerTooLarge) without buffering the rest', async () => {
    answer = (_q, r) => {
      r.writeHead(200, { 'content-type': 'application/x-amz-json-1.0' });
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      let sent = 0;
      const more = () => {
        while (sent < 64 * 1024 * 1024 && r.write(chunk)) sent += chunk.length;
        if (sent < 64 * 1024 * 1024) r.once('drain', more);
        else r.end();
      };
      r.on('close', () => (sent = Infinity));
      more();
    };
    const before = process.memoryUsage().rss;
    const outcome = await awsJsonClient(DYNAMODB, env(), clock)
      .call('GetItem', {}, Deadline.after(clock, 5000))
      .then(
        () => 'ok',
        (e: Error) => e.name,
      );
    expect(outcome).toBe('AnswerTooLarge');
    expect(process.memoryUsage().rss - before).toBeLessThan(40 * 1024 * 1024);
  });

  it("an error document's message never becomes the error's message (it may hold an ARN or a key)", async () => {
    answer = (_q, r) =>
      r
        .writeHead(400, { 'x-amzn-errortype': 'AccessDeniedException:http://internal/' })
        .end(
          '{"__type":"x#AccessDeniedException","message":"User arn:aws:sts::1:assumed-role/r/s is not authorized on key arn:aws:kms:eu-west-1:1:key/abc"}',
        );
    const error = await awsJsonClient(DYNAMODB, env(), clock)
      .call('GetItem', {}, Deadline.after(clock, 2000))
      .catch((e: Error) => e);
    expect([error.name, error.message]).toEqual(['AccessDeniedException', 'AccessDeniedException']);
  });

  it('the request carries no header or URL part taken from the input: table keys, names and ids travel in the JSON body only', async () => {
    answer = (_q, r) => r.writeHead(200).end('{}');
    seen.length = 0;
    const hostile = 'k\r\nx-injected: 1\u2028"}{';
    await awsJsonClient(DYNAMODB, env(), clock).call(
      'GetItem',
      { TableName: hostile, Key: { pk: { S: hostile } } },
      Deadline.after(clock, 2000),
    );
    expect(seen[0]?.headers['x-injected']).toBeUndefined();
    expect(JSON.parse(seen[0]?.body ?? '')).toEqual({ TableName: hostile, Key: { pk: { S: hostile } } });
    expect(Object.keys(seen[0]?.headers ?? {}).sort()).toEqual([
      'authorization',
      'connection',
      'content-length',
      'content-type',
      'host',
      'x-amz-date',
      'x-amz-security-token',
      'x-amz-target',
    ]);
  });
});

describe('signatures', () => {
  it('agree with @smithy/signature-v4 for 300 random bodies (any Unicode), header values with inner and outer spaces, regions, services, session tokens', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.string({ unit: 'grapheme', maxLength: 200 }),
        fc.stringMatching(/^[ -~]{1,40}$/),
        fc.constantFrom('eu-west-1', 'us-gov-west-1', 'cn-north-1', 'us-iso-east-1'),
        fc.constantFrom('dynamodb', 'kms', 'secretsmanager'),
        fc.option(fc.stringMatching(/^[A-Za-z0-9+/=]{1,300}$/), { nil: undefined }),
        fc.integer({ min: 0, max: 4102444800000 }),
        async (body, target, region, service, sessionToken, now) => {
          const credentials = { accessKeyId: 'AKIDREVIEW', secretAccessKey: 'review/secret+key', sessionToken };
          const headers = { 'content-type': 'application/x-amz-json-1.0', 'x-amz-target': target };
          const ours = signPost({ host: 'host.example:8443', headers, body }, credentials, service, region, now);
          const signer = new SignatureV4({ credentials, region, service, sha256: NodeSha256, applyChecksum: false });
          const theirs = await signer.sign(
            {
              method: 'POST',
              protocol: 'https:',
              hostname: 'host.example',
              port: 8443,
              path: '/',
              query: {},
              headers: { ...headers, host: 'host.example:8443' },
              body,
            },
            { signingDate: new Date(now) },
          );
          expect(ours.authorization).toBe(theirs.headers.authorization);
        },
      ),
      { numRuns: 300 },
    );
  });
});
