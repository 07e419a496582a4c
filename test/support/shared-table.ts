import { type AttributeValue, DynamoDBClient, PutItemCommand, ScanCommand } from '@aws-sdk/client-dynamodb';
import { localAwsEnvironment, type LocalDynamoDb, startLocalDynamoDb } from '../../local/dynamodb-local';

export type RawItem = Record<string, AttributeValue>;

export interface SharedTable extends LocalDynamoDb {
  /** Every item, as a reader of the table (or of a backup of it) would see them. */
  scan(): Promise<RawItem[]>;
  /** Write an item as it is, the way someone with write access to the table could. */
  put(item: RawItem): Promise<void>;
}

/**
 * A real DynamoDB-compatible server (dynalite, in this process) on 127.0.0.1 with the token cache
 * table, and this process's AWS SDK settings pointed at it, the standard way (AWS_ENDPOINT_URL_DYNAMODB).
 */
export async function startSharedTable(tableName = 'token-cache-test'): Promise<SharedTable> {
  const local = await startLocalDynamoDb({ tableName });
  Object.assign(process.env, localAwsEnvironment(local.endpoint));
  const client = new DynamoDBClient({
    endpoint: local.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });
  return {
    ...local,
    async scan() {
      return (await client.send(new ScanCommand({ TableName: tableName, ConsistentRead: true }))).Items ?? [];
    },
    async put(item) {
      await client.send(new PutItemCommand({ TableName: tableName, Item: item }));
    },
    async close() {
      client.destroy();
      await local.close();
    },
  };
}
