import { randomBytes } from 'node:crypto';
import {
  type AttributeValue,
  ConditionalCheckFailedException,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  type PutItemCommandInput,
} from '@aws-sdk/client-dynamodb';
import { TABLE_SCHEMA } from './table-schema';
import { remaining } from './outcome';
import type { CacheReport } from './report';
import type { SealedState } from './item-state';

const { partitionKey, timeToLiveAttribute, attributes } = TABLE_SCHEMA;

/** An item's attributes of the expected types; anything else is as good as absent. */
export interface StoredItem {
  readonly rev: string | undefined;
  readonly expiresSeconds: number | undefined;
  readonly sealed: Uint8Array | undefined;
}

/** One read of an item (undefined: there is none), and when the call started and ended (`performance.now()`). */
export interface Read {
  readonly item: StoredItem | undefined;
  readonly startedAt: number;
  readonly endedAt: number;
}

/** A write that landed (its new revision), or a condition that failed, with the item that failed it when DynamoDB said. */
export type Written = { readonly rev: string } | { readonly lost: Read | undefined };

/** A call that failed or ran out of time: the request carries on without the table. */
export const FAILED = Symbol('failed');
export type Failed = typeof FAILED;

/** What a write expects to find: no item, an item at a revision (or at none), or anything. */
export type Expected = Pick<StoredItem, 'rev'> | undefined | 'anything';

/**
 * The table calls of one request, each bounded by the call limit and by the request's deadline. After
 * a failure the request makes no more: the table is in trouble, and each call would only cost time.
 */
export class TableCalls {
  private failed = false;
  private inFlight = 0;
  private busySince = 0;

  constructor(
    private readonly client: DynamoDBClient,
    private readonly tableName: string,
    private readonly callLimitMs: number,
    private readonly deadline: number,
    private readonly report: CacheReport,
  ) {}

  /** The item, strongly consistent so a write of another instance is seen at once. */
  async get(itemKey: string): Promise<Read | Failed> {
    const startedAt = performance.now();
    const answer = await this.call((abortSignal) =>
      this.client.send(
        new GetItemCommand({ TableName: this.tableName, Key: { [partitionKey.name]: { S: itemKey } }, ConsistentRead: true }),
        { abortSignal },
      ),
    );
    if (answer === FAILED) return FAILED;
    return { item: answer.Item && storedItem(answer.Item), startedAt, endedAt: performance.now() };
  }

  /**
   * Write a sealed state under a new revision, if the item is still as expected. A refused condition
   * comes back with the item that refused it (DynamoDB's `ALL_OLD`), where the server returns one.
   */
  async put(itemKey: string, state: SealedState, expected: Expected): Promise<Written | Failed> {
    const rev = randomBytes(12).toString('base64url');
    const startedAt = performance.now();
    const answer = await this.call(
      (abortSignal) =>
        this.client.send(
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
          { abortSignal },
        ),
      (refused) => ({ lost: refused.Item && { item: storedItem(refused.Item), startedAt, endedAt: performance.now() } }),
    );
    if (answer === FAILED) return FAILED;
    return 'lost' in answer ? answer : { rev };
  }

  /**
   * One call within the call limit and what is left of the deadline, timed into the report. A refused
   * condition goes to `onRefused`; any other failure is reported by name and ends the request's use of
   * the table. Running out of deadline is not the table's failure, and is not reported as one.
   */
  private async call<T, R = never>(
    send: (abortSignal: AbortSignal) => Promise<T>,
    onRefused?: (refused: ConditionalCheckFailedException) => R,
  ): Promise<T | R | Failed> {
    const left = remaining(this.deadline);
    const budget = Math.min(this.callLimitMs, left);
    if (this.failed || budget <= 0) return FAILED;
    if (this.inFlight++ === 0) this.busySince = performance.now();
    try {
      return await send(AbortSignal.timeout(budget));
    } catch (error) {
      if (onRefused && error instanceof ConditionalCheckFailedException) return onRefused(error);
      this.failed = true;
      if (budget === this.callLimitMs || !isAbort(error)) this.report.tableError ??= tableErrorName(error);
      return FAILED;
    } finally {
      // Wall time with at least one call out, so calls made side by side count once.
      if (--this.inFlight === 0) {
        this.report.tableLatencyMs = Math.round(((this.report.tableLatencyMs ?? 0) + performance.now() - this.busySince) * 10) / 10;
      }
    }
  }
}

function condition(
  expected: Expected,
): Pick<PutItemCommandInput, 'ConditionExpression' | 'ExpressionAttributeNames' | 'ExpressionAttributeValues'> {
  if (expected === 'anything') return {};
  if (expected === undefined)
    return { ConditionExpression: 'attribute_not_exists(#pk)', ExpressionAttributeNames: { '#pk': partitionKey.name } };
  if (expected.rev === undefined) {
    return { ConditionExpression: 'attribute_not_exists(#rev)', ExpressionAttributeNames: { '#rev': attributes.revision } };
  }
  return {
    ConditionExpression: '#rev = :rev',
    ExpressionAttributeNames: { '#rev': attributes.revision },
    ExpressionAttributeValues: { ':rev': { S: expected.rev } },
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

// The SDK throws Error objects only.
function isAbort(error: unknown): boolean {
  return (error as Error).name === 'AbortError';
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
