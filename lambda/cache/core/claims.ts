import type { EpochMs, MonoMs } from '../../clock';
import { CLOCK_TOLERANCE_MS } from './lifetime';
import type { CacheSettings } from './settings';

/**
 * A claim on a key's exchange, as its holder writes it and rewrites it every renewal. Waiters judge
 * it on their own clock, from these sealed facts: a renewal is a higher `beat`; the holder's deadline
 * is at most `leftMs` after a waiter read it; `claimedAt` (the holder's clock) only bounds replays;
 * `echoes` are the waiters whose marks the holder has seen and carries on (a copy written back cannot).
 */
export interface ClaimFacts {
  readonly holder: string;
  readonly beat: number;
  /** What was left of the holder's deadline when it wrote this. */
  readonly leftMs: number;
  /** How long its exchange had run when it wrote this (0 before it started). */
  readonly runMs: number;
  readonly claimedAt: EpochMs;
  /** The holders this claim took over from, oldest first: their waiters take its outcome. */
  readonly lineage: readonly string[];
  /** The waiters that asked the holder to prove it is alive, by name. */
  readonly echoes: readonly string[];
}

/** When a read ran, on this instance's clock: the revision it returns existed from at least its end to the next read's start. */
export interface ReadSpan {
  readonly startedAt: MonoMs;
  readonly endedAt: MonoMs;
}

/**
 * What a waiter knows of the claims it waited on: the highest beat seen of each holder, the claim it
 * watches now (when it first saw it, when it first saw its latest beat, and its mark), and the holders
 * it caught out (a beat without its landed mark: a copy written back, not the holder).
 */
export interface Watch {
  readonly beats: readonly (readonly [holder: string, beat: number])[];
  readonly current: Watched | undefined;
  readonly forged: readonly string[];
}

export interface Watched {
  readonly holder: string;
  readonly beat: number;
  readonly firstSeen: MonoMs;
  readonly beatSeen: MonoMs;
  readonly mark: Mark;
}

/** A waiter's mark on the claim it watches: none yet, written (its answer awaited), in the item, or of unknown fate. */
export type Mark = 'none' | 'sent' | 'landed' | 'unknown';

export const EMPTY_WATCH: Watch = { beats: [], current: undefined, forged: [] };

/** A waiter's verdict on a claim it read: wait for it (and maybe mark it), or take it over. */
export type Verdict = 'alive' | 'mark' | 'silent' | 'implausible' | 'dominated' | 'forged';

/**
 * Judge a claim read in `read`, by the waiter `self` with `leftMs` left of its own deadline. Liveness
 * is judged on this instance's clock alone, never by comparing dates: a beat higher than any seen of
 * that holder is a renewal; once this waiter's mark is in the item, a beat that does not carry it is
 * not the holder's (only an old copy written back lacks it). The holder's clock only refuses claims
 * from long ago, with the clocks' tolerance. `finished`: the holders whose outcome this waiter has read.
 */
export function judge(
  watch: Watch,
  claim: ClaimFacts,
  read: ReadSpan,
  self: string,
  now: EpochMs,
  leftMs: number,
  settings: CacheSettings,
  finished: readonly string[],
): { readonly watch: Watch; readonly verdict: Verdict } {
  const longest = settings.upstreamTimeoutMs + settings.callLimitMs + CLOCK_TOLERANCE_MS;
  if (claim.claimedAt > now + CLOCK_TOLERANCE_MS || claim.claimedAt < now - longest) return { watch, verdict: 'implausible' };
  if (watch.forged.includes(claim.holder)) return { watch, verdict: 'forged' };
  const current = watch.current?.holder === claim.holder ? watch.current : undefined;
  if (current?.mark === 'landed' && !claim.echoes.includes(self)) {
    return { watch: { ...watch, current: undefined, forged: [...watch.forged, claim.holder] }, verdict: 'forged' };
  }
  const seen = watch.beats.find(([holder]) => holder === claim.holder)?.[1];
  if (seen !== undefined && claim.beat <= seen && current === undefined) {
    // A holder seen before, at no higher beat, after watching another: a copy written back, silent since.
    return { watch, verdict: 'silent' };
  }
  const renewed = seen === undefined || claim.beat > seen;
  // A new holder that neither took over the watched one nor follows its outcome replaced it by no renewal
  // (an old copy written back): the silence goes on, so that a series of such copies delays no more than one.
  const replaced =
    seen === undefined && watch.current && !claim.lineage.includes(watch.current.holder) && !finished.includes(watch.current.holder)
      ? watch.current.beatSeen
      : undefined;
  const mark: Mark =
    current?.mark === 'sent' || current?.mark === 'unknown'
      ? claim.echoes.includes(self)
        ? 'landed'
        : current.mark
      : (current?.mark ?? 'none');
  const watched: Watched = {
    holder: claim.holder,
    beat: renewed ? claim.beat : (seen as number),
    firstSeen: current?.firstSeen ?? read.endedAt,
    beatSeen: renewed ? (replaced ?? read.endedAt) : (current as Watched).beatSeen,
    mark,
  };
  const next: Watch = {
    ...watch,
    beats: renewed ? [...watch.beats.filter(([holder]) => holder !== claim.holder), [claim.holder, claim.beat] as const] : watch.beats,
    current: watched,
  };
  if (read.startedAt - watched.beatSeen >= settings.silenceMs) return { watch: next, verdict: 'silent' };
  if (leftMs > claim.leftMs + settings.dominanceMs) return { watch: next, verdict: 'dominated' };
  const due = watched.mark === 'none' && read.endedAt - watched.firstSeen >= settings.echoAfterMs;
  return { watch: next, verdict: due ? 'mark' : 'alive' };
}

/** The watch once the mark on the watched claim was written (`sent`), or its write answered. */
export function marked(watch: Watch, mark: Mark): Watch {
  return watch.current ? { ...watch, current: { ...watch.current, mark } } : watch;
}

/** Whether this request waited for the exchange of `holder`, or of one it took over from: its outcome is this request's too. */
export function waitedFor(watch: Watch, holder: string, lineage: readonly string[]): boolean {
  return watch.beats.some(([seen]) => seen === holder || lineage.includes(seen));
}

/** The lineage of a claim that takes over from `claim`: its own, then its holder. */
export function lineageAfter(claim: ClaimFacts, settings: CacheSettings): readonly string[] {
  return [...claim.lineage, claim.holder].slice(-settings.kept.lineage);
}

/** The claim with `waiter` among its echoes (the oldest forgotten past the bound). */
export function withEcho(claim: ClaimFacts, waiter: string, settings: CacheSettings): ClaimFacts {
  if (claim.echoes.includes(waiter)) return claim;
  return { ...claim, echoes: [...claim.echoes, waiter].slice(-settings.kept.echoes) };
}

/** The echoes of two versions of one holder's claim, together. */
export function echoesOf(a: ClaimFacts, b: ClaimFacts, settings: CacheSettings): readonly string[] {
  return [...a.echoes, ...b.echoes.filter((echo) => !a.echoes.includes(echo))].slice(-settings.kept.echoes);
}
