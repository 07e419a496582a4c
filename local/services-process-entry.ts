// The child side of services-process.ts: it sends the endpoints once the servers listen, and closes them and ends when its
// parent goes (the IPC channel closes even when the parent is killed).
import { randomBytes } from 'node:crypto';
import { startLocalDynamoDb } from './dynamodb-local';
import { startLocalKms } from './kms-local';
import { startLocalSecretsManager } from './secrets-manager-local';
import type { ServicesEndpoints } from './services-process';

const [tableName = '', pepperSecret = '', keyAlias] = process.argv.slice(2);

void Promise.all([
  startLocalDynamoDb({ tableName }),
  startLocalSecretsManager({ [pepperSecret]: randomBytes(32).toString('hex') }),
  keyAlias === undefined ? undefined : startLocalKms(),
]).then(
  ([dynamoDb, secrets, kms]) => {
    kms?.createKey('RSA_2048', keyAlias);
    process.on('disconnect', () => void Promise.all([dynamoDb.close(), secrets.close(), kms?.close()]).finally(() => process.exit(0)));
    const endpoints: ServicesEndpoints = { dynamoDb: dynamoDb.endpoint, secretsManager: secrets.endpoint, kms: kms?.endpoint };
    process.send?.(endpoints);
  },
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
