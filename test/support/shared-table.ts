import { randomBytes } from 'node:crypto';
import { type AttributeValue, DynamoDBClient, PutItemCommand, ScanCommand } from '@aws-sdk/client-dynamodb';
import { epochMs } from '../../lambda/clock';
import type { ClaimFacts } from '../../lambda/cache/core/claims';
import { EMPTY_MEMO, type ItemState, keeping } from '../../lambda/cache/core/item';
import type { Entry } from '../../lambda/cache/core/lifetime';
import type { Remembered } from '../../lambda/cache/core/rules';
import { cacheSettings } from '../../lambda/cache/core/settings';
import { clientHoldKey, requestText, type SecretRequest } from '../../lambda/cache/request-key';
import { holdItemKeys, type ItemKeys, requestItemKeys, sealState } from '../../lambda/cache/shell/sealed-item';
import { parseTokenRequest, type TokenRequest } from '../../lambda/request/token-request';
import { localAwsEnvironment, type LocalDynamoDb, startLocalDynamoDb } from '../../local/dynamodb-local';
import { type LocalSecretsManager, startLocalSecretsManager } from '../../local/secrets-manager-local';
import { tokenEvent } from './events';

export type RawItem = Record<string, AttributeValue>;

/** The Secrets Manager secret that holds the pepper in the tests. */
export const PEPPER_SECRET = 'test-token-cache-pepper';

export interface SharedTable extends LocalDynamoDb {
  /** The pepper the function reads from the Secrets Manager stand-in: the tests derive item keys with it. */
  readonly pepper: Buffer;
  readonly secrets: LocalSecretsManager;
  /** Every item, as a reader of the table (or of a backup of it) would see them. */
  scan(): Promise<RawItem[]>;
  /** Write an item as it is, the way someone with write access to the table could. */
  put(item: RawItem): Promise<void>;
  /** The item key and seal key the function derives for a request body. */
  keysOf(body: Record<string, unknown>): ItemKeys;
  /** The keys of the hold item of a request body's client id and token URL. */
  holdKeysOf(body: Record<string, unknown>): ItemKeys;
  /** Write a state into a request's (or a hold's) item, sealed as the function seals it. */
  plant(keys: ItemKeys, state: ItemState, rev?: string): Promise<void>;
}

/**
 * A real DynamoDB-compatible server (dynalite, in this process) on 127.0.0.1 with the token cache
 * table, a Secrets Manager stand-in holding the pepper, and this process's AWS SDK settings and the
 * function's variables pointed at them, the standard way (AWS_ENDPOINT_URL_DYNAMODB, ..._SECRETS_MANAGER).
 */
export async function startSharedTable(tableName = 'token-cache-test'): Promise<SharedTable> {
  const local = await startLocalDynamoDb({ tableName });
  const pepper = randomBytes(32).toString('base64url');
  const secrets = await startLocalSecretsManager({ [PEPPER_SECRET]: pepper });
  Object.assign(process.env, localAwsEnvironment({ dynamoDb: local.endpoint, secretsManager: secrets.endpoint }), {
    TOKEN_CACHE: 'shared',
    TOKEN_CACHE_TABLE: tableName,
    TOKEN_CACHE_PEPPER_SECRET: PEPPER_SECRET,
  });
  const client = new DynamoDBClient({
    endpoint: local.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });
  const pepperBytes = Buffer.from(pepper, 'utf8');
  const put = async (item: RawItem) => {
    await client.send(new PutItemCommand({ TableName: tableName, Item: item }));
  };
  return {
    ...local,
    pepper: pepperBytes,
    secrets,
    async scan() {
      return (await client.send(new ScanCommand({ TableName: tableName, ConsistentRead: true }))).Items ?? [];
    },
    put,
    keysOf(body) {
      const request = parseTokenRequest(tokenEvent(body)) as SecretRequest;
      return requestItemKeys(pepperBytes, request.clientSecret, requestText(request, new URL(request.accessTokenUrl).href));
    },
    holdKeysOf(body) {
      const request = parseTokenRequest(tokenEvent(body)) as TokenRequest;
      return holdItemKeys(pepperBytes, clientHoldKey(request.clientId, new URL(request.accessTokenUrl).href));
    },
    async plant(keys, state, rev = randomBytes(6).toString('hex')) {
      const { sealed, expiresSeconds } = sealState(keys, state, cacheSettings(5000).rejectionFloorMs);
      await put({ pk: { S: keys.itemKey }, state: { B: sealed }, rev: { S: rev }, expires: { N: String(expiresSeconds) } });
    },
    async close() {
      client.destroy();
      await Promise.all([local.close(), secrets.close()]);
    },
  };
}

/** Item states as the function writes them, for a test to plant: `clock` dates what needs a date. */
export function itemStates(clock: () => number) {
  const memo = (kept: Omit<Entry, 'receivedBy' | 'copy'> | undefined, rejectedAt = 0) => {
    const rejected = { ...EMPTY_MEMO, rejectedAt: epochMs(rejectedAt) };
    return kept ? keeping(rejected, { ...kept, receivedBy: 'planted', copy: true }) : rejected;
  };
  return {
    /** A kept token, nothing under way. */
    kept: (entry: Entry): ItemState => ({ kind: 'key', memo: memo(entry), activity: { kind: 'idle' }, ended: [] }),
    /** A claim by `holder`, made `agoMs` before now on its own clock, with `leftMs` of its deadline left. */
    claim: (
      holder: string,
      { agoMs = 0, leftMs = 4900, beat = 0, kept }: { agoMs?: number; leftMs?: number; beat?: number; kept?: Entry } = {},
    ): ItemState => {
      const claim: ClaimFacts = { holder, beat, leftMs, runMs: 0, claimedAt: epochMs(clock() - agoMs), lineage: [], echoes: [] };
      return { kind: 'key', memo: memo(kept), activity: { kind: 'claim', claim }, ended: [] };
    },
    /** The failure a holder's exchange ended in, with the token it keeps and the key's last rejection. */
    failure: (holder: string, failure: Remembered, { kept, rejectedAt = 0 }: { kept?: Entry; rejectedAt?: number } = {}): ItemState => ({
      kind: 'key',
      memo: memo(kept, rejectedAt),
      activity: { kind: 'idle' },
      ended: [{ holder, lineage: [], outcome: { kind: 'failure', failure } }],
    }),
    /** A hold until `untilMs` from now. */
    hold: (untilMs: number): ItemState => ({ kind: 'hold', hold: { code: 'upstream_throttled', until: epochMs(clock() + untilMs) } }),
  };
}
