// Regression tests from the security review of 2026-11-27 (lambda/aws/): where the function's AWS
// client takes its credentials and endpoint from, and which settings it cannot serve with, so that
// the function refuses them at its start with a message naming each.
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DYNAMODB } from '../lambda/aws/endpoints';
import { awsJsonClient } from '../lambda/aws/json-client';
import { Deadline, systemClock } from '../lambda/clock';
import { loadConfig, loadConfigAtStart } from '../lambda/config';
import { localAwsEnvironment, type LocalDynamoDb, startLocalDynamoDb } from '../local/dynamodb-local';

let db: LocalDynamoDb;
beforeAll(async () => {
  db = await startLocalDynamoDb({ tableName: 'review-settings' });
});
afterAll(() => db.close());

const clock = systemClock();
const getItem = { TableName: 'review-settings', Key: { pk: { S: 'x' } } };
const SHARED = { TOKEN_CACHE: 'shared', TOKEN_CACHE_TABLE: 'token-cache', TOKEN_CACHE_PEPPER_SECRET: 'pepper' };
const outcomeOf = (call: Promise<unknown>) =>
  call.then(
    () => 'ok',
    (error: Error) => error.name,
  );

describe('G4: credentials come from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN only', () => {
  it("fails every call CredentialsMissing with only a container credential provider's variables, never asking it", async () => {
    // Prepare: a container credentials endpoint, as Lambda SnapStart, ECS and EKS Pod Identity serve one.
    let asked = 0;
    const provider = createServer((_request, response) => {
      asked++;
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ AccessKeyId: 'ASIAREVIEW', SecretAccessKey: 'review', Token: 'review-token' }));
    });
    provider.listen(0, '127.0.0.1');
    await once(provider, 'listening');
    const { AWS_ACCESS_KEY_ID: _id, AWS_SECRET_ACCESS_KEY: _secret, ...env } = localAwsEnvironment({ dynamoDb: db.endpoint });
    const containerEnv = {
      ...env,
      AWS_CONTAINER_CREDENTIALS_FULL_URI: `http://127.0.0.1:${(provider.address() as AddressInfo).port}/creds`,
      AWS_CONTAINER_AUTHORIZATION_TOKEN: 'review-authorization-token',
    };

    // Act
    const outcome = await outcomeOf(awsJsonClient(DYNAMODB, containerEnv, clock).call('GetItem', getItem, Deadline.after(clock, 2000)));
    provider.close();

    // Assess
    expect(outcome).toBe('CredentialsMissing');
    expect(asked).toBe(0);
  });

  it('refuses to start a function configured for the shared cache with no usable credentials, naming the variables', () => {
    expect(() => loadConfigAtStart({ ...SHARED, AWS_REGION: 'eu-west-1' })).toThrow(
      /AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are required/,
    );
  });
});

describe('G5: an SDK endpoint setting the client does not support fails the start, not every table call', () => {
  it('refuses AWS_USE_DUALSTACK_ENDPOINT=true at the start, which would fail every table call', async () => {
    // Prepare
    const env = { ...localAwsEnvironment({}), AWS_USE_DUALSTACK_ENDPOINT: 'true' };

    // Act
    const outcome = await outcomeOf(awsJsonClient(DYNAMODB, env, clock).call('GetItem', getItem, Deadline.after(clock, 2000)));

    // Assess
    expect(outcome).toBe('EndpointSettingError');
    expect(() => loadConfig({ ...SHARED, ...env })).toThrow(/AWS_USE_DUALSTACK_ENDPOINT/);
  });
});

describe('G6: TLS verification cannot be switched off for every call by the environment', () => {
  it('refuses NODE_TLS_REJECT_UNAUTHORIZED=0 at the start, as it does NODE_DEBUG=tls', () => {
    // Node reads it per connection: the guarded agents and lambda/aws set no rejectUnauthorized of their own.
    expect(() => loadConfig({ NODE_TLS_REJECT_UNAUTHORIZED: '0' })).toThrow(/NODE_TLS_REJECT_UNAUTHORIZED/);
  });
});
