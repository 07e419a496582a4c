import type { CreateTableCommandInput } from '@aws-sdk/client-dynamodb';

/**
 * The shared token cache's table, defined once: the CDK stack creates it from this, `npm start`
 * creates it in its embedded DynamoDB-compatible server from this, and the function reads and
 * writes these attributes.
 */
export const TABLE_SCHEMA = {
  /** The partition key, the only key: an item key derived from the request or the hold (lambda/cache/sealed-item.ts). */
  partitionKey: { name: 'pk', type: 'S' },
  /** DynamoDB's TTL attribute: epoch seconds after which the item may be deleted (lazily: readers check times themselves). */
  timeToLiveAttribute: 'expires',
  attributes: {
    /** The sealed item state (binary): a token, a claim, a remembered failure or a hold. */
    state: 'state',
    /** Random per write, so a conditional write can say "only if nobody wrote since I read". */
    revision: 'rev',
  },
} as const;

/** The CreateTable request for a DynamoDB-compatible server: on-demand, partition key only. */
export function createTableInput(tableName: string): CreateTableCommandInput {
  const { name, type } = TABLE_SCHEMA.partitionKey;
  return {
    TableName: tableName,
    BillingMode: 'PAY_PER_REQUEST',
    AttributeDefinitions: [{ AttributeName: name, AttributeType: type }],
    KeySchema: [{ AttributeName: name, KeyType: 'HASH' }],
  };
}
