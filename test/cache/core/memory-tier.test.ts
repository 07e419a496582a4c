import { type EpochMs, epochMs, monoMs } from '../../../lambda/clock';
import { type Entry, ownEntry } from '../../../lambda/cache/core/lifetime';
import { MemoryTier } from '../../../lambda/cache/core/memory-tier';
import { type FailureOutcome, tokenOutcome } from '../../../lambda/cache/core/outcome';
import { NO_REJECTION, type Rejection, type Remembered } from '../../../lambda/cache/core/rules';

// One instance's memory, driven directly: what it keeps from an outcome, what it shows a request,
// and what it lets go first. Times are epoch milliseconds from NOW, passed in.

const NOW = epochMs(1_800_000_000_000);
const at = (ms: number): EpochMs => epochMs(NOW + ms);
const token = (receivedMs: number, { expiresIn = 3600, copy = false }: { expiresIn?: number; copy?: boolean } = {}): Entry => ({
  ...ownEntry({ access_token: `t${receivedMs}`, expires_in: expiresIn }, at(receivedMs), copy ? 'another' : 'this'),
  copy,
});
const hold = (ms: number): Remembered => ({ code: 'upstream_throttled', until: at(ms) });
const serverError = (ms: number): Remembered => ({ code: 'upstream_error', until: at(ms) });
const rejected = (ms: number): Remembered => ({ code: 'unauthorized', until: at(ms) });
const failed = (failure: Remembered, parts: Partial<FailureOutcome> = {}): FailureOutcome => ({
  kind: 'failure',
  failure,
  kept: undefined,
  rejection: NO_REJECTION,
  scope: 'key',
  cause: 'exchange',
  metAt: NOW,
  ...parts,
});
const pending = { outcome: new Promise<never>(() => undefined), deadline: monoMs(0) };
/** A tier of `max` keys of each kind, with the 1 s pause between refresh attempts. */
const tier = (max = 10) => new MemoryTier(max, 1000);
const keepIn = (memory: MemoryTier, key: string, entry: Entry = token(0)) =>
  memory.store(key, memory.slot(key), 'hold', tokenOutcome(entry, 'idp'), false, NOW);
const failIn = (memory: MemoryTier, key: string) => memory.store(key, memory.slot(key), 'hold', failed(serverError(1000)), false, NOW);
const present = (memory: MemoryTier, keys: string[]) => keys.filter((key) => memory.peek(key) !== undefined);

describe('slot and peek', () => {
  it('makes a slot that knows nothing, once, and finds it again', () => {
    const memory = tier();

    const slot = memory.slot('k');

    expect(slot).toEqual({
      kept: undefined,
      rejection: NO_REJECTION,
      failure: undefined,
      hold: undefined,
      pending: undefined,
      refreshTriedAt: -Infinity,
      lookedAt: -Infinity,
      looking: undefined,
    });
    expect([memory.slot('k'), memory.peek('k')]).toEqual([slot, slot]);
    expect(memory.slot('k')).toBe(slot);
  });

  it('makes no slot for a key it only peeks at', () => {
    const memory = tier();

    expect([memory.peek('k'), memory.peek('k')]).toEqual([undefined, undefined]);
  });
});

