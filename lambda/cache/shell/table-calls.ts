import { DYNAMODB } from '../../aws/endpoints';
import { AwsCallError, type AwsJson, type AwsJsonClient, awsJsonClient, callErrorName } from '../../aws/json-client';
import { type Clock, Deadline } from '../../clock';
import { isRecord } from '../../type-guards';
import type { Expected } from '../core/visit';
import type { CacheReport } from '../report';
import { TABLE_SCHEMA } from '../table-schema';
import type { SealedState } from './sealed-item';

const { partitionKey, timeToLiveAttribute, attributes } = TABLE_SCHEMA;

/** An item's attributes of the expected types; anything else is as good as absent. */
export interface StoredItem {
  /** The item's revision when it is a string (what this service writes); undefined for none or any other type. */
  readonly rev: string | undefined;
  readonly expiresSeconds: number | undefined;
  readonly sealed: Uint8Array | undefined;
}

/** A write that landed (its new revision), or a condition that failed, with the item that failed it when DynamoDB said. */
export type Written = { readonly rev: string } | { readonly lost: StoredItem | undefined };

/** A call that failed or ran out of time: the request carries on without it. */
export const FAILED = Symbol('failed');
export type Failed = typeof FAILED;

/** How the shared tier reaches its table: one request's calls, each bounded. */
export interface Table {
  calls(report: CacheReport): TableCalls;
}

/** The table calls of one request. */
export interface TableCalls {
  /** The item, strongly consistent so a write of another instance is seen at once. */
  get(itemKey: string): Promise<StoredItem | undefined | Failed>;
  /** Write a sealed state under a new revision `rev`, if the item is still as expected. */
  put(itemKey: string, state: SealedState, expected: Expected, rev: string): Promise<Written | Failed>;
}

/** The key of the read that warms the client up; no item key (43 base64url characters) is this. */
const WARM_UP_KEY = 'warm-up';

/**
 * The table in DynamoDB, through a client made for it. Region, endpoint (AWS_ENDPOINT_URL_DYNAMODB) and
 * credentials come the standard way, from the environment; one retry at most, within the call limit.
 * One read goes out at once, its answer ignored: the connection opens while the function initialises,
 * rather than on the first request's hedge.
 */
export function dynamoDbTable(tableName: string, callLimitMs: number, clock: Clock): DynamoDbTable {
  const client = awsJsonClient(DYNAMODB, process.env, clock);
  const warmUp = { TableName: tableName, Key: { [partitionKey.name]: { S: WARM_UP_KEY } } };
  client.call('GetItem', warmUp, Deadline.after(clock, callLimitMs * 4)).catch(() => undefined);
  return new DynamoDbTable(client, tableName, callLimitMs, clock);
}

/**
 * The table in DynamoDB. Each call is bounded by the call limit alone, and fails alone: a slow read of
 * one item never keeps a request from its other calls (the protocol's hedge keeps the caller from
 * waiting on any of them). A refused condition comes back with the item that refused it (`ALL_OLD`),
 * where the server returns one.
 */
export class DynamoDbTable implements Table {
  constructor(
    private readonly client: AwsJsonClient,
    private readonly tableName: string,
    private readonly callLimitMs: number,
    private readonly clock: Clock,
  ) {}

  calls(report: CacheReport): TableCalls {
    const failed = (error: unknown): Failed => {
      report.tableError ??= callErrorName(error);
      return FAILED;
    };
    return {
      get: (itemKey) =>
        this.client
          .call(
            'GetItem',
            { TableName: this.tableName, Key: { [partitionKey.name]: { S: itemKey } }, ConsistentRead: true },
            Deadline.after(this.clock, this.callLimitMs),
          )
          .then(({ Item: item }) => (isRecord(item) ? storedItem(item) : undefined), failed),
      put: (itemKey, state, expected, rev) =>
        this.client
          .call(
            'PutItem',
            {
              TableName: this.tableName,
              Item: {
                [partitionKey.name]: { S: itemKey },
                [attributes.state]: { B: Buffer.from(state.sealed).toString('base64') },
                [attributes.revision]: { S: rev },
                [timeToLiveAttribute]: { N: String(state.expiresSeconds) },
              },
              ...condition(expected),
              ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
            },
            Deadline.after(this.clock, this.callLimitMs),
          )
          .then(
            (): Written => ({ rev }),
            (error: unknown) => (conditionFailed(error) ? { lost: refusingItem(error.body?.Item) } : failed(error)),
          ),
    };
  }
}

function condition(expected: Expected): AwsJson {
  const clauses: string[] = [];
  const values: Record<string, { S: string }> = {};
  if (expected.unversioned) {
    // Absent, or written by someone else with no string revision: garbage to overwrite, once (an honest write leaves a string).
    clauses.push('NOT attribute_type(#rev, :string)');
    values[':string'] = { S: 'S' };
  }
  if (expected.revs.length > 0) {
    const names = expected.revs.map((rev, index) => {
      values[`:rev${index}`] = { S: rev };
      return `:rev${index}`;
    });
    clauses.push(`#rev IN (${names.join(', ')})`);
  }
  return {
    ConditionExpression: clauses.join(' OR '),
    ExpressionAttributeNames: { '#rev': attributes.revision },
    ExpressionAttributeValues: values,
  };
}

const conditionFailed = (error: unknown): error is AwsCallError =>
  error instanceof AwsCallError && error.name === 'ConditionalCheckFailedException';
const refusingItem = (item: unknown): StoredItem | undefined => (isRecord(item) ? storedItem(item) : undefined);

/** An attribute's value of one type from DynamoDB's JSON (`{"S": ...}`), when the item has it as that type. */
function typed(raw: AwsJson, name: string, type: 'S' | 'N' | 'B'): string | undefined {
  const attribute = raw[name];
  const value = isRecord(attribute) ? attribute[type] : undefined;
  return typeof value === 'string' ? value : undefined;
}

function storedItem(raw: AwsJson): StoredItem {
  const expires = Number(typed(raw, timeToLiveAttribute, 'N') ?? Number.NaN);
  const sealed = typed(raw, attributes.state, 'B');
  return {
    rev: typed(raw, attributes.revision, 'S'),
    expiresSeconds: Number.isSafeInteger(expires) ? expires : undefined,
    sealed: sealed === undefined ? undefined : Buffer.from(sealed, 'base64'),
  };
}
