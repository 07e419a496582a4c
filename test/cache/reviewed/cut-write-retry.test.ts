// A review found that a conditional PutItem whose first attempt landed and whose answer was lost to a
// cut socket was retried by the client, refused by the condition the first attempt satisfied, and read
// as another writer's win: a cold key's request then waited on its own claim. A refusal by the item at
// the write's own revision is that write: the visit goes on as the holder.
import { once } from 'node:events';
import { createServer, request as forward, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
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

/** A proxy that passes every call, except that it lets the next matching one land and then cuts the caller's socket. */
interface Cutter {
  readonly endpoint: string;
  readonly seen: string[];
  cutNext(operation: string, matching?: string): void;
  close(): Promise<void>;
}

async function startCutter(target: string): Promise<Cutter> {
  let armed: { operation: string; matching?: string } | undefined;
  const seen: string[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((incoming, outgoing) => {
    const chunks: Buffer[] = [];
    incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
    incoming.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const operation =
        String(incoming.headers['x-amz-target'] ?? '')
          .split('.')
          .pop() ?? '';
      seen.push(operation);
      const cut = armed !== undefined && armed.operation === operation && (armed.matching === undefined || body.includes(armed.matching));
      if (cut) armed = undefined;
      const upstream = forward(target, { method: 'POST', headers: incoming.headers as IncomingHttpHeaders }, (answer) => {
        const parts: Buffer[] = [];
        answer.on('data', (chunk: Buffer) => parts.push(chunk));
        answer.on('end', () => {
          // The write landed and DynamoDB answered; the caller never hears it.
          if (cut) return void incoming.socket.destroy();
          const { 'transfer-encoding': _chunked, ...headers } = answer.headers;
          const text = Buffer.concat(parts);
          outgoing.writeHead(answer.statusCode ?? 502, { ...headers, 'content-length': String(text.length) });
          outgoing.end(text);
        });
      });
      upstream.on('error', () => outgoing.destroy());
      upstream.end(body);
    });
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    cutNext(operation, matching) {
      armed = { operation, matching };
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}

describe('a conditional PutItem that landed, its answer cut, and retried by the client', () => {
  const TABLE = 'security-review-cut';
  let db: LocalDynamoDb;
  let allOld: TableProxy; // adds the ALL_OLD item to a refusal, as DynamoDB does and dynalite does not
  let cutter: Cutter;
  let table: DynamoDbTable;

  beforeAll(async () => {
    db = await startLocalDynamoDb({ tableName: TABLE });
    allOld = await startTableProxy(db.endpoint);
    cutter = await startCutter(allOld.endpoint);
    const env = { ...process.env, ...localAwsEnvironment({ dynamoDb: cutter.endpoint }) };
    table = new DynamoDbTable(awsJsonClient(DYNAMODB, env, systemClock()), TABLE, 2000, systemClock());
  });
  afterAll(async () => {
    await cutter.close();
    await allOld.close();
    await db.close();
  });

  it('is in the table under its own revision, and the retry comes back refused by that very revision', async () => {
    // Prepare: a claim of a new item (expected absent), as the protocol's first write on a cold key.
    const state = { sealed: new Uint8Array([1, 2, 3]), expiresSeconds: Math.floor(Date.now() / 1000) + 60 } as never;
    cutter.cutNext('PutItem');
    const calls = table.calls({});

    // Act
    const written = await calls.put('cut-item-1', state, { revs: [], unversioned: true }, 'holder-A.0');
    const after = await calls.get('cut-item-1');

    // Assess
    expect(cutter.seen.filter((op) => op === 'PutItem')).toHaveLength(2); // the client retried after the cut
    expect((after as { rev?: string }).rev).toBe('holder-A.0'); // the first attempt landed
    // The table calls say what DynamoDB said; the shared tier reads a refusal at the write's own revision as its own write.
    expect(written).toMatchObject({ lost: { rev: 'holder-A.0' } });
  });
});

describe('a cold key whose claim lands but whose answer is cut', () => {
  let shared: SharedTable;
  let allOldShared: TableProxy;
  let cutter: Cutter;
  let server: TokenServer;
  let member: Instance;
  const SECRET = 'cut-claim-secret';

  beforeAll(async () => {
    shared = await startSharedTable('security-review-cut-claims');
    server = await startTokenServer();
    server.answer(json(200, DEMO_TOKEN));
    // DynamoDB answers a refused write with the item that refused it; dynalite needs the proxy for that.
    allOldShared = await startTableProxy(shared.endpoint);
    cutter = await startCutter(allOldShared.endpoint);
    const saved = process.env.AWS_ENDPOINT_URL_DYNAMODB;
    process.env.AWS_ENDPOINT_URL_DYNAMODB = cutter.endpoint;
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
    await cutter.close();
    await allOldShared.close();
    await server.close();
    await shared.close();
  });

  const ask = (clientId: string) => tokenEvent({ client_id: clientId, client_secret: SECRET, access_token_url: `${server.origin}/token` });

  it('control: with no cut, reads the item and the hold, claims, asks the IdP and settles', async () => {
    const before = cutter.seen.length;
    const answer = await member.handle(ask('cut-control'));
    expect([answer.statusCode, answer.headers?.['x-token-cache']]).toEqual([200, 'miss']);
    expect(cutter.seen.slice(before).sort()).toEqual(['GetItem', 'GetItem', 'PutItem', 'PutItem']);
  });

  it('goes on as the holder: no read of its own claim, one IdP request, the outcome settled', async () => {
    // Prepare: cut the answer of the claim of this key (its first PutItem).
    const { itemKey } = shared.keysOf({ client_id: 'cut-claim', client_secret: SECRET, access_token_url: `${server.origin}/token` });
    cutter.cutNext('PutItem', itemKey);
    const before = cutter.seen.length;
    const idpBefore = server.received.length;

    // Act
    const answer = await member.handle(ask('cut-claim'));

    // Assess: the item and the hold read, the claim and its retry, the settle; no polling of its own claim.
    const calls = cutter.seen.slice(before);
    expect([answer.statusCode, answer.headers?.['x-token-cache']]).toEqual([200, 'miss']);
    expect(calls.sort()).toEqual(['GetItem', 'GetItem', 'PutItem', 'PutItem', 'PutItem']);
    expect(server.received.length - idpBefore).toBe(1);
  });
});
