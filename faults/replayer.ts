// A writer with access to the table, as an operator's script or an attacker holding the table's write permission would be:
// it reads the table directly (Scan, every 50 ms), keeps every version of every item it sees, and on demand writes them
// back, oldest first and round again, one after another at table speed or `gapMs` apart. Forked by run.ts, driven over IPC.
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { type AttributeValue, DescribeTableCommand, DynamoDBClient, PutItemCommand, ScanCommand } from '@aws-sdk/client-dynamodb';

/** `record`: forget what was kept, take what the table holds now as seen, and keep every version written from now on. */
export type ReplayCommand = { readonly kind: 'record' } | { readonly kind: 'replay'; readonly gapMs: number } | { readonly kind: 'stop' };
export interface ReplayReport {
  /** Item versions kept, distinct items among them, and writes made back. */
  readonly versions: number;
  readonly items: number;
  readonly writes: number;
}

const [endpoint = '', TableName = ''] = process.argv.slice(2);
const client = new DynamoDBClient({ endpoint, region: 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
const SCAN_EVERY_MS = 50;

const seen = new Set<string>();
let versions: Record<string, AttributeValue>[] = [];
let [recording, writes, run] = [false, 0, 0];
let writing = Promise.resolve();

/** Every item of the table now, each with a digest of its whole content (a version). */
async function scan(): Promise<{ item: Record<string, AttributeValue>; version: string }[]> {
  const found = [];
  let ExclusiveStartKey: Record<string, AttributeValue> | undefined;
  do {
    const page = await client.send(new ScanCommand({ TableName, ConsistentRead: true, ExclusiveStartKey }));
    for (const item of page.Items ?? []) found.push({ item, version: createHash('sha256').update(JSON.stringify(item)).digest('base64') });
    ExclusiveStartKey = page.LastEvaluatedKey;
  } while (ExclusiveStartKey !== undefined);
  return found;
}

async function keep(): Promise<void> {
  for (;;) {
    if (recording) {
      // A scan that fails (the table is busy) is taken again at the next turn.
      for (const { item, version } of await scan().catch(() => [])) {
        if (seen.has(version)) continue;
        seen.add(version);
        versions.push(item);
      }
    }
    await sleep(SCAN_EVERY_MS);
  }
}

async function writeBack(gapMs: number, mine: number): Promise<void> {
  for (let next = 0; run === mine && versions.length > 0; next = (next + 1) % versions.length) {
    // A refused or failed write is the table's business: the writer goes on with the next.
    await client.send(new PutItemCommand({ TableName, Item: versions[next] })).then(
      () => writes++,
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
        seen.clear();
        for (const { version } of now) seen.add(version);
        [versions, recording, writes] = [[], true, 0];
        process.send?.('recording');
      });
    } else if (command.kind === 'replay') {
      writing = writeBack(command.gapMs, (run += 1));
    } else {
      [run, recording] = [run + 1, false];
      void writing.then(() => {
        const items = new Set(versions.map((item) => JSON.stringify(item[partitionKey]))).size;
        const report: ReplayReport = { versions: versions.length, items, writes };
        process.send?.(report);
      });
    }
  });
  process.on('disconnect', () => process.exit(0));
  process.send?.('ready');
  await keep();
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
