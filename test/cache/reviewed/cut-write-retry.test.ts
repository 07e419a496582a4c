// A review found that a conditional PutItem whose first attempt landed and whose answer was lost to a
// cut socket was retried by the client, refused by the condition the first attempt satisfied, and read
// as another writer's win: a cold key's request then waited on its own claim. A refusal by the item at
// the write's own revision is that write: the visit goes on as the holder.
import { DYNAMODB } from '../../../lambda/aws/endpoints';
import { awsJsonClient } from '../../../lambda/aws/json-client';
import { systemClock } from '../../../lambda/clock';
import { DynamoDbTable } from '../../../lambda/cache/shell/table-calls';
import { localAwsEnvironment, type LocalDynamoDb, startLocalDynamoDb } from '../../../local/dynamodb-local';
import { startTableProxy, type TableProxy } from '../../../local/table-proxy';
import { freshInstance, type Instance } from '../../support/fleet';
import { startSharedTable, type SharedTable } from '../../support/shared-table';
import { tokenEvent } from '../../support/events';
import { DEMO_TOKEN, json, startTokenServer, type TokenServer } from '../../support/token-server';

// The proxy cuts the answer (`cut-answer`) and, as DynamoDB does and dynalite does not, adds the ALL_OLD item to a refusal.

/** The operations (`PutItem`) the proxy has seen, in order. */
const operations = (proxy: TableProxy): string[] => proxy.received.map(({ operation }) => operation.split('.').pop() ?? '');

describe('a conditional PutItem that landed, its answer cut, and retried by the client', () => {
  const TABLE = 'security-review-cut';
  let db: LocalDynamoDb;
  let proxy: TableProxy;
  let table: DynamoDbTable;

  beforeAll(async () => {
    db = await startLocalDynamoDb({ tableName: TABLE });
    proxy = await startTableProxy(db.endpoint);
    const env = { ...process.env, ...localAwsEnvironment({ dynamoDb: proxy.endpoint }) };
    table = new DynamoDbTable(awsJsonClient(DYNAMODB, env, systemClock()), TABLE, 2000, systemClock());
  });
  afterAll(async () => {
    await proxy.close();
    await db.close();
  });

  it('is in the table under its own revision, and the retry comes back refused by that very revision', async () => {
    // Prepare: a claim of a new item (expected absent), as the protocol's first write on a cold key.
    const state = { sealed: new Uint8Array([1, 2, 3]), expiresSeconds: Math.floor(Date.now() / 1000) + 60 } as never;
    proxy.set({ kind: 'cut-answer', only: 'PutItem' });
    const calls = table.calls({});

    // Act
    const written = await calls.put('cut-item-1', state, { revs: [], unversioned: true }, 'holder-A.0');
    const after = await calls.get('cut-item-1');

    // Assess
    expect(operations(proxy).filter((op) => op === 'PutItem')).toHaveLength(2); // the client retried after the cut
    expect((after as { rev?: string }).rev).toBe('holder-A.0'); // the first attempt landed
    // The table calls say what DynamoDB said; the shared tier reads a refusal at the write's own revision as its own write.
    expect(written).toMatchObject({ lost: { rev: 'holder-A.0' } });
  });
});

describe('a cold key whose claim lands but whose answer is cut', () => {
  let shared: SharedTable;
  let proxy: TableProxy;
  let server: TokenServer;
  let member: Instance;
  const SECRET = 'cut-claim-secret';

  beforeAll(async () => {
    shared = await startSharedTable('security-review-cut-claims');
    server = await startTokenServer();
    server.answer(json(200, DEMO_TOKEN));
    // DynamoDB answers a refused write with the item that refused it; dynalite needs the proxy for that.
    proxy = await startTableProxy(shared.endpoint);
    const saved = process.env.AWS_ENDPOINT_URL_DYNAMODB;
    process.env.AWS_ENDPOINT_URL_DYNAMODB = proxy.endpoint;
    try {
      member = freshInstance({ TOKEN_URL_ALLOWLIST: server.origin });
      // Warm: the pepper loaded and the table's connection open, as a warm Lambda instance's are.
      await member.handle(tokenEvent({ client_id: 'warm', client_secret: SECRET, access_token_url: `${server.origin}/token` }));
    } finally {
      process.env.AWS_ENDPOINT_URL_DYNAMODB = saved;
    }
  });
  afterAll(async () => {
    member.close();
    await proxy.close();
    await server.close();
    await shared.close();
  });

  const ask = (clientId: string) => tokenEvent({ client_id: clientId, client_secret: SECRET, access_token_url: `${server.origin}/token` });

  it('control: with no cut, reads the item and the hold, claims, asks the IdP and settles', async () => {
    const before = proxy.received.length;
    const answer = await member.handle(ask('cut-control'));
    expect([answer.statusCode, answer.headers?.['x-token-cache']]).toEqual([200, 'miss']);
    expect(operations(proxy).slice(before).sort()).toEqual(['GetItem', 'GetItem', 'PutItem', 'PutItem']);
  });

  it('goes on as the holder: no read of its own claim, one IdP request, the outcome settled', async () => {
    // Prepare: cut the answer of the claim of this key (its first PutItem).
    const { itemKey } = shared.keysOf({ client_id: 'cut-claim', client_secret: SECRET, access_token_url: `${server.origin}/token` });
    proxy.set({ kind: 'cut-answer', only: 'PutItem', matching: itemKey });
    const before = proxy.received.length;
    const idpBefore = server.received.length;

    // Act
    const answer = await member.handle(ask('cut-claim'));

    // Assess: the item and the hold read, the claim and its retry, the settle; no polling of its own claim.
    const calls = operations(proxy).slice(before);
    expect([answer.statusCode, answer.headers?.['x-token-cache']]).toEqual([200, 'miss']);
    expect(calls.sort()).toEqual(['GetItem', 'GetItem', 'PutItem', 'PutItem', 'PutItem']);
    expect(server.received.length - idpBefore).toBe(1);
  });
});
