// A writer with access to the table, as an operator's script or an attacker holding the table's write permission would be:
// it reads the table directly, keeps every version of every item it sees written, and on demand writes them back, oldest
// first and round again, one after another at table speed or `gapMs` apart. Forked by run.ts, driven over IPC.
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  type AttributeValue,
  BatchGetItemCommand,
  DescribeTableCommand,
  DynamoDBClient,
  PutItemCommand,
  ScanCommand,
} from '@aws-sdk/client-dynamodb';

/** `record`: forget what was kept, leave out the items the table holds now, and keep every version written from now on. */
export type ReplayCommand = { readonly kind: 'record' } | { readonly kind: 'replay'; readonly gapMs: number } | { readonly kind: 'stop' };
export interface ReplayReport {
  /** Item versions kept, distinct items among them, and writes made back. */
  readonly versions: number;
  readonly items: number;
  readonly writes: number;
}

type Item = Record<string, AttributeValue>;

const [endpoint = '', TableName = ''] = process.argv.slice(2);
const client = new DynamoDBClient({ endpoint, region: 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
// The items of a row are few, read every 50 ms; finding them takes a scan of the whole table, which grows over the campaign:
// that runs every 500 ms, so that the writer's reads do not slow the table the fleet is measured on.
const [READ_EVERY_MS, SCAN_EVERY_MS] = [50, 500];

const state = { recording: false, writes: 0, run: 0, writing: Promise.resolve() };
let versions: Item[] = [];
const seen = new Set<string>();
/** Items there before recording began (another row's), by partition key value, and the ones found since. */
const [before, found] = [new Set<string>(), new Map<string, Item>()];

async function scan(): Promise<Item[]> {
  const items: Item[] = [];
  let ExclusiveStartKey: Item | undefined;
  do {
    const page = await client.send(new ScanCommand({ TableName, ConsistentRead: true, ExclusiveStartKey }));
    items.push(...(page.Items ?? []));
    ExclusiveStartKey = page.LastEvaluatedKey;
  } while (ExclusiveStartKey !== undefined);
  return items;
}

function keep(items: Item[]): void {
  for (const item of items) {
    const version = createHash('sha256').update(JSON.stringify(item)).digest('base64');
    if (seen.has(version)) continue;
    seen.add(version);
    versions.push(item);
  }
}

async function watch(partitionKey: string): Promise<void> {
  const keyOf = (item: Item) => JSON.stringify(item[partitionKey]);
  for (let turn = 0; ; turn++) {
    if (state.recording) {
      // A read that fails (the table is busy) is made again at the next turn.
      if (turn % (SCAN_EVERY_MS / READ_EVERY_MS) === 0) {
        for (const item of await scan().catch(() => []))
          if (!before.has(keyOf(item))) found.set(keyOf(item), { [partitionKey]: item[partitionKey] as AttributeValue });
      }
      const keys = [...found.values()];
      for (let start = 0; start < keys.length; start += 100) {
        const request = { RequestItems: { [TableName]: { Keys: keys.slice(start, start + 100), ConsistentRead: true } } };
        keep((await client.send(new BatchGetItemCommand(request)).catch(() => undefined))?.Responses?.[TableName] ?? []);
      }
    }
    await sleep(READ_EVERY_MS);
  }
}

async function writeBack(gapMs: number, mine: number): Promise<void> {
  for (let next = 0; state.run === mine && versions.length > 0; next = (next + 1) % versions.length) {
    // A refused or failed write is the table's business: the writer goes on with the next.
    await client.send(new PutItemCommand({ TableName, Item: versions[next] })).then(
      () => state.writes++,
      () => undefined,
    );
    if (gapMs > 0) await sleep(gapMs);
  }
}

async function main(): Promise<void> {
  const { Table } = await client.send(new DescribeTableCommand({ TableName }));
  const partitionKey = Table?.KeySchema?.find((key) => key.KeyType === 'HASH')?.AttributeName ?? '';
  process.on('message', (command: ReplayCommand) => {
    if (command.kind === 'record') {
      void scan().then((now) => {
        [before, found, seen].forEach((set) => set.clear());
        for (const item of now) before.add(JSON.stringify(item[partitionKey]));
        [versions, state.recording, state.writes] = [[], true, 0];
        process.send?.('recording');
      });
    } else if (command.kind === 'replay') {
      state.writing = writeBack(command.gapMs, (state.run += 1));
    } else {
      [state.run, state.recording] = [state.run + 1, false];
      void state.writing.then(() => {
        const items = new Set(versions.map((item) => JSON.stringify(item[partitionKey]))).size;
        const report: ReplayReport = { versions: versions.length, items, writes: state.writes };
        process.send?.(report);
      });
    }
  });
  process.on('disconnect', () => process.exit(0));
  process.send?.('ready');
  await watch(partitionKey);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
