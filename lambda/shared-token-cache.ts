import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  type AttributeValue,
  ConditionalCheckFailedException,
  DeleteItemCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  type PutItemCommandInput,
} from '@aws-sdk/client-dynamodb';
import { ExchangeError, UPSTREAM_TIMEOUT_DESCRIPTION } from './errors';
import type { IdpToken } from './exchange';
import { type EntryKeys, entryKeys, expirySeconds, openEntry, sealEntry } from './sealed-token';
import { type Fetched, lifetimeOf, withRemainingLifetime } from './token-cache';
import { TOKEN_CACHE_TABLE } from './token-cache-table';

/** What one request did with the table, for its log line and metrics: never a key, a value or a message. */
export interface TableReport {
  /** Milliseconds spent in table calls, polls included. */
  latencyMs?: number;
  /** The failed call's error name (`TimeoutError`, `ResourceNotFoundException`, `ECONNREFUSED`...). */
  error?: string;
}

/** One request's look-up in the shared tier. */
export interface SharedLookup {
  readonly clientSecret: string;
  /** The request's token-shaping fields (`tokenShapingFields`). */
  readonly fields: string;
  /** `performance.now()` by which the caller must have its answer: the same deadline as a direct IdP call. */
  readonly deadline: number;
  /** The IdP exchange, given what is left of the deadline. */
  readonly fetchToken: (timeoutMs: number) => Promise<IdpToken>;
  readonly report: TableReport;
}

/**
 * The call timeout for a deadline: a tenth of it, at most 1 s (500 ms for the default 5 s). DynamoDB
 * answers in single-digit milliseconds in region; a call still pending after this long means the
 * table is in trouble, and the IdP is the better bet for what is left of the deadline.
 */
export function callTimeoutFor(upstreamTimeoutMs: number): number {
  return Math.max(1, Math.min(1000, Math.floor(upstreamTimeoutMs / 10)));
}

/** The key of the read that warms the client up; no request's key (43 base64url characters) is this. */
const WARM_UP_KEY = 'warm-up';
// How long a waiter sleeps between two reads: 25 ms, then doubling up to 200 ms. An IdP answers in
// tens to hundreds of milliseconds, so a waiter reads two or three times, and a burst of waiters on
// one hot key stays far below what one DynamoDB partition serves.
const FIRST_POLL_MS = 25;
const MAX_POLL_MS = 200;

const { partitionKey, timeToLiveAttribute, attributes } = TOKEN_CACHE_TABLE;

interface Item {
  readonly sealed?: Uint8Array;
  readonly expires?: number;
  readonly lease?: number;
  readonly revision?: string;
}

/** A table call that failed: the request carries on without the table. */
const FAILED = Symbol('failed');
type Failed = typeof FAILED;
/** A conditional write another instance got to first. */
const LOST = Symbol('lost');

/**
 * The fleet-wide tier: a DynamoDB table every function instance shares, behind each instance's
 * memory tier. Items hold tokens sealed with a key derived from the client secret (sealed-token.ts),
 * so the table alone yields nothing usable. When an item is missing or stale, one instance takes a
 * lease (a conditional write) and asks the IdP while the others poll for its entry; every wait and
 * every call stays within the request's deadline, and any table failure sends the request to the IdP.
 */
export class SharedTokenCache {
  private readonly client: DynamoDBClient;

  /** `callTimeoutMs`: the longest any one table call may take before the request goes on without the table. */
  constructor(
    private readonly tableName: string,
    private readonly callTimeoutMs: number,
  ) {
    // Region, endpoint (AWS_ENDPOINT_URL_DYNAMODB) and credentials come the standard way, from the
    // environment. One retry at most: a slow table must not turn into a storm of retries. What bounds
    // the time is each call's abort signal (TableCalls.call), retries included, so the request
    // handler needs no socket timeouts of its own.
    this.client = new DynamoDBClient({ maxAttempts: 2 });
    this.warmUp();
  }

  /**
   * One read while the function initialises, its answer ignored: the SDK loads the rest of itself
   * and opens its connection then, rather than on the first request, which would otherwise spend
   * part of its call timeout on it.
   */
  private warmUp(): void {
    const read = new GetItemCommand({ TableName: this.tableName, Key: { [partitionKey.name]: { S: WARM_UP_KEY } } });
    this.client.send(read, { abortSignal: AbortSignal.timeout(this.callTimeoutMs * 4) }).catch(() => undefined);
  }

