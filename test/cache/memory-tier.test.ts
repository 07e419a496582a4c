import type { Entry } from '../../lambda/cache/lifetime';
import { MemoryTier } from '../../lambda/cache/memory-tier';
import { type Outcome, UNKNOWN_REJECTION } from '../../lambda/cache/outcome';
import type { Remembered } from '../../lambda/cache/rules';
import { type EpochMs, epochMs } from '../../lambda/cache/time';

// The memory tier driven directly, for what it keeps from an outcome; the handler's view of it is in
// memory-cache.test.ts. Times are epoch milliseconds from NOW, passed in.

const NOW = epochMs(1_800_000_000_000);
const at = (ms: number): EpochMs => epochMs(NOW + ms);
const token = (receivedAt: EpochMs): Entry => ({ token: { access_token: `t-${receivedAt}`, expires_in: 3600 }, receivedAt });
const hold = (ms: number): Remembered => ({ code: 'upstream_throttled', until: at(ms) });
const serverError = (ms: number): Remembered => ({ code: 'upstream_error', until: at(ms) });
const failed = (failure: Remembered, parts: Partial<Extract<Outcome, { kind: 'failure' }>> = {}): Outcome => ({
  kind: 'failure',
  failure,
  kept: undefined,
  rejectedAt: epochMs(0),
  scope: 'key',
  cause: 'exchange',
  ...parts,
});

describe('the memory tier keeps from an outcome', () => {
  it('its kept token when the fetch could not learn whether the key was rejected', () => {
    const memory = new MemoryTier(10);
    const slot = memory.slot('k');
    memory.store('k', slot, 'h', { kind: 'token', entry: token(at(-60_000)), from: 'idp' }, false, at(-60_000));

    memory.store('k', slot, 'h', failed(serverError(5000), { rejectedAt: UNKNOWN_REJECTION }), false, NOW);

    expect(slot.kept).toEqual(token(at(-60_000)));
    expect(slot.rejectedAt).toBe(0);
  });

  it('the latest rejection it knows, which an older one reported later does not move back', () => {
    const memory = new MemoryTier(10);
    const slot = memory.slot('k');
    memory.store('k', slot, 'h', failed({ code: 'unauthorized', until: at(5000) }), false, NOW);

    // A token received 20 s before the 401, 40 s after an older rejection the outcome reports
    const older = failed(serverError(5000), { rejectedAt: at(-60_000), kept: token(at(-20_000)) });
    memory.store('k', slot, 'h', older, false, at(1000));

    expect(slot.rejectedAt).toBe(NOW);
    expect(slot.kept).toBeUndefined();
  });

  it("a client's hold only from its own exchange; one it read elsewhere holds this key alone", () => {
    const memory = new MemoryTier(10);
    const [own, read] = [memory.slot('own'), memory.slot('read')];

    memory.store('read', read, 'read-hold', failed(hold(30_000), { scope: 'client', cause: 'hold' }), false, NOW);
    memory.store('own', own, 'own-hold', failed(hold(30_000), { scope: 'client', cause: 'exchange' }), false, NOW);

    expect([memory.hold('read-hold', NOW), read.failure]).toEqual([undefined, hold(30_000)]);
    expect([memory.hold('own-hold', NOW), own.failure]).toEqual([hold(30_000), undefined]);
  });

  it("a key's longer hold in force, and no other remembered failure, when a shorter hold comes", () => {
    const memory = new MemoryTier(10);
    const [held, failing] = [memory.slot('held'), memory.slot('failing')];
    memory.store('held', held, 'h', failed(hold(30_000)), false, NOW);
    memory.store('failing', failing, 'h2', failed(serverError(30_000)), false, NOW);

    memory.store('held', held, 'h', failed(hold(5000)), false, at(1000));
    memory.store('failing', failing, 'h2', failed(hold(5000)), false, at(1000));

    expect(held.failure).toEqual(hold(30_000));
    expect(failing.failure).toEqual(hold(5000));
  });
});

describe("the memory tier's view of a key", () => {
  it('shows a hold on the key as a hold, not as a remembered failure', () => {
    const memory = new MemoryTier(10);
    const slot = memory.slot('k');
    memory.store('k', slot, 'h', failed(hold(30_000)), false, NOW);

    const view = memory.view(slot, undefined, at(1000));

    expect([view.failure, view.hold]).toEqual([undefined, hold(30_000)]);
  });
});