describe('what the memory lets go first', () => {
  it('lets the least recently used key go past its bound', () => {
    const memory = tier(2);
    memory.slot('a');
    memory.slot('b');
    memory.peek('a');

    memory.slot('c');

    expect(present(memory, ['a', 'b', 'c'])).toEqual(['a', 'c']);
  });

  it('lets the least recently used kept token go past its bound', () => {
    const memory = tier(2);
    keepIn(memory, 't1');
    keepIn(memory, 't2');
    memory.peek('t1');

    keepIn(memory, 't3');

    expect(present(memory, ['t1', 't2', 't3'])).toEqual(['t1', 't3']);
  });

  it('never lets a kept token go for keys that only fail: a flood of wrong secrets pushes out only its own kind', () => {
    const memory = tier(2);
    keepIn(memory, 't1');
    keepIn(memory, 't2');

    for (const key of ['f1', 'f2', 'f3', 'f4', 'f5']) failIn(memory, key);

    expect(present(memory, ['t1', 't2', 'f1', 'f2', 'f3', 'f4', 'f5'])).toEqual(['t1', 't2', 'f4', 'f5']);
  });

  it('counts a key among those that keep a token once it keeps one', () => {
    const memory = tier(2);
    memory.slot('a');
    memory.slot('b');
    keepIn(memory, 'a');

    memory.slot('c');
    memory.slot('d');

    expect(present(memory, ['a', 'b', 'c', 'd'])).toEqual(['a', 'c', 'd']);
  });

  it('counts a key among the others once a rejection voids its token', () => {
    const memory = tier(2);
    keepIn(memory, 'a');
    keepIn(memory, 't1');

    memory.store('a', memory.slot('a'), 'hold', failed(rejected(5000), { rejection: { at: at(1), own: false } }), false, at(1));
    keepIn(memory, 't2');

    expect([memory.peek('a')?.kept, present(memory, ['a', 't1', 't2'])]).toEqual([undefined, ['a', 't1', 't2']]);
  });
});

describe('holds on hold keys', () => {
  it('shows the longest hold in force on any of the keys asked about', () => {
    const memory = tier();
    memory.setHold('client', at(30_000));
    memory.setHold('credential', at(60_000));
    memory.setHold('ended', NOW);

    expect(memory.hold(['client', 'credential', 'unknown'], NOW)).toEqual(hold(60_000));
    expect(memory.hold(['client', 'ended'], NOW)).toEqual(hold(30_000));
    expect(memory.hold(['ended', 'unknown'], NOW)).toBeUndefined();
    expect(memory.hold([], NOW)).toBeUndefined();
  });

  it('never shortens a hold: a later, shorter one leaves the longer in force', () => {
    const memory = tier();
    memory.setHold('client', at(30_000));

    memory.setHold('client', at(5000));

    expect(memory.hold(['client'], at(10_000))).toEqual(hold(30_000));
    memory.setHold('client', at(40_000));
    expect(memory.hold(['client'], at(10_000))).toEqual(hold(40_000));
  });

  it('lets the least recently held key go past its bound', () => {
    const memory = tier(2);
    memory.setHold('a', at(30_000));
    memory.setHold('b', at(30_000));
    memory.setHold('a', at(1000));

    memory.setHold('c', at(30_000));

    expect(['a', 'b', 'c'].filter((key) => memory.hold([key], NOW) !== undefined)).toEqual(['a', 'c']);
  });
});

