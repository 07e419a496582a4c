import { DescribeTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetPublicKeyCommand, KMSClient } from '@aws-sdk/client-kms';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { startServicesProcess } from '../local/services-process';

// `npm run bench` and `npm run faults` run their fleets against these services in a process of their own, configured by
// the settings it hands back: those must reach the table, the pepper and, when asked for, the stored credential's key.

describe('the services process', () => {
  it('serves the table, a new pepper and an RSA_2048 key by the alias given, at the settings it hands back', async () => {
    // Prepare
    const services = await startServicesProcess('services-table', 'services-pepper', 'alias/services-key');
    const env = services.environment;
    const aws = { region: env.AWS_REGION, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } };
    try {
      // Act
      const table = await new DynamoDBClient({ ...aws, endpoint: env.AWS_ENDPOINT_URL_DYNAMODB }).send(
        new DescribeTableCommand({ TableName: env.TOKEN_CACHE_TABLE }),
      );
      const pepper = await new SecretsManagerClient({ ...aws, endpoint: env.AWS_ENDPOINT_URL_SECRETS_MANAGER }).send(
        new GetSecretValueCommand({ SecretId: env.TOKEN_CACHE_PEPPER_SECRET }),
      );
      const key = await new KMSClient({ ...aws, endpoint: env.AWS_ENDPOINT_URL_KMS }).send(
        new GetPublicKeyCommand({ KeyId: 'alias/services-key' }),
      );
      // Assess: the pepper is 32 random bytes, hex
      expect([table.Table?.TableName, pepper.SecretString?.length, key.KeySpec]).toEqual(['services-table', 64, 'RSA_2048']);
    } finally {
      await services.stop();
    }
  });

  it('starts no KMS when no key is asked for, and ends when stopped', async () => {
    // Prepare
    const services = await startServicesProcess('services-table', 'services-pepper');
    // Act
    await services.stop();
    // Assess: stop() resolves once the process has exited
    expect([services.endpoints.kms, services.environment.AWS_ENDPOINT_URL_KMS]).toEqual([undefined, undefined]);
  });
});
