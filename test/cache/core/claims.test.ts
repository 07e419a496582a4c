import { epochMs, monoMs } from '../../../lambda/clock';
import {
  type ClaimFacts,
  echoesOf,
  EMPTY_WATCH,
  judge,
  lineageAfter,
  type Mark,
  marked,
  type Watch,
  waitedFor,
  withEcho,
} from '../../../lambda/cache/core/claims';
import { CLOCK_TOLERANCE_MS } from '../../../lambda/cache/core/lifetime';
import { cacheSettings } from '../../../lambda/cache/core/settings';

// How a waiter judges the claim on a key's exchange: on its own monotonic clock, by renewals and
// echoes, never by comparing two clocks. Settings of a 5 s deadline: silence 750 ms, echo after
// 250 ms, dominance 1 s, call limit 1 s.

const SETTINGS = cacheSettings(5000);
const NOW = epochMs(1_800_000_000_000);
const SELF = 'waiter';
const claim = (parts: Partial<ClaimFacts> = {}): ClaimFacts => ({
  holder: 'holder-a',
  beat: 0,
  leftMs: 4000,
  runMs: 0,
  claimedAt: NOW,
  lineage: [],
  echoes: [],
  ...parts,
});
/** A read that ran from `start` to `start + 2` on the waiter's monotonic clock. */
const read = (start: number) => ({ startedAt: monoMs(start), endedAt: monoMs(start + 2) });
const see = (watch: Watch, facts: ClaimFacts, start: number, leftMs = 4000, settings = SETTINGS, finished: readonly string[] = []) =>
  judge(watch, facts, read(start), SELF, NOW, leftMs, settings, finished);
/** The watch of a waiter that first saw holder-a's beat 0 at read(0), with its mark as given. */
const watching = (mark: Mark): Watch => marked(see(EMPTY_WATCH, claim(), 0).watch, mark);

describe('judge: a claim seen for the first time', () => {
  it('is alive, and the waiter remembers its holder, its beat and when it saw them', () => {
    expect(see(EMPTY_WATCH, claim({ beat: 3 }), 0)).toEqual({
      verdict: 'alive',
      watch: {
        beats: [['holder-a', 3]],
        current: { holder: 'holder-a', beat: 3, firstSeen: monoMs(2), beatSeen: monoMs(2), mark: 'none' },
        forged: [],
      },
    });
  });

  it('is alive whatever its holder’s clock says within the tolerance: liveness never compares clocks', () => {
    expect(see(EMPTY_WATCH, claim({ claimedAt: epochMs(NOW - 4000) }), 0).verdict).toBe('alive');
  });

  it.each([
    ['dated further ahead than the clocks tolerate', NOW + CLOCK_TOLERANCE_MS + 1, 'implausible'],
    ['dated as far ahead as they tolerate', NOW + CLOCK_TOLERANCE_MS, 'alive'],
    ['made longer ago than any honest holder holds one', NOW - 5000 - 1000 - CLOCK_TOLERANCE_MS - 1, 'implausible'],
    ['made as long ago as an honest holder may hold one', NOW - 5000 - 1000 - CLOCK_TOLERANCE_MS, 'alive'],
  ])('is judged, %s: %s', (_case, claimedAt, verdict) => {
    expect(see(EMPTY_WATCH, claim({ claimedAt: epochMs(claimedAt) }), 0).verdict).toBe(verdict);
  });

  it('leaves the watch as it was when implausible', () => {
    const watch = watching('none');

    expect(see(watch, claim({ claimedAt: epochMs(NOW + 60_000) }), 100).watch).toBe(watch);
  });
});