describe('view', () => {
  it('shows a later, shorter failure for its own time, then the rejection still remembered, until a token follows it', () => {
    const memory = tier();
    const slot = memory.slot('k');
    memory.store('k', slot, 'hold', failed(rejected(5000), { rejection: { at: NOW, own: true } }), false, NOW);
    memory.store('k', slot, 'hold', failed(serverError(2000), { rejection: { at: NOW, own: true }, metAt: at(1000) }), false, at(1000));
    const failureAt = (ms: number) => memory.view(slot, undefined, at(ms)).failure;

    expect([failureAt(1500), failureAt(2000), failureAt(4999), failureAt(5000)]).toEqual([
      serverError(2000),
      rejected(5000),
      rejected(5000),
      undefined,
    ]);
    keepIn(memory, 'k', token(3000));
    expect(failureAt(3000)).toBeUndefined();
  });

  it('shows nothing for a key it has no slot for, but the hold it is given', () => {
    expect(tier().view(undefined, hold(1000), NOW)).toEqual({
      entry: undefined,
      failure: undefined,
      hold: hold(1000),
      busy: false,
      refreshing: false,
    });
  });

  it('shows the kept token, a remembered failure in force and the longer of the two holds, as a hold', () => {
    const memory = tier();
    const slot = memory.slot('k');
    keepIn(memory, 'k');
    memory.store('k', slot, 'hold', failed(hold(30_000)), false, NOW);
    memory.store('k', slot, 'hold', failed(serverError(1000)), false, NOW);

    expect(memory.view(slot, hold(20_000), at(999))).toEqual({
      entry: token(0),
      failure: serverError(1000),
      hold: hold(30_000),
      busy: false,
      refreshing: false,
    });
    expect(memory.view(slot, hold(40_000), at(1000))).toMatchObject({ failure: undefined, hold: hold(40_000) });
    expect(memory.view(slot, undefined, at(30_000))).toMatchObject({ failure: undefined, hold: undefined });
  });

  it('shows a fetch under way as busy, and as refreshing', () => {
    const memory = tier();
    const slot = memory.slot('k');
    slot.pending = pending;

    expect(memory.view(slot, undefined, NOW)).toMatchObject({ busy: true, refreshing: true });
  });

  it('shows a key as refreshing for 1 s after a refresh ahead ended', () => {
    const memory = tier();
    const slot = memory.slot('k');
    memory.store('k', slot, 'hold', tokenOutcome(token(0), 'idp'), true, NOW);

    expect([memory.view(slot, undefined, at(999)).refreshing, memory.view(slot, undefined, at(1000)).refreshing]).toEqual([true, false]);
  });

  it("leaves a copy's refresh to its receiver until the middle of its refresh window, when any instance may", () => {
    const memory = tier();
    const [copied, own] = [memory.slot('copied'), memory.slot('own')];
    keepIn(memory, 'copied', token(-3_225_000 + 1, { copy: true }));
    keepIn(memory, 'own', token(-3_225_000 + 1));

    expect([memory.view(copied, undefined, NOW).refreshing, memory.view(copied, undefined, at(1)).refreshing]).toEqual([true, false]);
    expect(memory.view(own, undefined, NOW).refreshing).toBe(false);
  });
});

