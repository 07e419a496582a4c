import { DYNAMODB } from '../../lambda/aws/endpoints';
import { awsJsonClient } from '../../lambda/aws/json-client';
import { cacheSettings } from '../../lambda/cache/core/settings';
import type { Expected } from '../../lambda/cache/core/visit';
import { requestItemKeys, sealState } from '../../lambda/cache/shell/sealed-item';
import { DynamoDbTable, FAILED, type StoredItem, type TableCalls, type Written } from '../../lambda/cache/shell/table-calls';
import { epochMs, systemClock } from '../../lambda/clock';
import { type Attribute, type RawItem, SimTable } from '../../sim/table';
import { type Owner, World } from '../../sim/world';
import { type SharedTable, startSharedTable } from '../support/shared-table';
import { startTableProxy, type TableProxy } from '../../local/table-proxy';

// The simulator's table is only as good as its likeness to DynamoDB. The same script of reads,
// conditional writes and writes by someone without the pepper, on it and on dynalite (behind the
// proxy that returns the refusing item as DynamoDB does), must give the same answers.

let dynalite: SharedTable;
let proxy: TableProxy;

beforeAll(async () => {
  dynalite = await startSharedTable('table-parity');
  proxy = await startTableProxy(dynalite.endpoint);
});

afterAll(async () => {
  await proxy.close();
  await dynalite.close();
});

interface Side {
  readonly calls: TableCalls;
  write(pk: string, item: RawItem): Promise<void>;
  close(): void;
}

function simulated(): Side {
  const world = new World();
  const owner: Owner = { name: 'i0', frozen: false, dead: false, deferred: [] };
  const table = new SimTable(
    world,
    () => 0.5,
    () => ({ kind: 'normal', minMs: 2, maxMs: 2 }),
    1000,
    0,
    (pk) => pk,
  );
  const raw = table.for(owner).calls({});
  // Each call runs the world until it has answered.
  const settled = async <T>(call: Promise<T>): Promise<T> => {
    let done = false;
    const answer = call.finally(() => {
      done = true;
    });
    await world.run(Number.POSITIVE_INFINITY, () => done);
    return answer;
  };
  return {
    calls: { get: (pk) => settled(raw.get(pk)), put: (pk, state, expected, rev) => settled(raw.put(pk, state, expected, rev)) },
    write: async (pk, item) => table.write(pk, item),
    close: () => undefined,
  };
}

function real(): Side {
  const env = {
    AWS_ENDPOINT_URL_DYNAMODB: proxy.endpoint,
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'local',
    AWS_SECRET_ACCESS_KEY: 'local',
  };
  const clock = systemClock();
  return {
    calls: new DynamoDbTable(awsJsonClient(DYNAMODB, env, clock), dynalite.tableName, 2000, clock).calls({}),
    write: (_pk, item) => dynalite.put(item as never),
    close: () => undefined,
  };
}

/** What a call answered, in a form both tables can be held to. */
function shape(answer: StoredItem | undefined | Written | typeof FAILED): unknown {
  if (answer === FAILED) return 'failed';
  if (answer === undefined) return 'absent';
  if ('rev' in answer && !('sealed' in answer)) return { won: true };
  if ('lost' in answer)
    return {
      lost:
        answer.lost === undefined
          ? 'absent'
          : { rev: answer.lost.rev, expires: answer.lost.expiresSeconds, sealed: answer.lost.sealed?.length },
    };
  return { rev: answer.rev, expires: answer.expiresSeconds, sealed: answer.sealed?.length };
}

type Step = (side: Side, pk: string) => Promise<unknown>;
const keys = requestItemKeys(Buffer.alloc(32, 1), 'parity-secret', 'parity');
const sealed = sealState(
  keys,
  { kind: 'hold', hold: { code: 'upstream_throttled', until: epochMs(1_900_000_000_000) } },
  cacheSettings(10_000).rejectionFloorMs,
);
const put =
  (expected: Expected, rev: string): Step =>
  async (side, pk) =>
    shape(await side.calls.put(pk, sealed, expected, rev));
/** Over no string revision, one of `revs`, or (both) either. */
const NONE: Expected = { revs: [], unversioned: true };
const over = (...revs: string[]): Expected => ({ revs, unversioned: false });
const noneOr = (...revs: string[]): Expected => ({ revs, unversioned: true });
const get: Step = async (side, pk) => shape(await side.calls.get(pk));
const retype =
  (rev: Attribute | undefined): Step =>
  async (side, pk) => {
    const item: RawItem = {
      pk: { S: pk },
      state: { B: sealed.sealed },
      expires: { N: String(sealed.expiresSeconds) },
      ...(rev ? { rev } : {}),
    };
    await side.write(pk, item);
    return 'written';
  };

const scripts: [string, Step[]][] = [
  ['a claim on nothing, then one more on what it left', [put(NONE, 'a'), put(NONE, 'b'), get]],
  ['a write over the revision read, then over one gone', [put(NONE, 'a'), put(over('a'), 'b'), put(over('a'), 'c'), get]],
  [
    'a write over either of two revisions, then over neither',
    [put(NONE, 'a'), put(over('x', 'a'), 'b'), put(over('a', 'y', 'z'), 'c'), put(over('c', 'b'), 'd'), get],
  ],
  [
    'a write over nothing or a revision, on nothing, then on that revision',
    [put(noneOr('x'), 'a'), put(noneOr('a'), 'b'), put(noneOr('a'), 'c'), get],
  ],
  ...(
    [
      ['a number', { N: '7' }],
      ['a boolean', { BOOL: true }],
      ['null', { NULL: true }],
      ['a list', { L: [] }],
      ['nothing', undefined],
    ] as const
  ).map(([name, rev]): [string, Step[]] => [
    `a revision of ${name}, overwritten once and no more`,
    [retype(rev), get, put(NONE, 'a'), put(NONE, 'b'), get],
  ]),
  // Left out: an empty-string revision, which dynalite's attribute_type counts as no string (DynamoDB
  // counts it a string, as the simulated table does). Either way a write over it is bounded.
  [
    'a state of another type, read as none',
    [async (side, pk) => side.write(pk, { pk: { S: pk }, state: { S: 'x' }, rev: { S: 'r' }, expires: { N: '99999999999' } }), get],
  ],
];

describe('the simulated table and dynalite', () => {
  it.each(scripts)('answer alike: %s', async (_case, script) => {
    const pk = `parity-${Math.random().toString(36).slice(2)}`;
    const [sim, dynamo] = [simulated(), real()];
    const answers: unknown[][] = [[], []];
    for (const step of script) {
      answers[0]?.push(await step(sim, `${pk}-sim`));
      answers[1]?.push(await step(dynamo, `${pk}-real`));
    }
    sim.close();
    dynamo.close();

    expect(answers[0]).toEqual(answers[1]);
  });
});
