import { type AttributeValue, DynamoDBClient, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { DYNAMODB } from '../../../lambda/aws/endpoints';
import { awsJsonClient } from '../../../lambda/aws/json-client';
import type { Expected } from '../../../lambda/cache/core/visit';
import type { CacheReport } from '../../../lambda/cache/report';
import type { SealedState } from '../../../lambda/cache/shell/sealed-item';
import { DynamoDbTable, dynamoDbTable, FAILED, type TableCalls } from '../../../lambda/cache/shell/table-calls';
import { localAwsEnvironment, type LocalDynamoDb, startLocalDynamoDb } from '../../../local/dynamodb-local';
import { startTableProxy, type TableProxy } from '../../../local/table-proxy';
import { manualClock, type ManualClock, settle } from '../../support/manual-clock';

// The table calls against a real DynamoDB-compatible server (dynalite), behind the proxy that adds
// the refusing item to a refused write as DynamoDB does; and with the proxy holding each call until
// the test answers it, for the call limit and answers dynalite never gives.

const TABLE = 'table-calls-test';
const LIMIT_MS = 1000;
const STATE: SealedState = { sealed: Buffer.from('sealed state, opaque to the table'), expiresSeconds: 1_800_000_000 };
const ABSENT: Expected = { revs: [], unversioned: true };
const at = (...revs: string[]): Expected => ({ revs, unversioned: false });

let db: LocalDynamoDb;
let proxy: TableProxy;
let raw: DynamoDBClient;
let clock: ManualClock;
let report: CacheReport;
let calls: TableCalls;
let keys = 0;
/** An item key of its own for each use. */
const fresh = () => `item-${++keys}`;
const env = (endpoint: string) => ({ ...process.env, ...localAwsEnvironment({ dynamoDb: endpoint }) });
const tableAt = (endpoint: string, tableName = TABLE) =>
  new DynamoDbTable(awsJsonClient(DYNAMODB, env(endpoint), clock), tableName, LIMIT_MS, clock);
/** Write an item as anyone with write access to the table could. */
const plant = (pk: string, attributes: Record<string, AttributeValue>) =>
  raw.send(new PutItemCommand({ TableName: TABLE, Item: { pk: { S: pk }, ...attributes } }));

beforeAll(async () => {
  db = await startLocalDynamoDb({ tableName: TABLE });
  proxy = await startTableProxy(db.endpoint);
  raw = new DynamoDBClient({ endpoint: db.endpoint, region: 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
});
beforeEach(() => {
  clock = manualClock();
  report = {};
  proxy.set({ kind: 'pass' });
  calls = tableAt(proxy.endpoint).calls(report);
});
afterAll(async () => {
  raw.destroy();
  await proxy.close();
  await db.close();
});

describe('get', () => {
  it('finds no item where none was written', async () => {
    expect(await calls.get(fresh())).toBeUndefined();
  });

  it('reads an item as written, strongly consistent', async () => {
    const pk = fresh();
    await calls.put(pk, STATE, ABSENT, 'rev-1');

    expect(await calls.get(pk)).toEqual({ rev: 'rev-1', expiresSeconds: STATE.expiresSeconds, sealed: STATE.sealed });
    expect(JSON.parse(proxy.received.at(-1)?.body ?? '{}')).toMatchObject({
      TableName: TABLE,
      Key: { pk: { S: pk } },
      ConsistentRead: true,
    });
  });

  it.each<[string, Record<string, AttributeValue>, object]>([
    [
      'a revision of another type',
      { rev: { N: '7' }, state: { B: Buffer.from('x') }, expires: { N: '5' } },
      { rev: undefined, sealed: Buffer.from('x'), expiresSeconds: 5 },
    ],
    ['a TTL of another type', { rev: { S: 'r' }, expires: { S: '5' } }, { rev: 'r', sealed: undefined, expiresSeconds: undefined }],
    ['a TTL that is no whole number', { expires: { N: '1.5' } }, { rev: undefined, sealed: undefined, expiresSeconds: undefined }],
    [
      'a TTL past the safe integers',
      { expires: { N: '90071992547409930' } },
      { rev: undefined, sealed: undefined, expiresSeconds: undefined },
    ],
    [
      'a state of another type',
      { state: { S: 'not binary' }, expires: { N: '0' } },
      { rev: undefined, sealed: undefined, expiresSeconds: 0 },
    ],
    ['nothing but its key', {}, { rev: undefined, sealed: undefined, expiresSeconds: undefined }],
  ])('reads an item someone else wrote with %s as having none', async (_case, attributes, item) => {
    const pk = fresh();
    await plant(pk, attributes);

    expect(await calls.get(pk)).toEqual(item);
  });

  it('fails alone when the table fails, naming the error in the report', async () => {
    proxy.set({ kind: 'error', status: 400, type: 'ValidationException' });

    expect([await calls.get(fresh()), report]).toEqual([FAILED, { tableError: 'ValidationException' }]);
  });
});

describe('put', () => {
  it('writes an absent item when asked to expect none, under the new revision', async () => {
    const pk = fresh();

    expect(await calls.put(pk, STATE, ABSENT, 'rev-1')).toEqual({ rev: 'rev-1' });
    expect(await calls.get(pk)).toEqual({ rev: 'rev-1', expiresSeconds: STATE.expiresSeconds, sealed: STATE.sealed });
  });

  it('overwrites an item at an expected revision, any of those expected', async () => {
    const pk = fresh();
    await calls.put(pk, STATE, ABSENT, 'rev-1');
    await calls.put(pk, STATE, at('rev-1'), 'rev-2');

    expect(await calls.put(pk, { ...STATE, expiresSeconds: 1 }, at('rev-0', 'rev-2', 'rev-3'), 'rev-4')).toEqual({ rev: 'rev-4' });
    expect(await calls.get(pk)).toMatchObject({ rev: 'rev-4', expiresSeconds: 1 });
  });

  it('is refused by an item at another revision, which comes back with the refusal', async () => {
    const pk = fresh();
    await calls.put(pk, STATE, ABSENT, 'rev-1');

    expect(await calls.put(pk, STATE, at('rev-0', 'rev-2'), 'rev-3')).toEqual({
      lost: { rev: 'rev-1', expiresSeconds: STATE.expiresSeconds, sealed: STATE.sealed },
    });
    expect(await calls.put(pk, STATE, ABSENT, 'rev-3')).toMatchObject({ lost: { rev: 'rev-1' } });
    expect(report).toEqual({});
  });

  it('is refused by an item that appeared, when it expected a revision', async () => {
    expect(await calls.put(fresh(), STATE, at('rev-1'), 'rev-2')).toEqual({ lost: undefined });
  });

  it('overwrites garbage (an item without a string revision) when it expects none, and only then', async () => {
    const [garbage, bare] = [fresh(), fresh()];
    await plant(garbage, { rev: { N: '1' }, state: { S: 'garbage' } });
    await plant(bare, { state: { S: 'garbage' } });

    expect(await calls.put(garbage, STATE, at('1'), 'rev-1')).toMatchObject({ lost: { rev: undefined } });
    expect([await calls.put(garbage, STATE, ABSENT, 'rev-1'), await calls.put(bare, STATE, ABSENT, 'rev-1')]).toEqual([
      { rev: 'rev-1' },
      { rev: 'rev-1' },
    ]);
  });

  it('expects either at once: no string revision, or one of those named', async () => {
    const [absent, garbage, versioned, other] = [fresh(), fresh(), fresh(), fresh()];
    await plant(garbage, { rev: { N: '1' } });
    await plant(versioned, { rev: { S: 'rev-1' } });
    await plant(other, { rev: { S: 'rev-9' } });
    const either: Expected = { revs: ['rev-0', 'rev-1'], unversioned: true };

    const written = await Promise.all([absent, garbage, versioned, other].map((pk) => calls.put(pk, STATE, either, 'rev-2')));

    expect(written).toEqual([{ rev: 'rev-2' }, { rev: 'rev-2' }, { rev: 'rev-2' }, { lost: expect.objectContaining({ rev: 'rev-9' }) }]);
  });

  it('names the first failure in the report, and fails alone', async () => {
    proxy.set({ kind: 'error', status: 400, type: 'ValidationException' });
    const first = await calls.put(fresh(), STATE, ABSENT, 'rev-1');
    proxy.set({ kind: 'error', status: 400, type: 'AccessDeniedException' });
    const second = await calls.get(fresh());

    expect([first, second, report]).toEqual([FAILED, FAILED, { tableError: 'ValidationException' }]);
  });

  it('is refused without a known item when the table says so without one', async () => {
    const pk = fresh();
    await calls.put(pk, STATE, ABSENT, 'rev-1');

    // dynalite itself never returns the item that refused a write.
    expect(await tableAt(db.endpoint).calls(report).put(pk, STATE, at('rev-0'), 'rev-2')).toEqual({ lost: undefined });
  });
});

describe('against an endpoint that answers when told', () => {
  beforeEach(() => {
    proxy.set({ kind: 'hold' });
  });

  it.each<[string, () => Promise<unknown>]>([
    ['a read', () => calls.get('k')],
    ['a write', () => calls.put('k', STATE, ABSENT, 'rev-1')],
  ])('takes an answer to %s that comes within the call limit', async (_case, call) => {
    const result = call();
    const pending = await proxy.nextHeld();

    clock.advance(LIMIT_MS - 1);
    pending.answer(200, '{}');

    expect(await result).not.toBe(FAILED);
    expect(report).toEqual({});
  });

  it.each<[string, () => Promise<unknown>]>([
    ['a read', () => calls.get('k')],
    ['a write', () => calls.put('k', STATE, ABSENT, 'rev-1')],
  ])('gives up %s at the call limit', async (_case, call) => {
    const result = call();
    await proxy.nextHeld();

    clock.advance(LIMIT_MS);

    expect([await result, report]).toEqual([FAILED, { tableError: 'TimeoutError' }]);
  });

  it('reads attributes that are not of the shape DynamoDB sends as absent', async () => {
    const result = calls.get('k');
    (await proxy.nextHeld()).answer(200, JSON.stringify({ Item: { pk: { S: 'k' }, rev: { S: 5 }, expires: 'soon', state: { B: null } } }));

    expect(await result).toEqual({ rev: undefined, expiresSeconds: undefined, sealed: undefined });
  });

  it('reads an answer whose item is no object as no item', async () => {
    const result = calls.get('k');
    (await proxy.nextHeld()).answer(200, '{"Item":"garbage"}');

    expect(await result).toBeUndefined();
  });

  it.each([
    ['no document', ''],
    ['an item that is no object', '{"__type":"ConditionalCheckFailedException","Item":"garbage"}'],
  ])('takes a refusal with %s as refused by an item it does not know', async (_case, body) => {
    const result = calls.put('k', STATE, ABSENT, 'rev-1');
    (await proxy.nextHeld()).answer(400, body, { 'x-amzn-errortype': 'ConditionalCheckFailedException' });

    expect(await result).toEqual({ lost: undefined });
  });

  it('sends the condition by its parts: no string revision, or one of those named', async () => {
    const result = calls.put('k', STATE, { revs: ['rev-a', 'rev-b'], unversioned: true }, 'rev-c');
    const call = await proxy.nextHeld();
    call.answer(200, '{}');
    await result;

    expect(JSON.parse(call.body)).toEqual({
      TableName: TABLE,
      Item: {
        pk: { S: 'k' },
        state: { B: STATE.sealed.toString('base64') },
        rev: { S: 'rev-c' },
        expires: { N: String(STATE.expiresSeconds) },
      },
      ConditionExpression: 'NOT attribute_type(#rev, :string) OR #rev IN (:rev0, :rev1)',
      ExpressionAttributeNames: { '#rev': 'rev' },
      ExpressionAttributeValues: { ':string': { S: 'S' }, ':rev0': { S: 'rev-a' }, ':rev1': { S: 'rev-b' } },
      ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
    });
  });

  describe('dynamoDbTable', () => {
    const saved = { ...process.env };
    afterEach(() => {
      process.env = { ...saved };
    });

    it('sends one read as it is made, to open the connection, bounded by four call limits, its answer ignored', async () => {
      Object.assign(process.env, env(proxy.endpoint));

      const table = dynamoDbTable('warm-table', LIMIT_MS, clock);
      const warmUp = await proxy.nextHeld();

      expect([warmUp.operation, JSON.parse(warmUp.body)]).toEqual([
        'DynamoDB_20120810.GetItem',
        { TableName: 'warm-table', Key: { pk: { S: 'warm-up' } } },
      ]);
      expect(clock.dueIn).toEqual([4 * LIMIT_MS]);
      clock.advance(4 * LIMIT_MS);
      await settle();
      expect(table).toBeInstanceOf(DynamoDbTable);
    });

    it('reads and writes its table through the environment’s endpoint', async () => {
      proxy.set({ kind: 'pass' }); // the table answers
      Object.assign(process.env, env(proxy.endpoint));
      const table = dynamoDbTable(TABLE, LIMIT_MS, clock).calls(report);
      const pk = fresh();

      expect(await table.put(pk, STATE, ABSENT, 'rev-1')).toEqual({ rev: 'rev-1' });
      expect(await table.get(pk)).toMatchObject({ rev: 'rev-1' });
    });
  });
});