describe('store, from an outcome', () => {
  it('keeps a keepable token, the newer of two', () => {
    const memory = tier();
    const slot = memory.slot('k');

    keepIn(memory, 'k', token(-1000));
    keepIn(memory, 'k', token(-2000));
    expect(slot.kept).toEqual(token(-1000));

    keepIn(memory, 'k', token(0));
    expect(slot.kept).toEqual(token(0));
  });

  it('keeps no token of 30 s or less: it goes to those waiting for it alone', () => {
    const memory = tier();
    const slot = memory.slot('k');
    keepIn(memory, 'k', token(-1000));

    keepIn(memory, 'k', token(0, { expiresIn: 30 }));

    expect(slot.kept).toEqual(token(-1000));
  });

  it('keeps a remembered failure its time, though a token arrives meanwhile', () => {
    const memory = tier();
    const slot = memory.slot('k');
    failIn(memory, 'k');

    keepIn(memory, 'k');

    expect(slot.failure).toEqual(serverError(1000));
  });

  it('remembers a failure, a later one in place of an earlier one, however short', () => {
    const memory = tier();
    const slot = memory.slot('k');
    memory.store('k', slot, 'hold', failed(rejected(5000)), false, NOW);

    memory.store('k', slot, 'hold', failed(serverError(1000)), false, NOW);

    expect(slot.failure).toEqual(serverError(1000));
  });

  it('remembers no failure its own deadline cut short, yet keeps the token it answered with and the rejection it learnt', () => {
    const memory = tier();
    const [slot, other] = [memory.slot('k'), memory.slot('other')];
    keepIn(memory, 'k', token(-1000));
    keepIn(memory, 'other', token(-1000));

    // Seed 5429@60: a request answered at its deadline with the table's newer token; the next went to the IdP.
    memory.store('k', slot, 'hold', failed(serverError(1000), { cause: 'deadline', kept: token(0, { copy: true }) }), false, NOW);
    const rejection = { at: NOW, own: false };
    memory.store('other', other, 'hold', failed(rejected(5000), { cause: 'deadline', kept: token(-1000), rejection }), false, NOW);

    expect([slot.kept, slot.failure, slot.hold]).toEqual([token(0, { copy: true }), undefined, undefined]);
    expect([other.kept, other.failure, other.rejection]).toEqual([undefined, undefined, rejection]);
  });

  it('dates a rejection met without the table’s word when this instance met it, voiding every token received before it', () => {
    const memory = tier();
    const slot = memory.slot('k');
    keepIn(memory, 'k', token(-1000));

    // Met 300 ms before its news is stored (a visit still publishing): dated when met, not when stored.
    memory.store('k', slot, 'hold', failed(rejected(5000), { rejection: 'unknown', kept: token(-500), metAt: at(-300) }), false, NOW);

    expect([slot.rejection, slot.kept, slot.failure]).toEqual([{ at: at(-300), own: true }, undefined, rejected(5000)]);
  });

  it('dates a remembered rejection told without the table’s word when it happened, by a clock that may be another’s', () => {
    const memory = tier();
    const slot = memory.slot('k');

    // Remembered for 5 s until 2 s from now: met 3 s ago, whoever met it.
    memory.store('k', slot, 'hold', failed(rejected(2000), { rejection: 'unknown', cause: 'failure', metAt: at(-300) }), false, NOW);

    expect(slot.rejection).toEqual({ at: at(-3000), own: false });
  });

  it('keeps its token when a fetch that could not read the table failed otherwise', () => {
    const memory = tier();
    const slot = memory.slot('k');
    keepIn(memory, 'k', token(-60_000));

    memory.store('k', slot, 'hold', failed(serverError(5000), { rejection: 'unknown' }), false, NOW);

    expect([slot.kept, slot.rejection]).toEqual([token(-60_000), NO_REJECTION]);
  });

  it('keeps the latest rejection it knows: an older one reported later does not move it back', () => {
    const memory = tier();
    const slot = memory.slot('k');
    memory.store('k', slot, 'hold', failed(rejected(5000), { rejection: { at: NOW, own: false } }), false, NOW);

    // A token received 20 s before the 401, 40 s after an older rejection the outcome reports.
    memory.store(
      'k',
      slot,
      'hold',
      failed(serverError(5000), { rejection: { at: at(-60_000), own: true }, kept: token(-20_000) }),
      false,
      at(1000),
    );

    expect([slot.rejection, slot.kept]).toEqual([{ at: NOW, own: false }, undefined]);
  });

  it('keeps the token that stands in for a failure, received after the rejection it reports', () => {
    const memory = tier();
    const slot = memory.slot('k');
    const rejection: Rejection = { at: at(-30_000), own: false };

    memory.store('k', slot, 'hold', failed(serverError(1000), { rejection, kept: token(-20_000, { copy: true }) }), false, NOW);

    expect([slot.kept, slot.rejection]).toEqual([token(-20_000, { copy: true }), rejection]);
  });

  it("holds the client for a hold its own exchange earned with a proven key, and nothing on the key's slot", () => {
    const memory = tier();
    const slot = memory.slot('k');

    memory.store('k', slot, 'client-hold', failed(hold(30_000), { scope: 'client' }), false, NOW);

    expect([memory.hold(['client-hold'], NOW), slot.hold, slot.failure]).toEqual([hold(30_000), undefined, undefined]);
  });

  it.each<[string, Partial<FailureOutcome>]>([
    ['a hold read elsewhere, whatever its scope', { scope: 'client', cause: 'hold' }],
    ['a hold of the key alone', { scope: 'key', cause: 'exchange' }],
  ])('holds only the key for %s', (_case, parts) => {
    const memory = tier();
    const slot = memory.slot('k');

    memory.store('k', slot, 'client-hold', failed(hold(30_000), parts), false, NOW);

    expect([memory.hold(['client-hold'], NOW), slot.hold, slot.failure]).toEqual([undefined, hold(30_000), undefined]);
  });

  it("never shortens the key's hold in force, and replaces one that has ended", () => {
    const memory = tier();
    const slot = memory.slot('k');
    memory.store('k', slot, 'hold', failed(hold(30_000)), false, NOW);

    memory.store('k', slot, 'hold', failed(hold(5000)), false, at(1000));
    expect(slot.hold).toEqual(hold(30_000));

    memory.store('k', slot, 'hold', failed(hold(20_000)), false, at(30_000));
    expect(slot.hold).toEqual(hold(20_000));
  });

  it('notes when a refresh ahead ended, and only then', () => {
    const memory = tier();
    const slot = memory.slot('k');

    memory.store('k', slot, 'hold', failed(serverError(1000)), false, NOW);
    expect(slot.refreshTriedAt).toBe(-Infinity);

    memory.store('k', slot, 'hold', failed(serverError(1000), { cause: 'deadline' }), true, at(5));
    expect(slot.refreshTriedAt).toBe(at(5));
  });

  it('notes no refresh tried when a hold held it back: it goes once the hold ends, without the pause (seed 446456019)', () => {
    const memory = tier();
    const slot = memory.slot('k');

    memory.store('k', slot, 'hold', failed(hold(500), { cause: 'hold' }), true, NOW);

    expect(slot.refreshTriedAt).toBe(-Infinity);
    expect([memory.view(slot, undefined, at(499)), memory.view(slot, undefined, at(500))]).toMatchObject([
      { hold: hold(500), refreshing: false },
      { hold: undefined, refreshing: false },
    ]);
  });
  it('notes no refresh tried when the kept token answered without asking (the table showed a hold), and one that asked the IdP', () => {
    const memory = tier();
    const [held, asked] = [memory.slot('k'), memory.slot('j')];

    memory.store('k', held, 'hold', tokenOutcome(token(-60_000), 'table'), true, NOW);
    memory.store('k', held, 'hold', tokenOutcome(token(-60_000), 'memory'), true, NOW);
    memory.store('j', asked, 'hold', tokenOutcome(token(0), 'idp'), true, NOW);

    expect([held.refreshTriedAt, asked.refreshTriedAt]).toEqual([-Infinity, NOW]);
  });
});

