// The table (dynalite) and the pepper's stand-in, in a process of their own so that the fleets' table calls do not share
// the campaign's event loop. Forked by run.ts: it sends their endpoints once they listen, and ends when its parent goes.
import { randomBytes } from 'node:crypto';
import { startLocalDynamoDb } from '../local/dynamodb-local';
import { startLocalSecretsManager } from '../local/secrets-manager-local';

export interface Services {
  readonly dynamoDb: string;
  readonly secretsManager: string;
}

const [table = '', pepperSecret = ''] = process.argv.slice(2);

void Promise.all([
  startLocalDynamoDb({ tableName: table }),
  startLocalSecretsManager({ [pepperSecret]: randomBytes(32).toString('hex') }),
]).then(
  ([dynamoDb, secrets]) => {
    process.on('disconnect', () => void Promise.all([dynamoDb.close(), secrets.close()]).finally(() => process.exit(0)));
    const services: Services = { dynamoDb: dynamoDb.endpoint, secretsManager: secrets.endpoint };
    process.send?.(services);
  },
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
