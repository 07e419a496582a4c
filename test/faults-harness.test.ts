import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { DynamoDBClient, GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { build } from 'esbuild';
import { readToken, type ScriptedIdp, startScriptedIdp } from '../faults/idp';
import type { ReplayCommand, ReplayReport } from '../faults/replayer';
import { type Answer, Tally, wrongToken } from '../faults/tally';
import { lambdaBuildOptions } from '../infra/bundling';
import { type LocalDynamoDb, startLocalDynamoDb } from '../local/dynamodb-local';
import { startHandlerProcess } from '../local/handler-process';
import { bodyOf, tokenEvent } from './support/events';

// `npm run faults` judges the cache by what its parts say: a wrong verdict, an IdP that answers off script, a handler
// process that runs the sources instead of the bundle, or a writer that never writes an old version back would make its
// table say nothing. Each part is tested here against real servers on 127.0.0.1.

const FAR = 3600;

/** A 200 as the campaign sees it, for a token named as the scripted IdP names them. */
function answerWith(clientId: string, issuedAt: number, expiresIn: number, body: Record<string, unknown> = {}): Answer {
  const access_token = [clientId, issuedAt, expiresIn].join('~');
  const sentAt = issuedAt + 1000;
  return { clientId, sentAt, ms: 2, status: 200, cache: 'hit', body: JSON.stringify({ access_token, expires_in: expiresIn - 1, ...body }) };
}

describe("the campaign's judge", () => {
  it('takes a live token of the asking key, with what is left of its life, as a good answer', () => {
    expect(wrongToken(answerWith('s1-shared-k0', Date.now(), FAR))).toBeUndefined();
  });

  it('names a token of another key, an expired one, one within 5 s of its expiry and an expires_in longer than its life', () => {
    // Prepare
    const issuedAt = Date.now() - 40_000;
    const another = { ...answerWith('s1-shared-k1', Date.now(), FAR), clientId: 's1-shared-k0' };
    // Act / Assess
    expect(wrongToken(another)).toBe('of another key');
    expect(wrongToken({ ...answerWith('s1-shared-k0', issuedAt, 40), sentAt: issuedAt + 39_999, ms: 2 })).toBe('expired');
    expect(wrongToken({ ...answerWith('s1-shared-k0', issuedAt, 40), sentAt: issuedAt + 36_500, ms: 2 })).toBe('near expiry');
    expect(wrongToken({ ...answerWith('s1-shared-k0', issuedAt, 40), sentAt: issuedAt + 35_500, ms: 2 })).toBe('expires_in too long');
    expect(wrongToken(answerWith('s1-shared-k0', Date.now(), 40, { expires_in: 42 }))).toBe('expires_in too long');
    expect(wrongToken({ ...answerWith('x', 0, 0), body: '{"access_token":"not-the-idps"}' })).toBe('of another key');
  });

  it('counts an answer past the deadline + 100 ms as late, and a wrong token as no 200', () => {
    // Prepare
    const tally = new Tally(Date.now(), 5000, 1000);
    const good = answerWith('s1-off-k0', Date.now(), FAR);
    // Act
    tally.add({ ...good, ms: 5100 });
    tally.add({ ...good, ms: 5101 });
    tally.add({ ...good, clientId: 's1-off-k1' });
    // Assess
    expect({ ok: tally.ok, late: tally.late, wrong: [...tally.wrong] }).toEqual({ ok: 2, late: 1, wrong: [['of another key', 1]] });
  });
});

describe('the scripted IdP', () => {
  let idp: ScriptedIdp;
  beforeAll(async () => (idp = await startScriptedIdp()));
  afterAll(() => idp.close());

  const post = (clientId: string) =>
    fetch(idp.tokenUrl, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(`${clientId}:secret`).toString('base64')}` },
      body: 'grant_type=client_credentials',
    });

  it('answers each key as its script says at that moment, names its tokens and records every answer', async () => {
    // Prepare: key 0 held for the first minute, key 1 given 40 s tokens
    idp.play(
      (key, atMs) => (key === 0 && atMs < 60_000 ? { delayMs: 0, status: 429, retryAfter: 2 } : { delayMs: 0, status: 200, expiresIn: 40 }),
      Date.now(),
    );
    // Act
    const [held, given] = [await post('s3-memory-k0'), await post('s3-memory-k1')];
    // Assess
    expect([held.status, held.headers.get('retry-after')]).toEqual([429, '2']);
    const { access_token, expires_in } = (await given.json()) as { access_token: string; expires_in: number };
    expect({ token: readToken(access_token), expires_in }).toEqual({
      token: { clientId: 's3-memory-k1', issuedAt: expect.any(Number), expiresIn: 40 },
      expires_in: 40,
    });
    expect([idp.visits.get('s3-memory-k0')?.map((visit) => visit.status), idp.visits.get('s3-memory-k1')?.length]).toEqual([[429], 1]);
  });
});

describe('a handler process given the bundle', () => {
  it("answers with the deployed bundle's handler, and reports its own duration and CPU time", async () => {
    // Prepare: the bundle as the stack builds it, an IdP answering after 200 ms
    const dir = mkdtempSync(join(tmpdir(), 'faults-bundle-'));
    const idp = await startScriptedIdp();
    idp.play(() => ({ delayMs: 200, status: 200, expiresIn: 20 }), Date.now());
    const bundle = join(dir, 'index.js');
    await build({ ...lambdaBuildOptions(bundle), logLevel: 'silent' });
    const instance = await startHandlerProcess({ TOKEN_URL_ALLOWLIST: idp.origin, TOKEN_CACHE: 'off' }, { bundle });
    try {
      // Act
      const { result, ms } = await instance.measure(tokenEvent({ client_id: 'b-k0', client_secret: 's', access_token_url: idp.tokenUrl }));
      // Assess: the bundle logs to its own stdout, so no record comes back, as none does from a deployed function
      expect(readToken(bodyOf(result).access_token)?.clientId).toBe('b-k0');
      expect([ms >= 200, instance.cpuMs > 0, instance.records]).toEqual([true, true, []]);
    } finally {
      await instance.stop();
      await idp.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the table writer', () => {
  let table: LocalDynamoDb;
  let writer: ChildProcess;
  const client = () =>
    new DynamoDBClient({ endpoint: table.endpoint, region: 'us-east-1', credentials: { accessKeyId: 'l', secretAccessKey: 'l' } });
  const command = async <T>(sent: ReplayCommand): Promise<T> => {
    const answered = once(writer, 'message') as Promise<[T]>;
    writer.send(sent);
    return (await answered)[0];
  };

  beforeAll(async () => {
    table = await startLocalDynamoDb({ tableName: 'faults-writer' });
    writer = fork(join(__dirname, '..', 'faults', 'replayer.ts'), [table.endpoint, table.tableName], {
      execArgv: ['--import', 'tsx'],
      env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    await once(writer, 'message');
  });
  afterAll(async () => {
    writer.disconnect();
    await once(writer, 'exit');
    await table.close();
  });

  it('writes back an old version of an item after it changed, and leaves out what the table held before it recorded', async () => {
    // Prepare: one item before recording, then another item in two versions
    const db = client();
    const put = (pk: string, version: string) =>
      db.send(new PutItemCommand({ TableName: table.tableName, Item: { pk: { S: pk }, v: { S: version } } }));
    await put('before', 'b1');
    await command({ kind: 'record' });
    // Each version stands longer than the writer takes to find a new item (a scan every 500 ms) and read it again
    await put('item', 'v1');
    await sleep(700);
    await put('item', 'v2');
    await sleep(700);
    // Act
    writer.send({ kind: 'replay', gapMs: 0 } satisfies ReplayCommand);
    let restored = false;
    for (let tries = 0; !restored && tries < 100; tries++) {
      const { Item } = await db.send(new GetItemCommand({ TableName: table.tableName, Key: { pk: { S: 'item' } }, ConsistentRead: true }));
      restored = Item?.v?.S === 'v1';
    }
    const report = await command<ReplayReport>({ kind: 'stop' });
    db.destroy();
    // Assess
    expect({ restored, versions: report.versions, items: report.items, wrote: report.writes > 0 }).toEqual({
      restored: true,
      versions: 2,
      items: 1,
      wrote: true,
    });
  });
});
