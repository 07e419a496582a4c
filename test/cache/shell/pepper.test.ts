import { Deadline } from '../../../lambda/clock';
import { cacheSettings } from '../../../lambda/cache/core/settings';
import type { CacheReport } from '../../../lambda/cache/report';
import { pepperSource, secretsManagerPepper } from '../../../lambda/cache/shell/pepper';
import { localAwsEnvironment } from '../../../local/dynamodb-local';
import { type LocalSecretsManager, startLocalSecretsManager } from '../../../local/secrets-manager-local';
import { manualClock, type ManualClock, settle } from '../../support/manual-clock';

// The pepper as the shared tier gets it: read as the function starts, read again in the background
// once 30 s old, never used 60 s old, a failed read tried again a second later at most. Each read is
// one the test answers when it chooses; time is a manual clock.

const SETTINGS = cacheSettings(5000).pepper;
const PEPPER_A = 'pepper-a-of-at-least-thirty-two-characters';
const PEPPER_B = 'pepper-b-of-at-least-thirty-two-characters';
const PEPPER_C = 'pepper-c-of-at-least-thirty-two-characters';

interface Read {
  readonly deadline: Deadline;
  readonly startedAt: number;
  answer(value: unknown): Promise<void>;
  fail(error: unknown): Promise<void>;
}

/** A pepper source over reads the test answers, on a manual clock. */
function source(clock: ManualClock = manualClock()) {
  const reads: Read[] = [];
  const read = (deadline: Deadline) =>
    new Promise<unknown>((resolve, reject) => {
      reads.push({
        deadline,
        startedAt: clock.epoch(),
        answer: async (value) => {
          resolve(value);
          await settle();
        },
        fail: async (error) => {
          reject(error);
          await settle();
        },
      });
    });
  const pepper = pepperSource(read, clock, SETTINGS);
  const get = (report: CacheReport = {}, deadline = Deadline.after(clock, 1_000_000)) => pepper.get(deadline, report);
  const switchedAt = () => pepper.switchedAt();
  /** The read made `index`-th, once it has been made. */
  const nth = async (index: number): Promise<Read> => {
    while (reads.length <= index) await settle();
    return reads[index] as Read;
  };
  return { clock, reads, get, nth, switchedAt };
}

const text = (value: Buffer | undefined) => value?.toString('utf8');
const named = (name: string) => Object.assign(new Error('a message that may hold an ARN'), { name });