describe('judge: silence', () => {
  // Each waiter here has sent its mark already, so no echo falls due.
  it('counts a holder as gone once no higher beat has come for 750 ms, from the end of the read that saw the last', () => {
    const first = watching('sent');

    expect(see(first, claim(), 2 + 750 - 1).verdict).toBe('alive');
    expect(see(first, claim(), 2 + 750)).toEqual({ verdict: 'silent', watch: first });
  });

  it('counts a higher beat as a renewal, from the end of the read that saw it', () => {
    const renewed = see(watching('sent'), claim({ beat: 1 }), 600);

    expect(renewed).toEqual({
      verdict: 'alive',
      watch: {
        beats: [['holder-a', 1]],
        current: { holder: 'holder-a', beat: 1, firstSeen: monoMs(2), beatSeen: monoMs(602), mark: 'sent' },
        forged: [],
      },
    });
    expect(see(renewed.watch, claim({ beat: 1 }), 602 + 750 - 1).verdict).toBe('alive');
    expect(see(renewed.watch, claim({ beat: 1 }), 602 + 750).verdict).toBe('silent');
  });

  it('never counts an older copy of the claim put back as a renewal: the highest beat seen stays', () => {
    const later = see(watching('sent'), claim({ beat: 3 }), 100).watch;

    const older = see(later, claim({ beat: 2 }), 200);

    expect(older).toEqual({ verdict: 'alive', watch: later });
    expect(see(later, claim({ beat: 2 }), 102 + 750).verdict).toBe('silent');
  });

  it('counts a holder it saw before another as gone: only an older copy brings it back', () => {
    const a = see(EMPTY_WATCH, claim({ beat: 1 }), 0).watch;
    const b = see(a, claim({ holder: 'holder-b' }), 100).watch;

    expect(see(b, claim({ beat: 1 }), 200)).toEqual({ verdict: 'silent', watch: b });
    expect(see(b, claim({ beat: 0 }), 200)).toEqual({ verdict: 'silent', watch: b });
  });

  it('waits again for a holder seen before another once it renews: one beat per holder is kept', () => {
    const a = see(EMPTY_WATCH, claim({ beat: 1 }), 0).watch;
    const b = see(a, claim({ holder: 'holder-b' }), 100).watch;

    const back = see(b, claim({ beat: 2 }), 200);

    expect(back).toEqual({
      verdict: 'alive',
      watch: {
        beats: [
          ['holder-b', 0],
          ['holder-a', 2],
        ],
        current: { holder: 'holder-a', beat: 2, firstSeen: monoMs(202), beatSeen: monoMs(202), mark: 'none' },
        forged: [],
      },
    });
  });

  it('watches a new holder that took over the watched one, or came after its outcome, from the read that first saw it', () => {
    const a = see(EMPTY_WATCH, claim(), 0).watch;
    const taker = see(a, claim({ holder: 'holder-b', beat: 4, lineage: ['holder-a'] }), 100);
    const next = see(a, claim({ holder: 'holder-b', beat: 4 }), 100, 4000, SETTINGS, ['holder-a']);

    expect(taker.watch.current).toEqual({ holder: 'holder-b', beat: 4, firstSeen: monoMs(102), beatSeen: monoMs(102), mark: 'none' });
    expect(next.watch.current).toEqual(taker.watch.current);
  });

  it('keeps the silence of a holder replaced by neither (an old copy written back): a series of them delays no more than one', () => {
    const a = see(EMPTY_WATCH, claim(), 0).watch;
    const b = see(a, claim({ holder: 'holder-b', lineage: ['holder-x'] }), 500, 4000, SETTINGS, ['holder-x']);

    expect(b).toEqual({
      verdict: 'alive',
      watch: {
        beats: [
          ['holder-a', 0],
          ['holder-b', 0],
        ],
        current: { holder: 'holder-b', beat: 0, firstSeen: monoMs(502), beatSeen: monoMs(2), mark: 'none' },
        forged: [],
      },
    });
    expect(see(b.watch, claim({ holder: 'holder-b' }), 2 + 750).verdict).toBe('silent');
    // Its own renewal is one, from the read that saw it.
    expect(see(b.watch, claim({ holder: 'holder-b', beat: 1 }), 700).watch.current?.beatSeen).toBe(monoMs(702));
  });

  it('counts a holder seen before at no higher beat as gone, though the watch names no current claim', () => {
    const seenOnly: Watch = { beats: [['holder-a', 2]], current: undefined, forged: [] };

    expect(see(seenOnly, claim({ beat: 2 }), 0)).toEqual({ watch: seenOnly, verdict: 'silent' });
    expect(see(seenOnly, claim({ beat: 3 }), 0).verdict).toBe('alive');
  });
});

describe('judge: a holder that falls behind', () => {
  it("is taken over when the waiter's deadline ends more than a fifth of the deadline (at most 1 s) after the holder's", () => {
    expect(see(EMPTY_WATCH, claim({ leftMs: 1500 }), 0, 2500).verdict).toBe('alive');
    expect(see(EMPTY_WATCH, claim({ leftMs: 1500 }), 0, 2501).verdict).toBe('dominated');
    const short = cacheSettings(1000);
    expect(see(EMPTY_WATCH, claim({ leftMs: 300 }), 0, 500, short).verdict).toBe('alive');
    expect(see(EMPTY_WATCH, claim({ leftMs: 300 }), 0, 501, short).verdict).toBe('dominated');
  });

  it('is judged silent before dominated, and dominated before it is asked to echo', () => {
    const first = see(EMPTY_WATCH, claim({ leftMs: 100 }), 0).watch;

    expect(see(first, claim({ leftMs: 100 }), 752, 4000).verdict).toBe('silent');
    expect(see(first, claim({ leftMs: 100 }), 300, 4000).verdict).toBe('dominated');
  });
});

