import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { answerJson, readJson } from './aws-json-protocol';

export interface LocalSecretsManager {
  /** `http://127.0.0.1:PORT`, for AWS_ENDPOINT_URL_SECRETS_MANAGER. */
  readonly endpoint: string;
  /** Replace a secret's value, as a rotation would: a string, or bytes (a binary secret, `SecretBinary`). */
  set(name: string, value: string | Uint8Array): void;
  /** The secret ids of the GetSecretValue calls answered so far, in order. */
  readonly reads: string[];
  /** Answer every read of `name` with the error `errorType` from now on (a throttle, say); undefined answers normally again. */
  failWith(name: string, errorType: string | undefined): void;
  close(): Promise<void>;
}

/**
 * A loopback stand-in for AWS Secrets Manager that answers `GetSecretValue` (AWS JSON 1.1, what the
 * SDK's client speaks) for the secrets it is given, and `ResourceNotFoundException` for any other.
 * It is what `npm start` and the tests give the shared cache instead of an AWS account.
 */
export async function startLocalSecretsManager(secrets: Record<string, string>): Promise<LocalSecretsManager> {
  const values = new Map<string, string | Uint8Array>(Object.entries(secrets));
  const reads: string[] = [];
  const failures = new Map<string, string>();
  const server = createServer((request, response) => {
    void readJson(request).then((body) => {
      const answer = (status: number, payload: object) => answerJson(response, status, payload);
      if (request.headers['x-amz-target'] !== 'secretsmanager.GetSecretValue') {
        return answer(400, { __type: 'UnknownOperationException', message: 'Only GetSecretValue is served here' });
      }
      const name = typeof body.SecretId === 'string' ? body.SecretId : '';
      reads.push(name);
      const failure = failures.get(name);
      if (failure !== undefined) return answer(400, { __type: failure, message: 'GetSecretValue fails here, as asked' });
      const value = values.get(name);
      if (value === undefined)
        return answer(400, { __type: 'ResourceNotFoundException', message: 'Secrets Manager cannot find the specified secret.' });
      return answer(200, {
        ARN: `arn:aws:secretsmanager:us-east-1:000000000000:secret:${name}`,
        Name: name,
        ...(typeof value === 'string' ? { SecretString: value } : { SecretBinary: Buffer.from(value).toString('base64') }),
        VersionId: 'local',
        VersionStages: ['AWSCURRENT'],
        CreatedDate: 0,
      });
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    set: (name, value) => values.set(name, value),
    reads,
    failWith: (name, errorType) => (errorType === undefined ? failures.delete(name) : failures.set(name, errorType)),
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}
