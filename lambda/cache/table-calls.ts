import {
  type AttributeValue,
  ConditionalCheckFailedException,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  type PutItemCommandInput,
} from '@aws-sdk/client-dynamodb';
import { TABLE_SCHEMA } from './table-schema';
import type { SealedState } from './item-state';
import type { Expected } from './protocol';
import type { CacheReport } from './report';

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
 * One read goes out at once, its answer ignored: the SDK loads the rest of itself and opens its
 * connection while the function initialises, rather than on the first request's hedge.
 */
export function dynamoDbTable(tableName: string, callLimitMs: number): DynamoDbTable {
  const client = new DynamoDBClient({ maxAttempts: 2 });
  const warmUp = new GetItemCommand({ TableName: tableName, Key: { [partitionKey.name]: { S: WARM_UP_KEY } } });
  client.send(warmUp, { abortSignal: AbortSignal.timeout(callLimitMs * 4) }).catch(() => undefined);
  return new DynamoDbTable(client, tableName, callLimitMs);
}

/**
 * The table in DynamoDB. Each call is bounded by the call limit alone, and fails alone: a slow read of
 * one item never keeps a request from its other calls (the protocol's hedge keeps the caller from
 * waiting on any of them). A refused condition comes back with the item that refused it (`ALL_OLD`),
 * where the server returns one.
 */
export class DynamoDbTable implements Table {
  constructor(
    private readonly client: DynamoDBClient,
    private readonly tableName: string,
    private readonly callLimitMs: number,
  ) {}

  calls(report: CacheReport): TableCalls {
    let inFlight = 0;
    let busySince = 0;
    // Wall time with at least one call out, so calls made side by side count once.
    const timed = async <T>(call: () => Promise<T>): Promise<T> => {
      if (inFlight++ === 0) busySince = performance.now();
      try {
        return await call();
      } finally {
        if (--inFlight === 0) report.tableLatencyMs = Math.round(((report.tableLatencyMs ?? 0) + performance.now() - busySince) * 10) / 10;
      }
    };
    const failed = (error: unknown): Failed => {
      report.tableError ??= tableErrorName(error);
      return FAILED;
    };
    return {
      get: (itemKey) =>
        timed(() =>
          this.client
            .send(new GetItemCommand({ TableName: this.tableName, Key: { [partitionKey.name]: { S: itemKey } }, ConsistentRead: true }), {
              abortSignal: AbortSignal.timeout(this.callLimitMs),
            })
            .then((answer) => answer.Item && storedItem(answer.Item), failed),
        ),
      put: (itemKey, state, expected, rev) =>
        timed(() =>
          this.client
            .send(
              new PutItemCommand({
                TableName: this.tableName,
                Item: {
                  [partitionKey.name]: { S: itemKey },
                  [attributes.state]: { B: state.sealed },
                  [attributes.revision]: { S: rev },
                  [timeToLiveAttribute]: { N: String(state.expiresSeconds) },
                },
                ...condition(expected),
                ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
              }),
              { abortSignal: AbortSignal.timeout(this.callLimitMs) },
            )
            .then(
              (): Written => ({ rev }),
              (error: unknown) =>
                error instanceof ConditionalCheckFailedException ? { lost: error.Item && storedItem(error.Item) } : failed(error),
            ),
        ),
    };
  }
}

function condition(
  expected: Expected,
): Pick<PutItemCommandInput, 'ConditionExpression' | 'ExpressionAttributeNames' | 'ExpressionAttributeValues'> {
  const clauses: string[] = [];
  const values: Record<string, AttributeValue> = {};
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

function storedItem(raw: Record<string, AttributeValue>): StoredItem {
  const expires = Number(raw[timeToLiveAttribute]?.N ?? Number.NaN);
  return {
    rev: raw[attributes.revision]?.S,
    expiresSeconds: Number.isSafeInteger(expires) ? expires : undefined,
    sealed: raw[attributes.state]?.B,
  };
}

/** A name that says what failed, never a message (which could hold a table name or a key). */
export function tableErrorName(error: unknown): string {
  const { name, code } = (error ?? {}) as { name?: unknown; code?: unknown };
  // A socket's errno code says more than the class the SDK gives it (it names a reset `TimeoutError`).
  if (typeof code === 'string' && /^E[A-Z0-9_]{2,40}$/.test(code)) return code;
  // The only abort is the call limit's.
  if (name === 'AbortError') return 'TimeoutError';
  return typeof name === 'string' && /^[A-Za-z0-9_.]{1,64}$/.test(name) ? name : 'Error';
}