describe('judge: marks and echoes', () => {
  it('asks the holder to echo once the waiter has watched its claim 250 ms, from the end of the first read', () => {
    const first = see(EMPTY_WATCH, claim(), 0).watch;

    expect(see(first, claim(), 249).verdict).toBe('alive');
    expect(see(first, claim(), 250).verdict).toBe('mark');
  });

  it.each<[Mark, boolean, Mark]>([
    ['sent', true, 'landed'],
    ['sent', false, 'sent'],
    ['unknown', true, 'landed'],
    ['unknown', false, 'unknown'],
    ['landed', true, 'landed'],
    ['none', true, 'none'],
  ])('counts a mark %s, with the echo in the claim %p, as %s', (before, echoed, after) => {
    const judged = see(watching(before), claim({ echoes: echoed ? ['another', SELF] : ['another'] }), 300);

    expect(judged.watch.current?.mark).toBe(after);
  });

  it('asks no second echo once its mark is written: it waits for the mark to come back', () => {
    expect([see(watching('sent'), claim(), 300).verdict, see(watching('unknown'), claim(), 300).verdict]).toEqual(['alive', 'alive']);
  });

  it('catches out a beat without its landed mark: only an old copy written back lacks it', () => {
    const judged = see(watching('landed'), claim({ beat: 5, echoes: ['another'] }), 300);

    expect(judged).toEqual({ verdict: 'forged', watch: { beats: [['holder-a', 0]], current: undefined, forged: ['holder-a'] } });
  });

  it('never waits again on a holder caught out, whatever it carries', () => {
    const caught: Watch = { beats: [['holder-a', 0]], current: undefined, forged: ['holder-a'] };

    expect(see(caught, claim({ beat: 9, echoes: [SELF] }), 300)).toEqual({ verdict: 'forged', watch: caught });
  });

  it('waits on a holder whose claim carries its landed mark, and on another holder than the one caught', () => {
    expect(see(watching('landed'), claim({ beat: 1, echoes: [SELF] }), 300).verdict).toBe('alive');
    expect(see(watching('landed'), claim({ holder: 'holder-b' }), 300).verdict).toBe('alive');
  });
});

describe('marked', () => {
  it('sets the mark of the claim watched, and changes no watch without one', () => {
    expect(marked(watching('none'), 'sent').current?.mark).toBe('sent');
    expect(marked(EMPTY_WATCH, 'sent')).toBe(EMPTY_WATCH);
  });
});

describe('waitedFor and lineageAfter', () => {
  const watch: Watch = { beats: [['holder-a', 2]], current: undefined, forged: [] };

  it('shares the outcome of the holder waited for, or of any that took over from it', () => {
    expect(waitedFor(watch, 'holder-a', [])).toBe(true);
    expect(waitedFor(watch, 'holder-b', ['holder-c', 'holder-a'])).toBe(true);
    expect(waitedFor(watch, 'holder-b', ['holder-c'])).toBe(false);
    expect(waitedFor(EMPTY_WATCH, 'holder-a', ['holder-a'])).toBe(false);
  });

  it('names the holders taken over from, oldest first, the last eight', () => {
    const lineage = ['h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'h7', 'h8'];

    expect(lineageAfter(claim({ holder: 'h9', lineage }), SETTINGS)).toEqual(['h2', 'h3', 'h4', 'h5', 'h6', 'h7', 'h8', 'h9']);
    expect(lineageAfter(claim({ holder: 'h9', lineage: ['h1'] }), SETTINGS)).toEqual(['h1', 'h9']);
  });
});

describe('withEcho and echoesOf', () => {
  it('adds a waiter to the echoes once, the oldest forgotten past 32', () => {
    const echoed = claim({ echoes: ['w1'] });
    const full = claim({ echoes: Array.from({ length: 32 }, (_, index) => `w${index}`) });

    expect(withEcho(echoed, 'w1', SETTINGS)).toBe(echoed);
    expect(withEcho(echoed, 'w2', SETTINGS)).toEqual({ ...echoed, echoes: ['w1', 'w2'] });
    expect(withEcho(full, 'w32', SETTINGS).echoes).toEqual(Array.from({ length: 32 }, (_, index) => `w${index + 1}`));
  });

  it('joins the echoes of two versions of a claim, each once, the first version’s first, the oldest forgotten past 32', () => {
    const a = claim({ echoes: ['w1', 'w2'] });
    const b = claim({ echoes: ['w2', 'w3'] });
    const many = claim({ echoes: Array.from({ length: 32 }, (_, index) => `x${index}`) });

    expect(echoesOf(a, b, SETTINGS)).toEqual(['w1', 'w2', 'w3']);
    expect(echoesOf(a, many, SETTINGS)).toEqual(many.echoes);
    expect(echoesOf(many, a, SETTINGS)).toEqual([...many.echoes.slice(2), 'w1', 'w2']);
  });
});