  /** The token from the table, or from the IdP (then shared through the table). */
  async fetch(lookup: SharedLookup): Promise<Fetched> {
    const calls = new TableCalls(this.client, this.tableName, this.callTimeoutMs, lookup);
    const keys = entryKeys(lookup.clientSecret, lookup.fields);
    const item = await calls.get(keys.itemKey);
    if (item === FAILED) return this.fromIdp(lookup, keys, calls);
    const kept = usable(keys, item);
    if (kept) return kept;
    if (!leased(item)) {
      // Held until the holder's deadline, and one call beyond it for its write to land.
      const lease = await calls.takeLease(keys.itemKey, item, Date.now() + remaining(lookup) + this.callTimeoutMs);
      if (lease !== undefined) return this.fromIdp(lookup, keys, calls, lease);
    }
    return this.waitForHolder(lookup, keys, calls);
  }

  /**
   * Another instance holds the lease: read until its entry appears, the lease ends (the holder failed
   * or is gone: ask the IdP), or the deadline passes, as it would for a direct call to an IdP that slow.
   */
  private async waitForHolder(lookup: SharedLookup, keys: EntryKeys, calls: TableCalls): Promise<Fetched> {
    let pause = FIRST_POLL_MS;
    for (;;) {
      // A read is only worth making while a whole call still fits before the deadline: the last
      // pause ends there, and the waiter then answers as a direct call to an IdP that slow would,
      // without a read cut short (which would count as a table failure and send it to the IdP with
      // nothing left).
      await sleep(Math.max(0, Math.min(pause * (0.8 + Math.random() * 0.4), remaining(lookup) - this.callTimeoutMs)));
      if (remaining(lookup) < this.callTimeoutMs) throw new ExchangeError('upstream_timeout', UPSTREAM_TIMEOUT_DESCRIPTION);
      pause = Math.min(pause * 2, MAX_POLL_MS);
      const item = await calls.get(keys.itemKey);
      if (item === FAILED) return this.fromIdp(lookup, keys, calls);
      const kept = usable(keys, item);
      if (kept) return kept;
      if (!leased(item)) return this.fromIdp(lookup, keys, calls);
    }
  }

  /**
   * Ask the IdP with what is left of the deadline. A token with a usable lifetime is sealed into the
   * table (replacing any lease), unless the table already failed this request; a holder that gets no
   * token gives its lease back so the others stop waiting. Failures are never stored.
   */
  private async fromIdp(lookup: SharedLookup, keys: EntryKeys, calls: TableCalls, lease?: string): Promise<Fetched> {
    let token: IdpToken;
    try {
      // With nothing left, the exchange's own deadline ends it at once, as a 504.
      token = await lookup.fetchToken(Math.max(1, remaining(lookup)));
    } catch (error) {
      if (lease) await calls.releaseLease(keys.itemKey, lease);
      throw error;
    }
    const lifetime = lifetimeOf(token, Date.now());
    if (lifetime) await calls.putEntry(keys, { token, ...lifetime });
    else if (lease) await calls.releaseLease(keys.itemKey, lease);
    return { token, tier: 'miss' };
  }
}

/** The item's token with `expires_in` lowered to what is left, if it opens with these keys and is still fresh. */
function usable(keys: EntryKeys, item: Item | undefined): Fetched | undefined {
  if (!item?.sealed || item.expires === undefined) return undefined;
  const entry = openEntry(keys, item.sealed, item.expires);
  const now = Date.now();
  if (!entry || entry.staleAt <= now) return undefined;
  return {
    token: withRemainingLifetime(entry.token, entry.expiresAt, now),
    tier: 'shared',
    lifetime: { expiresAt: entry.expiresAt, staleAt: entry.staleAt },
  };
}

function leased(item: Item | undefined): boolean {
  return item?.lease !== undefined && item.lease > Date.now();
}

function remaining(lookup: SharedLookup): number {
  return Math.floor(lookup.deadline - performance.now());
}

/**
 * The table calls of one request, each bounded by the call timeout and the deadline. After the first
 * failure the request makes no more: the table is in trouble, and each call would only cost time.
 */
class TableCalls {
  private failed = false;

  constructor(
    private readonly client: DynamoDBClient,
    private readonly tableName: string,
    private readonly callTimeoutMs: number,
    private readonly lookup: SharedLookup,
  ) {}

  /** The item (undefined when there is none), strongly consistent so a fresh entry is seen at once. */
  async get(itemKey: string): Promise<Item | undefined | Failed> {
    const answer = await this.call((abortSignal) =>
      this.client.send(
        new GetItemCommand({ TableName: this.tableName, Key: { [partitionKey.name]: { S: itemKey } }, ConsistentRead: true }),
        { abortSignal },
      ),
    );
    if (answer === FAILED) return FAILED;
    return answer.Item && itemFrom(answer.Item);
  }

