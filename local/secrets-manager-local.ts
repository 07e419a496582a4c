import { once } from 'node:events';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface LocalSecretsManager {
  /** `http://127.0.0.1:PORT`, for AWS_ENDPOINT_URL_SECRETS_MANAGER. */
  readonly endpoint: string;
  /** Replace a secret's value, as a rotation would. */
  set(name: string, value: string): void;
  close(): Promise<void>;
}

/**
 * A loopback stand-in for AWS Secrets Manager that answers `GetSecretValue` (AWS JSON 1.1, what the
 * SDK's client speaks) for the secrets it is given, and `ResourceNotFoundException` for any other.
 * It is what `npm start` and the tests give the shared cache instead of an AWS account.
 */
export async function startLocalSecretsManager(secrets: Record<string, string>): Promise<LocalSecretsManager> {
  const values = new Map(Object.entries(secrets));
  const server = createServer((request, response) => {
    void readJson(request).then((body) => {
      const answer = (status: number, payload: object) => {
        response.writeHead(status, { 'content-type': 'application/x-amz-json-1.1' });
        response.end(JSON.stringify(payload));
      };
      if (request.headers['x-amz-target'] !== 'secretsmanager.GetSecretValue') {
        return answer(400, { __type: 'UnknownOperationException', message: 'Only GetSecretValue is served here' });
      }
      const name = typeof body.SecretId === 'string' ? body.SecretId : '';
      const value = values.get(name);
      if (value === undefined)
        return answer(400, { __type: 'ResourceNotFoundException', message: 'Secrets Manager cannot find the specified secret.' });
      return answer(200, {
        ARN: `arn:aws:secretsmanager:us-east-1:000000000000:secret:${name}`,
        Name: name,
        SecretString: value,
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
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

async function readJson(request: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  try {
    const parsed: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    return typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
