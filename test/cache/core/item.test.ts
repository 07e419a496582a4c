import { epochMs } from '../../../lambda/clock';
import type { ClaimFacts } from '../../../lambda/cache/core/claims';
import {
  EMPTY_MEMO,
  type Ended,
  endsAt,
  entryOf,
  type ItemState,
  keeping,
  type KeyMemo,
  provingOnly,
  type StoredToken,
  storedOf,
  usefulUntil,
} from '../../../lambda/cache/core/item';
import { type Entry, ownEntry } from '../../../lambda/cache/core/lifetime';

// What a table item holds and how long it is of use. T0 is when its token arrived; at(ms) is ms from it.

const T0 = 1_800_000_000_000;
const at = (ms: number) => epochMs(T0 + ms);
const FLOOR = 86_400_000;
const stored: StoredToken = {
  token: { access_token: 'at', expires_in: 3600 },
  receivedAt: at(0),
  by: 'receiver',
  after: at(0),
};
const entry = (receivedMs: number, expiresIn = 3600): Entry => ({
  ...ownEntry({ access_token: `t${receivedMs}`, expires_in: expiresIn }, at(receivedMs), 'receiver'),
  copy: true,
});
const claim: ClaimFacts = { holder: 'h', beat: 2, leftMs: 4000, runMs: 500, claimedAt: at(0), lineage: [], echoes: [] };
const key = (memo: Partial<KeyMemo>, parts: Partial<Extract<ItemState, { kind: 'key' }>> = {}): ItemState => ({
  kind: 'key',
  memo: { ...EMPTY_MEMO, ...memo },
  activity: { kind: 'idle' },
  ended: [],
  ...parts,
});
const failed = (untilMs: number): Ended => ({
  holder: 'h',
  lineage: [],
  outcome: { kind: 'failure', failure: { code: 'upstream_error', until: at(untilMs) } },
});
const answered = (untilMs: number): Ended => ({
  holder: 'h',
  lineage: ['g'],
  outcome: { kind: 'answered', receivedAt: at(0), until: at(untilMs), answerBy: at(0), token: 'kept' },
});

describe('entryOf and storedOf', () => {
  it("holds an item's token as a copy, dated by its receiver, unless this instance received it", () => {
    const asStored = { token: stored.token, receivedAt: at(0), receivedBy: 'receiver', after: at(0) };

    expect(entryOf(stored, 'another')).toEqual({ ...asStored, copy: true });
    expect(entryOf(stored, 'receiver')).toEqual({ ...asStored, copy: false });
  });

  it('stores a kept token as its receiver dated it, whoever holds it', () => {
    expect(storedOf(entryOf(stored, 'another'))).toEqual(stored);
    expect(storedOf(entryOf(stored, 'receiver'))).toEqual(stored);
  });
});

describe('usefulUntil', () => {
  // Every TTL is 5 s (the clocks' tolerance) past the last moment anything in the state is of use.
  it.each<[string, ItemState, number]>([
    ['a hold, at its end', { kind: 'hold', hold: { code: 'upstream_throttled', until: at(30_000) } }, 30_000],
    ['a key with nothing of use, at once', key({}), -T0],
    ['a kept token, one lifetime past its expiry (it proves its key)', key({ kept: stored }), 7_200_000],
    ['a rejection, the floor after it', key({ rejectedAt: at(0) }), FLOOR],
    [
      'a rejection, as long as any token the key kept lives when that is longer',
      key({ rejectedAt: at(0), keptUntil: at(FLOOR + 1) }),
      FLOOR + 1,
    ],
    ['no rejection, however long its tokens lived', key({ keptUntil: at(FLOOR) }), -T0],
    ['a key known to have tokens too large, until it is no longer known', key({ oversizeUntil: at(3_600_000) }), 3_600_000],
    [
      "a claim, past its holder's deadline as its holder dated it",
      key({}, { activity: { kind: 'claim', claim } }),
      claim.runMs + claim.leftMs,
    ],
    ['a failure for waiters, at its end', key({}, { ended: [failed(1000)] }), 1000],
    ['a token for waiters, at its end', key({}, { ended: [answered(4000)] }), 4000],
    ['outcomes for waiters, at the last end', key({}, { ended: [answered(9000), failed(1000), answered(4000)] }), 9000],
    [
      'a kept token with a claim and outcomes, at the latest of them',
      key({ kept: stored, oversizeUntil: at(100) }, { activity: { kind: 'claim', claim }, ended: [failed(1000)] }),
      7_200_000,
    ],
  ])('is %s', (_case, state, lastMs) => {
    expect(usefulUntil(state, FLOOR)).toBe(at(lastMs + 5000));
  });
});

describe('endsAt', () => {
  it("ends a failure's outcome with the failure, a token's at its waiters' last deadline", () => {
    expect([endsAt(failed(1000)), endsAt(answered(4000))]).toEqual([at(1000), at(4000)]);
  });
});

describe('keeping', () => {
  it('keeps a token in an empty memo, with its expiry', () => {
    expect(keeping(EMPTY_MEMO, entry(0))).toEqual({ ...EMPTY_MEMO, kept: storedOf(entry(0)), keptUntil: at(3_600_000) });
  });

  it('keeps the newer token, and the later expiry of all it kept', () => {
    const long = keeping(EMPTY_MEMO, entry(0, 7200));

    expect(keeping(long, entry(1000, 60))).toEqual({ ...EMPTY_MEMO, kept: storedOf(entry(1000, 60)), keptUntil: at(7_200_000) });
  });

  it('keeps the token it has over an older one or one received at the same moment, yet counts their expiry', () => {
    const memo = keeping(EMPTY_MEMO, entry(1000, 60));

    expect(keeping(memo, entry(0, 7200))).toEqual({ ...memo, keptUntil: at(7_200_000) });
    expect(keeping(memo, { ...entry(1000, 60), token: { access_token: 'same-moment', expires_in: 60 } }).kept).toEqual(memo.kept);
  });

  it('leaves what else the memo says as it was', () => {
    const memo: KeyMemo = { ...EMPTY_MEMO, rejectedAt: at(-1), oversizeUntil: at(5) };

    expect(keeping(memo, entry(0))).toMatchObject({ rejectedAt: at(-1), oversizeUntil: at(5) });
  });
});

describe('provingOnly', () => {
  const memo: KeyMemo = { ...EMPTY_MEMO, kept: { ...stored, token: { ...stored.token, scope: 'read' } }, keptUntil: at(3_600_000) };

  it('keeps a kept token whole until it expires, then its receipt and lifetime alone', () => {
    expect(provingOnly(memo, at(3_599_999))).toBe(memo);
    expect(provingOnly(memo, at(3_600_000))).toEqual({ ...memo, kept: { ...stored, token: { access_token: '', expires_in: 3600 } } });
  });

  it('leaves a memo that keeps no token as it is', () => {
    expect(provingOnly(EMPTY_MEMO, at(0))).toBe(EMPTY_MEMO);
  });
});