  /**
   * Take the lease with a conditional put: only if the item is still as it was read (absent, or the
   * same revision). Its revision when taken, or when the put failed: this instance then asks the IdP
   * as a holder would, and the request makes no more table calls, so there is no lease to give back.
   * Undefined when another instance was first.
   */
  async takeLease(itemKey: string, read: Item | undefined, until: number): Promise<string | undefined> {
    const revision = newRevision();
    const unchanged: Pick<PutItemCommandInput, 'ConditionExpression' | 'ExpressionAttributeNames' | 'ExpressionAttributeValues'> =
      read === undefined
        ? { ConditionExpression: 'attribute_not_exists(#pk)', ExpressionAttributeNames: { '#pk': partitionKey.name } }
        : read.revision === undefined
          ? { ConditionExpression: 'attribute_not_exists(#rev)', ExpressionAttributeNames: { '#rev': attributes.revision } }
          : {
              ConditionExpression: '#rev = :rev',
              ExpressionAttributeNames: { '#rev': attributes.revision },
              ExpressionAttributeValues: { ':rev': { S: read.revision } },
            };
    const answer = await this.call(
      (abortSignal) =>
        this.client.send(
          new PutItemCommand({
            TableName: this.tableName,
            Item: {
              [partitionKey.name]: { S: itemKey },
              [attributes.lease]: { N: String(until) },
              [attributes.revision]: { S: revision },
              [timeToLiveAttribute]: { N: String(expirySeconds(until)) },
            },
            ...unchanged,
          }),
          { abortSignal },
        ),
      LOST,
    );
    return answer === LOST ? undefined : revision;
  }

  /** Seal a token into the item, replacing whatever it held: any token the IdP just issued is good. */
  async putEntry(keys: EntryKeys, entry: Parameters<typeof sealEntry>[1]): Promise<void> {
    await this.call((abortSignal) =>
      this.client.send(
        new PutItemCommand({
          TableName: this.tableName,
          Item: {
            [partitionKey.name]: { S: keys.itemKey },
            [attributes.sealed]: { B: sealEntry(keys, entry) },
            [attributes.revision]: { S: newRevision() },
            [timeToLiveAttribute]: { N: String(expirySeconds(entry.expiresAt)) },
          },
        }),
        { abortSignal },
      ),
    );
  }

  /** Delete the item only while it is still this lease: an entry written meanwhile stays. */
  async releaseLease(itemKey: string, revision: string): Promise<void> {
    await this.call(
      (abortSignal) =>
        this.client.send(
          new DeleteItemCommand({
            TableName: this.tableName,
            Key: { [partitionKey.name]: { S: itemKey } },
            ConditionExpression: '#rev = :rev',
            ExpressionAttributeNames: { '#rev': attributes.revision },
            ExpressionAttributeValues: { ':rev': { S: revision } },
          }),
          { abortSignal },
        ),
      LOST,
    );
  }

  /**
   * One call within min(call timeout, deadline), timed into the report. A failure is logged by name
   * and ends the request's use of the table; a refused condition answers `onConditionFailed` if given.
   */
  private async call<T, C = never>(send: (abortSignal: AbortSignal) => Promise<T>, onConditionFailed?: C): Promise<T | C | Failed> {
    const budget = Math.min(this.callTimeoutMs, remaining(this.lookup));
    if (this.failed || budget <= 0) return FAILED;
    const report = this.lookup.report;
    const started = performance.now();
    try {
      return await send(AbortSignal.timeout(budget));
    } catch (error) {
      if (onConditionFailed !== undefined && error instanceof ConditionalCheckFailedException) return onConditionFailed;
      this.failed = true;
      report.error ??= tableErrorName(error);
      return FAILED;
    } finally {
      report.latencyMs = Math.round(((report.latencyMs ?? 0) + performance.now() - started) * 10) / 10;
    }
  }
}

function newRevision(): string {
  return randomBytes(12).toString('base64url');
}

/** The item's attributes of the expected types; anything else is as good as absent. */
function itemFrom(raw: Record<string, AttributeValue>): Item {
  const number = (value: AttributeValue | undefined): number | undefined => {
    const parsed = value?.N === undefined ? Number.NaN : Number(value.N);
    return Number.isFinite(parsed) ? parsed : undefined;
  };
  return {
    sealed: raw[attributes.sealed]?.B,
    expires: number(raw[timeToLiveAttribute]),
    lease: number(raw[attributes.lease]),
    revision: raw[attributes.revision]?.S,
  };
}

/** A name that says what failed, never a message (which could hold a table name or a key). */
export function tableErrorName(error: unknown): string {
  const { name, code } = (error ?? {}) as { name?: unknown; code?: unknown };
  // A socket's errno code says more than the class the SDK gives it (it names a reset `TimeoutError`).
  if (typeof code === 'string' && /^E[A-Z0-9_]{2,40}$/.test(code)) return code;
  // The only abort is the call timeout's.
  if (name === 'AbortError') return 'TimeoutError';
  return typeof name === 'string' && /^[A-Za-z0-9_.]{1,64}$/.test(name) ? name : 'Error';
}
