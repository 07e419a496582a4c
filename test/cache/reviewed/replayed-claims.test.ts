// A review found that old copies of a key's item, written back one after another by someone with
// write access, faked a live holder: a request waited to its deadline and answered 504 without asking
// the IdP. Now a waiter asks the holder to echo its name; a copy written back cannot, and the waiter
// takes over within a second (the contract: the table never costs an answer; a dead holder delays
// others by at most 1 s).
import { setTimeout as sleep } from 'node:timers/promises';
import { type AttributeValue, DynamoDBClient, GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { bodyOf, tokenEvent } from '../../support/events';
import { freshInstance, type Instance, issuingIdp } from '../../support/fleet';
import { type SharedTable, startSharedTable } from '../../support/shared-table';
import { startTokenServer, type TokenServer } from '../../support/token-server';

const SECRET = 'e1-secret-4410';
let server: TokenServer;
let table: SharedTable;
let raw: DynamoDBClient;
const instances: Instance[] = [];
const inst = (env: Record<string, string>) => {
  const i = freshInstance(env);
  instances.push(i);
  return i;
};
type Item = Record<string, AttributeValue>;

beforeAll(async () => {
  server = await startTokenServer();
  table = await startSharedTable('review-e1');
  Object.assign(process.env, { TOKEN_URL_ALLOWLIST: server.origin });
  raw = new DynamoDBClient({ endpoint: table.endpoint, region: 'us-east-1', credentials: { accessKeyId: 'l', secretAccessKey: 'l' } });
});
afterAll(async () => {
  for (const i of instances) i.close();
  raw.destroy();
  await table.close();
  await server.close();
});

/** What a table reader sees of one item while `work` runs: each version once, in order. */
async function recordWhile(itemKey: string, work: Promise<unknown>): Promise<Item[]> {
  const versions: Item[] = [];
  let done = false;
  void work.finally(() => (done = true));
  while (!done) {
    const { Item: item } = await raw.send(
      new GetItemCommand({ TableName: table.tableName, Key: { pk: { S: itemKey } }, ConsistentRead: true }),
    );
    const last = versions.at(-1);
    if (item && Buffer.compare(Buffer.from(item.state?.B ?? []), Buffer.from(last?.state?.B ?? [])) !== 0) versions.push(item);
    await sleep(10);
  }
  return versions;
}

it.each([
  ['control: nothing written back (deadline 3 s, IdP 2 s)', 0, 3000, 2000],
  ["the holder's recorded versions written back, one every 600 ms (deadline 3 s, IdP 2 s)", 600, 3000, 2000],
  ["the holder's recorded versions written back, one every 600 ms (deadline 5 s, the default; IdP 3 s)", 600, 5000, 3000],
  ["the holder's recorded versions written back at its own pace, one every 250 ms (deadline 3 s, IdP 2 s)", 250, 3000, 2000],
  ["the holder's recorded versions written back at table speed, one every 5 ms (deadline 3 s, IdP 2 s)", 5, 3000, 2000],
])('%s: a request after the holder is done gets a token within its deadline', async (_case, paceMs, deadlineMs, idpMs) => {
  const replay = paceMs > 0;
  // Prepare: tokens with no expires_in are never kept, so every request for the key is an exchange (the
  // item is all claims and outcomes); the IdP answers well within the deadline. H asks the IdP while a
  // table reader records the item's versions.
  server.answer(issuingIdp({ secret: () => SECRET, delayMs: idpMs, expiresIn: null, prefix: `e1-${deadlineMs}-${paceMs}` }));
  const env = { UPSTREAM_TIMEOUT_MS: String(deadlineMs) };
  const b = { client_id: `e1-client-${paceMs}-${deadlineMs}`, client_secret: SECRET, access_token_url: `${server.origin}/token` };
  const { itemKey } = table.keysOf(b);
  const [h, w] = [inst(env), inst(env)];
  await sleep(300);
  const holding = h.handle(tokenEvent(b));
  const versions = await recordWhile(itemKey, holding);
  const held = await holding;
  // The last version is the holder's outcome: everything before it is its claim, beat by beat.
  const beats = versions.slice(0, -1);
  server.received.length = 0;

  // Act: W asks; meanwhile the recorded beats go back into the table, slower than they were written
  let replaying = replay;
  const writeBack = (async () => {
    for (const item of beats) {
      if (!replaying) return;
      await raw.send(new PutItemCommand({ TableName: table.tableName, Item: item }));
      await sleep(paceMs);
    }
  })();
  if (replay) await sleep(20);
  const answer = await w.handle(tokenEvent(b));
  replaying = false;
  await writeBack;

  // Assess
  expect(held.statusCode).toBe(200);
  // At worst W goes to the IdP itself, which answers well within the deadline: 200.
  expect(answer.statusCode).toBe(200);
  expect(bodyOf(answer).access_token).not.toBe(bodyOf(held).access_token);
});
