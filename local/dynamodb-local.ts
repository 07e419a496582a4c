import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { CreateTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import dynalite from 'dynalite';
import { createTableInput } from '../lambda/cache/table-schema';

export interface LocalDynamoDb {
  /** `http://127.0.0.1:PORT`, for AWS_ENDPOINT_URL_DYNAMODB. */
  readonly endpoint: string;
  readonly tableName: string;
  close(): Promise<void>;
}

/** The table name `npm start` uses unless TOKEN_CACHE_TABLE names another. */
export const LOCAL_TABLE_NAME = 'token-cache';

/** Where the local stand-ins of the AWS services listen (`http://127.0.0.1:PORT`); a service left out is not pointed anywhere. */
export interface LocalEndpoints {
  readonly dynamoDb?: string;
  readonly secretsManager?: string;
  readonly kms?: string;
}

/**
 * The AWS SDK settings that point the function's DynamoDB, Secrets Manager and KMS clients at local
 * servers: their endpoints, a region, and placeholder credentials (the local servers check none), so
 * the SDK never looks for real ones, neither in a profile nor at an instance metadata address.
 */
export function localAwsEnvironment(endpoints: LocalEndpoints, region = 'us-east-1'): Record<string, string> {
  const named = {
    AWS_ENDPOINT_URL_DYNAMODB: endpoints.dynamoDb,
    AWS_ENDPOINT_URL_SECRETS_MANAGER: endpoints.secretsManager,
    AWS_ENDPOINT_URL_KMS: endpoints.kms,
  };
  return {
    ...Object.fromEntries(Object.entries(named).filter((entry): entry is [string, string] => entry[1] !== undefined)),
    AWS_REGION: region,
    AWS_ACCESS_KEY_ID: 'local',
    AWS_SECRET_ACCESS_KEY: 'local',
    AWS_EC2_METADATA_DISABLED: 'true',
  };
}

/**
 * Start dynalite (the DynamoDB API served from memory, in this process) on a loopback address and
 * create the token cache table in it from the definition the CDK stack uses. Nothing is written to disk.
 */
export async function startLocalDynamoDb(options: { port?: number; tableName?: string } = {}): Promise<LocalDynamoDb> {
  const tableName = options.tableName ?? LOCAL_TABLE_NAME;
  // Before the first client exists: the SDK prints, once per process, that its 2027 releases will
  // need Node.js 22. True, and beside the point for a local server (the function runs on Node.js 24).
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  server.listen(options.port ?? 0, '127.0.0.1');
  await once(server, 'listening');
  const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  // dynalite closes its store when the server closes, and throws out of the process if a request is
  // still being served then. So stop accepting, let requests in progress finish, and close each
  // connection once it is idle; whatever is still open after a second is cut.
  const close = async (): Promise<void> => {
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    const idleSweep = setInterval(() => server.closeIdleConnections(), 10);
    const cutOff = setTimeout(() => server.closeAllConnections(), 1000);
    await closed;
    clearInterval(idleSweep);
    clearTimeout(cutOff);
  };
  const client = new DynamoDBClient({ endpoint, region: 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
  try {
    await client.send(new CreateTableCommand(createTableInput(tableName)));
  } catch (error) {
    await close();
    throw error;
  } finally {
    client.destroy();
  }
  return { endpoint, tableName, close };
}