describe('looked, after a look in the table', () => {
  it('adopts the newer token the table keeps', () => {
    const memory = tier();
    const slot = memory.slot('k');
    keepIn(memory, 'k', token(-1000));

    memory.looked('k', slot, token(0, { copy: true }), NO_REJECTION);

    expect(slot.kept).toEqual(token(0, { copy: true }));
  });

  it('adopts the table’s rejection at once, which voids the tokens received before it here too', () => {
    const memory = tier();
    const slot = memory.slot('k');
    keepIn(memory, 'k', token(-1000));
    const rejection: Rejection = { at: at(-500), own: false };

    memory.looked('k', slot, undefined, rejection);

    expect([slot.kept, slot.rejection]).toEqual([undefined, rejection]);
  });

  it('keeps its own token over an older one, and over one that cannot be kept', () => {
    const memory = tier();
    const slot = memory.slot('k');
    keepIn(memory, 'k', token(-1000));

    memory.looked('k', slot, token(-2000, { copy: true }), NO_REJECTION);
    memory.looked('k', slot, token(0, { copy: true, expiresIn: 30 }), NO_REJECTION);

    expect(slot.kept).toEqual(token(-1000));
  });

  it('keeps an older rejection from moving its own back', () => {
    const memory = tier();
    const slot = memory.slot('k');
    slot.rejection = { at: NOW, own: true };

    memory.looked('k', slot, token(-1000, { copy: true }), { at: at(-5000), own: false });

    expect([slot.kept, slot.rejection]).toEqual([undefined, { at: NOW, own: true }]);
  });

  it('counts a key it looked up as used, and among those that keep a token once it does', () => {
    const memory = tier(2);
    memory.slot('a');
    memory.slot('b');
    memory.looked('a', memory.slot('a'), token(0, { copy: true }), NO_REJECTION);
    memory.slot('c');
    memory.slot('d');

    expect(present(memory, ['a', 'b', 'c', 'd'])).toEqual(['a', 'c', 'd']);
  });
});