describe('pepperSource', () => {
  it('reads the pepper as the function starts, within its load limit, and uses it while it is fresh', async () => {
    const { clock, reads, get, nth } = source();
    await (await nth(0)).answer(PEPPER_A);

    clock.advance(29_999);
    const report: CacheReport = {};

    expect(text(await get(report))).toBe(PEPPER_A);
    expect([reads.length, report]).toEqual([1, {}]);
  });

  it('gives each read 2 s', async () => {
    const { nth } = source();

    expect((await nth(0)).deadline.leftMs()).toBe(2000);
  });

  it('waits for the first read when a request comes before it is answered', async () => {
    const { get, nth } = source();

    const got = get();
    await (await nth(0)).answer(PEPPER_A);

    expect(text(await got)).toBe(PEPPER_A);
  });

  it('reads again in the background once the pepper is 30 s old, from when its read began, one read at a time', async () => {
    // Prepare: the first read takes 10 s; the pepper is dated when it began.
    const { clock, reads, get, nth } = source();
    clock.advance(10_000);
    await (await nth(0)).answer(PEPPER_A);
    clock.advance(19_999);
    expect([text(await get()), reads.length]).toEqual([PEPPER_A, 1]);

    // Act
    clock.advance(1);
    const during = [text(await get()), text(await get())];

    // Assess: the old pepper answers meanwhile, and one read is made.
    expect([during, reads.length]).toEqual([[PEPPER_A, PEPPER_A], 2]);
    await (await nth(1)).answer(PEPPER_B);
    expect(text(await get())).toBe(PEPPER_B);
  });

  it('dates its switch to a rotated pepper when it first hands the new one out: never before, and not for the same value read again', async () => {
    // Prepare: pepper A in use; the refresh at 30 s brings A again, the next at 60 s brings B.
    const { clock, get, nth, switchedAt } = source();
    const unused = switchedAt();
    await (await nth(0)).answer(PEPPER_A);
    await get();
    clock.advance(30_000);
    await get();
    await (await nth(1)).answer(PEPPER_A);
    await get();
    const unswitched = switchedAt();
    clock.advance(30_000);
    await get();
    await (await nth(2)).answer(PEPPER_B);

    // Act: B is read at once, but first handed out 500 ms later.
    const beforeUse = switchedAt();
    clock.advance(500);
    const used = text(await get());

    // Assess
    expect([unused, unswitched, beforeUse, used, switchedAt()]).toEqual([0, 0, 0, PEPPER_B, clock.epoch()]);
  });

  it('never uses a pepper 60 s old: a request waits for a new one', async () => {
    const { clock, get, nth } = source();
    await (await nth(0)).answer(PEPPER_A);
    clock.advance(30_000);
    await get();
    await (await nth(1)).fail(named('ThrottlingException'));

    clock.advance(29_999);
    expect(text(await get())).toBe(PEPPER_A);
    clock.advance(1);
    const got = get();
    await (await nth(2)).answer(PEPPER_B);

    expect(text(await got)).toBe(PEPPER_B);
  });

  it("gives up on the table when no pepper comes by the request's deadline, and says so", async () => {
    const { clock, get, nth } = source();
    const report: CacheReport = {};

    const got = get(report, Deadline.after(clock, 100));
    await nth(0);
    clock.advance(100);

    expect([await got, report]).toEqual([undefined, { tableError: 'PepperTimeout' }]);
  });

  it('names a failed read by its error name alone, and tries again a second later at most', async () => {
    const { clock, reads, get, nth } = source();
    await (await nth(0)).fail(named('AccessDeniedException'));
    const report: CacheReport = {};

    expect([await get(report), report, reads.length]).toEqual([undefined, { tableError: 'AccessDeniedException' }, 1]);
    clock.advance(999);
    expect([await get(), reads.length]).toEqual([undefined, 1]);

    clock.advance(1);
    const got = get();
    await (await nth(1)).answer(PEPPER_A);
    expect([text(await got), reads.length]).toEqual([PEPPER_A, 2]);
  });

  it('retries a refresh that failed a second later at most, using the pepper it has meanwhile', async () => {
    const { clock, reads, get, nth } = source();
    await (await nth(0)).answer(PEPPER_A);
    clock.advance(30_000);
    await get();
    await (await nth(1)).fail(named('InternalServiceError'));

    clock.advance(999);
    expect([text(await get()), reads.length]).toEqual([PEPPER_A, 2]);
    clock.advance(1);
    expect([text(await get()), reads.length]).toEqual([PEPPER_A, 3]);
  });

  it('reads again at once after a failure when the clock was set back: the pause is not to be waited out again', async () => {
    const { clock, reads, get, nth } = source();
    await (await nth(0)).fail(named('AccessDeniedException'));

    clock.shiftWall(-1);
    const got = get();
    await (await nth(1)).answer(PEPPER_A);

    expect([text(await got), reads.length]).toEqual([PEPPER_A, 2]);
  });

  it('counts a pepper as old once the clock is set back before its read', async () => {
    const { clock, get, nth } = source();
    await (await nth(0)).answer(PEPPER_A);

    clock.shiftWall(-1);
    const got = get();
    await (await nth(1)).answer(PEPPER_B);

    expect(text(await got)).toBe(PEPPER_B);
  });

  it.each([
    ['31 characters', 'p'.repeat(31)],
    ['a binary secret (no SecretString)', undefined],
    ['a number', 1e40],
  ])('refuses a pepper of %s rather than trust it', async (_case, value) => {
    const { get, nth } = source();
    await (await nth(0)).answer(value);
    const report: CacheReport = {};

    expect([await get(report), report]).toEqual([undefined, { tableError: 'PepperTooShort' }]);
  });

  it('takes a pepper of 32 characters', async () => {
    const { get, nth } = source();
    await (await nth(0)).answer('p'.repeat(32));

    expect(text(await get())).toBe('p'.repeat(32));
  });

  it('reads once more when the read under way brings a pepper already too old (sent before the instance froze)', async () => {
    // Prepare: a refresh is sent at 30 s; the instance freezes, and thaws at 95 s with it still under way.
    const { clock, reads, get, nth } = source();
    await (await nth(0)).answer(PEPPER_A);
    clock.advance(30_000);
    await get();
    const refresh = await nth(1);
    clock.advance(65_000);

    // Act
    const got = get();
    await refresh.answer(PEPPER_B);
    await (await nth(2)).answer(PEPPER_C);

    // Assess
    expect([text(await got), reads.map((read) => read.startedAt - (reads[0] as Read).startedAt)]).toEqual([PEPPER_C, [0, 30_000, 95_000]]);
  });

  it('gives up after that one more read brings a pepper too old as well, blaming no failure since read past', async () => {
    // Prepare: the first read failed; the second, a second later, brought the pepper.
    const { clock, get, nth } = source();
    await (await nth(0)).fail(named('AccessDeniedException'));
    clock.advance(1000);
    const first = get();
    await (await nth(1)).answer(PEPPER_A);
    expect(text(await first)).toBe(PEPPER_A);
    clock.advance(30_000);
    await get();
    const refresh = await nth(2);
    clock.advance(65_000);
    const report: CacheReport = {};

    const got = get(report);
    await refresh.answer(PEPPER_B);
    const last = await nth(3);
    clock.advance(60_000);
    await last.answer(PEPPER_C);

    expect([await got, report]).toEqual([undefined, { tableError: 'PepperTimeout' }]);
  });
});

describe('secretsManagerPepper', () => {
  let secrets: LocalSecretsManager;
  const saved = { ...process.env };

  beforeAll(async () => {
    secrets = await startLocalSecretsManager({ 'pepper-secret': PEPPER_A });
    Object.assign(process.env, localAwsEnvironment({ secretsManager: secrets.endpoint }));
  });
  afterAll(async () => {
    process.env = saved;
    await secrets.close();
  });

  it("reads the secret's SecretString from Secrets Manager", async () => {
    const clock = manualClock();

    const pepper = await secretsManagerPepper('pepper-secret', clock, SETTINGS).get(Deadline.after(clock, 5000), {});

    expect([text(pepper), secrets.reads]).toEqual([PEPPER_A, ['pepper-secret']]);
  });

  it("names Secrets Manager's error when the secret cannot be read", async () => {
    const clock = manualClock();
    const report: CacheReport = {};

    const pepper = await secretsManagerPepper('no-such-secret', clock, SETTINGS).get(Deadline.after(clock, 5000), report);

    expect([pepper, report]).toEqual([undefined, { tableError: 'ResourceNotFoundException' }]);
  });
});
