import type { Clock, Deadline, EpochMs, MonoMs } from '../../clock';
import type { Entry } from '../core/lifetime';
import type { ItemState } from '../core/item';
import { type Outcome, tokenOutcome } from '../core/outcome';
import { decide, type Freshness, fromFleet, holdScope, type KeyView, longer, type Rejection, type Remembered } from '../core/rules';
import { type CacheSettings, hedgeFor } from '../core/settings';
import {
  type Expected,
  type KeyRead,
  type Now,
  startVisit,
  type Step,
  step,
  type Visit,
  type VisitAction,
  type VisitEvent,
  visitOver,
  wakeAt,
  type WriteResult,
} from '../core/visit';
import type { CacheReport } from '../report';
import { type Exchange, exchangeResult } from './idp';
import type { PepperSource } from './pepper';
import { holdItemKeys, type ItemKeys, openState, requestItemKeys, sealState } from './sealed-item';
import { FAILED, type StoredItem, type Table, type TableCalls, type Written } from './table-calls';

/** Everything the cache reads from the world besides its I/O: the clocks, timers, its own name and names for claims. */
export interface Runtime extends Clock {
  /** This function instance's name, for the tokens it receives. */
  readonly instance: string;
  /** A random name (12 base64url characters): a claim's holder, an item's revision. */
  id(): string;
}

/** One request's visit to the shared tier. */
export interface SharedAsk extends Freshness {
  /** The key's client secret (the keying material of its item; none for a stored credential: the pepper alone) and canonical text. */
  readonly secret: string | null;
  readonly requestText: string;
  /** The hold items that cover the key, and the one a hold it earns for its whole client goes to. */
  readonly holdKeys: readonly string[];
  readonly clientHoldKey: string;
  /** What this instance's memory knows of the key, and its latest rejection. */
  readonly memory: KeyView;
  readonly rejection: Rejection;
  /** The key's latest rejection this instance knows now (another request here may have met one meanwhile). */
  readonly rejectedAt: () => EpochMs;
  /** A stored credential's key: a hold it earns covers the credential whatever it kept. */
  readonly vouched: boolean;
  /** Where the IdP is, for how long it has been taking to answer. */
  readonly tokenUrl: string;
  readonly deadline: Deadline;
  readonly exchange: Exchange;
  readonly report: CacheReport;
  /** Told once, when the item's first read comes back: the newest token and latest rejection the fleet showed (a look, for memory). */
  readonly looked: (seen: Entry | undefined, rejection: Rejection) => void;
  /** Told when the visit waits on a holder whose deadline ends by `until` (this instance's monotonic clock). */
  readonly waits: (until: MonoMs) => void;
  /** Told the visit's own exchange's outcome as soon as it is known, whatever the caller is answered. */
  readonly met: (outcome: Outcome) => void;
  /** A hold in force on this instance now, for the key: checked again as the exchange is sent. */
  readonly heldNow: () => Remembered | undefined;
}

export interface SharedTierSettings {
  readonly table: Table;
  readonly settings: CacheSettings;
  readonly pepper: PepperSource;
  readonly runtime: Runtime;
}

// Rewrites of a hold over another instance's hold write.
const HOLD_REWRITES = 2;
// How many recent answers of the table and of each IdP the hedge follows, and for how long.
const SAMPLES_KEPT = 16;
const SAMPLES_LAST_MS = 5 * 60_000;

/**
 * The fleet-wide tier: a DynamoDB table every function instance shares, behind each instance's
 * memory. It runs the visit's protocol (core/visit.ts) for a request: it makes the table calls, the
 * IdP exchange and the one timer the visit asks for, and feeds the visit what they gave.
 */
export class SharedTier {
  private readonly tableAnswers = new Samples();
  private readonly idpAnswers = new Map<string, Samples>();

  constructor(private readonly parts: SharedTierSettings) {}

  /** When this instance switched to a rotated pepper (0: never): a token it kept before may have a 401 it can no longer see. */
  pepperSwitchedAt(): EpochMs {
    return this.parts.pepper.switchedAt();
  }

  /** The key's token from the table, from the exchange the fleet has under way, or from the IdP. */
  async fetch(ask: SharedAsk): Promise<Outcome> {
    const { runtime, settings } = this.parts;
    const pepper = await this.pepper(ask);
    if (!pepper) return this.withoutTable(ask);
    const keys = requestItemKeys(pepper, ask.secret, ask.requestText);
    const calls = this.timedCalls(ask.report);
    const hedge = hedgeFor(settings, this.tableAnswers.recent(runtime.epoch()), this.idpMs(ask.tokenUrl));
    return new Promise<Outcome>((resolve, reject) => {
      let visit: Visit;
      let over = false;
      let alarm: { at: MonoMs; cancel: AbortController } | undefined;
      const now = (): Now => ({ epoch: runtime.epoch(), mono: runtime.mono() });
      const feed = (event: VisitEvent): void => {
        if (over) return;
        apply(step(visit, event, now()));
        // Memory learns what the first look found, and any later rejection a read shows: it voids older tokens there at once.
        if (event.kind === 'read' && (told === undefined || visit.rejection.at > told.at)) {
          told = visit.rejection;
          ask.looked(visit.seen, visit.rejection);
        }
      };
      let told: Rejection | undefined;
      const apply = (next: Step): void => {
        visit = next.visit;
        for (const action of next.actions) perform(action);
        if (visitOver(visit)) return stop();
        // One timer, set for the moment the visit next needs waking.
        const at = wakeAt(visit);
        if (at === alarm?.at) return;
        alarm?.cancel.abort();
        alarm = at === undefined ? undefined : { at, cancel: new AbortController() };
        if (!alarm) return;
        const set = alarm;
        runtime.sleep(set.at - runtime.mono(), set.cancel.signal).then(
          () => {
            if (alarm === set) alarm = undefined;
            // What the table has lately answered in, calls that answered while the visit waited included, may stretch its hedge.
            const { ms: hedgeMs } = hedgeFor(settings, this.tableAnswers.recent(runtime.epoch()), this.idpMs(ask.tokenUrl));
            feed({ kind: 'tick', at: set.at, hedgeMs });
          },
          () => undefined,
        );
      };
      const stop = (): void => {
        over = true;
        alarm?.cancel.abort();
      };
      const perform = (action: VisitAction): void => {
        switch (action.kind) {
          case 'read': {
            const startedAt = runtime.mono();
            void calls
              .get(keys.itemKey)
              .then((item) => feed({ kind: 'read', read: item === FAILED ? 'failed' : keyRead(keys, item, startedAt, runtime.mono()) }));
            return;
          }
          case 'read-holds':
            void this.readHolds(calls, pepper, ask.holdKeys).then((hold) => feed({ kind: 'holds', hold }));
            return;
          case 'write': {
            const startedAt = runtime.mono();
            const sealed = sealState(keys, action.state, settings.rejectionFloorMs);
            void calls.put(keys.itemKey, sealed, action.expected, action.rev).then((written) =>
              feed({
                kind: 'written',
                write: action.write,
                rev: action.rev,
                result: writeResult(keys, written, action.rev, startedAt, runtime.mono()),
              }),
            );
            return;
          }
          case 'write-hold':
            void writeHold(calls, holdItemKeys(pepper, ask.clientHoldKey), action.hold, runtime, settings).then(() =>
              feed({ kind: 'hold-written' }),
            );
            return;
          case 'exchange': {
            // Another request here may have met a 429 since this visit decided: nothing more is sent.
            const held = ask.heldNow();
            if (held) {
              queueMicrotask(() => feed({ kind: 'held', hold: held }));
              return;
            }
            if (action.refresh) ask.report.refresh = 'ahead';
            // The request went on without a table call that took longer than the hedge: the table's trouble.
            if (action.hedged) ask.report.tableError ??= 'TableSlow';
            const started = runtime.mono();
            exchangeResult(ask.exchange, runtime, runtime.instance, ask.deadline, ask.rejectedAt).then(
              (result) => {
                this.idpAnswered(ask.tokenUrl, runtime.mono() - started);
                feed({ kind: 'exchanged', result });
              },
              (bug: unknown) => {
                // A bug ends the visit where it is: its claim goes unrenewed, and a waiter takes over within a second.
                stop();
                reject(bug);
              },
            );
            return;
          }
          case 'answer':
            resolve(action.outcome);
            return;
          case 'met':
            ask.met(action.outcome);
            return;
          case 'waits':
            ask.waits(action.until);
            return;
        }
      };
      apply(
        startVisit(
          {
            memory: ask.memory,
            rejection: ask.rejection,
            deadline: ask.deadline.at,
            instance: runtime.instance,
            noCache: ask.noCache,
            arrivedAt: ask.arrivedAt,
            holder: runtime.id(),
            vouched: ask.vouched,
            pepperSwitchedAt: this.parts.pepper.switchedAt(),
          },
          settings,
          hedge,
          now(),
        ),
      );
    });
  }

  /** The pepper, waited for no longer than the hedge: past that, the request goes on without the table. */
  private pepper(ask: SharedAsk): Promise<Buffer | undefined> {
    return this.parts.pepper.get(ask.deadline.within(this.parts.settings.hedge.minMs), ask.report);
  }

  /**
   * Without the table: what memory would do, and the IdP with what is left of the deadline. Nothing
   * tells this instance whether the IdP rejected the key elsewhere, so no kept token stands in for a failure.
   */
  private async withoutTable(ask: SharedAsk): Promise<Outcome> {
    const { runtime, settings } = this.parts;
    const plan = decide(ask.memory, ask, runtime.epoch());
    const scope = holdScope(ask.vouched, ask.memory.entry, ask.rejection, runtime.epoch());
    if (plan.act === 'answer') return tokenOutcome(plan.entry, 'memory');
    const metAt = runtime.epoch();
    if (plan.act === 'fail')
      return { kind: 'failure', failure: plan.failure, kept: undefined, rejection: 'unknown', scope, cause: plan.cause, metAt };
    const held = ask.heldNow();
    if (held) return { kind: 'failure', failure: held, kept: undefined, rejection: 'unknown', scope, cause: 'hold', metAt };
    if (plan.act === 'exchange' && plan.refresh) ask.report.refresh = 'ahead';
    const budgetMs = ask.deadline.leftMs();
    const result = await exchangeResult(ask.exchange, runtime, runtime.instance, ask.deadline, ask.rejectedAt);
    if ('token' in result) return tokenOutcome(result.token, 'idp');
    const cut = result.failure.code === 'upstream_timeout' && budgetMs < settings.upstreamTimeoutMs - settings.upstreamTimeoutMs / 25;
    return {
      kind: 'failure',
      failure: result.failure,
      kept: undefined,
      rejection: 'unknown',
      scope,
      cause: cut ? 'deadline' : 'exchange',
      metAt: runtime.epoch(),
    };
  }

  /** The longest hold on some hold items (a request no cache may answer reads them: `private_key_jwt`), as far as the table tells within the hedge. */
  async holdOn(holdKeys: readonly string[], deadline: Deadline, report: CacheReport): Promise<Remembered | undefined> {
    const within = deadline.within(this.parts.settings.hedge.minMs);
    const pepper = await this.parts.pepper.get(within, report);
    if (!pepper) return undefined;
    const read = await within.race(this.readHolds(this.timedCalls(report), pepper, holdKeys)).catch(() => 'failed' as const);
    return read === 'failed' ? undefined : fromFleet(read, this.parts.runtime.epoch());
  }

  /** Tell the fleet that the IdP asked to wait, never shortening a longer hold already there; the caller waits for it no longer than the hedge. */
  async putHold(holdKey: string, hold: Remembered, deadline: Deadline, report: CacheReport): Promise<void> {
    const within = deadline.within(this.parts.settings.hedge.minMs);
    const pepper = await this.parts.pepper.get(within, report);
    if (!pepper) return;
    const writing = writeHold(this.timedCalls(report), holdItemKeys(pepper, holdKey), hold, this.parts.runtime, this.parts.settings);
    await within.race(writing).catch(() => undefined);
  }

  /** The longest hold the hold items hold, as written (`failed`: no item could be read). */
  private async readHolds(calls: TableCalls, pepper: Buffer, holdKeys: readonly string[]): Promise<Remembered | undefined | 'failed'> {
    const reads = await Promise.all(holdKeys.map((holdKey) => readHold(calls, holdItemKeys(pepper, holdKey))));
    const read = reads.filter((one): one is Exclude<typeof one, typeof FAILED> => one !== FAILED);
    return read.length === 0 ? 'failed' : read.map((one) => one.hold).reduce(longer, undefined);
  }

  /** One request's table calls, timed: what the hedge follows, and the log line's table latency. */
  private timedCalls(report: CacheReport): TableCalls {
    const { runtime, table } = this.parts;
    const calls = table.calls(report);
    let inFlight = 0;
    let busySince = 0;
    // Wall time with at least one call out, so calls made side by side count once.
    const timed = async <T>(call: () => Promise<T>): Promise<T> => {
      const started = runtime.mono();
      if (inFlight++ === 0) busySince = started;
      const answer = await call();
      const ended = runtime.mono();
      // A call that failed (a hang at the call limit included) says the table is not answering: the hedge falls to its least until it does.
      if (answer === FAILED) this.tableAnswers.clear();
      else this.tableAnswers.add(ended - started, runtime.epoch());
      if (--inFlight === 0) report.tableLatencyMs = Math.round(((report.tableLatencyMs ?? 0) + ended - busySince) * 10) / 10;
      return answer;
    };
    return {
      get: (itemKey) => timed(() => calls.get(itemKey)),
      put: (itemKey, state, expected, rev) => timed(() => calls.put(itemKey, state, expected, rev)),
    };
  }

  private idpAnswered(tokenUrl: string, ms: number): void {
    const samples = this.idpAnswers.get(tokenUrl) ?? new Samples();
    samples.add(ms, this.parts.runtime.epoch());
    this.idpAnswers.delete(tokenUrl);
    this.idpAnswers.set(tokenUrl, samples);
    if (this.idpAnswers.size > this.parts.settings.memoryEntries) this.idpAnswers.delete(this.idpAnswers.keys().next().value as string);
  }

  /** How long the IdP has lately taken at most; half the deadline while this instance has not asked it lately. */
  private idpMs(tokenUrl: string): number {
    return this.idpAnswers.get(tokenUrl)?.recent(this.parts.runtime.epoch()) ?? this.parts.settings.upstreamTimeoutMs / 2;
  }
}

/** The slowest of the last few answers of something, within the last few minutes. */
class Samples {
  private readonly kept: { readonly ms: number; readonly at: EpochMs }[] = [];

  add(ms: number, at: EpochMs): void {
    this.kept.push({ ms, at });
    if (this.kept.length > SAMPLES_KEPT) this.kept.shift();
  }

  clear(): void {
    this.kept.length = 0;
  }

  recent(now: EpochMs): number | undefined {
    const recent = this.kept.filter((sample) => now - sample.at < SAMPLES_LAST_MS);
    return recent.length === 0 ? undefined : Math.max(...recent.map((sample) => sample.ms));
  }
}

function keyRead(keys: ItemKeys, item: StoredItem | undefined, startedAt: MonoMs, endedAt: MonoMs): KeyRead {
  const state = item && openState(keys, item.expiresSeconds, item.sealed);
  return { state: state?.kind === 'key' ? state : undefined, expected: expectedOf(item), startedAt, endedAt };
}

/**
 * A write's answer for the visit. Refused by an item at the write's own revision, it is that very
 * write: its first attempt landed, its answer was lost, and the client sent it again.
 */
function writeResult(keys: ItemKeys, written: Written | typeof FAILED, rev: string, startedAt: MonoMs, endedAt: MonoMs): WriteResult {
  if (written === FAILED) return { kind: 'failed' };
  if ('rev' in written || written.lost?.rev === rev) return { kind: 'won' };
  // Refused with no item: there is none (or none of ours), as a read would have found.
  return { kind: 'lost', read: keyRead(keys, written.lost, startedAt, endedAt) };
}

/** The condition that overwrites exactly this item: its revision, or none (absent, or no string revision: not ours). */
function expectedOf(item: StoredItem | undefined): Expected {
  return item?.rev === undefined ? { revs: [], unversioned: true } : { revs: [item.rev], unversioned: false };
}

async function readHold(calls: TableCalls, keys: ItemKeys): Promise<{ hold: Remembered | undefined; expected: Expected } | typeof FAILED> {
  const item = await calls.get(keys.itemKey);
  if (item === FAILED) return FAILED;
  const state: ItemState | undefined = item && openState(keys, item.expiresSeconds, item.sealed);
  return { hold: state?.kind === 'hold' ? state.hold : undefined, expected: expectedOf(item) };
}

/**
 * Put a hold on a hold item, kept as long as the longest one there: read, merge, write only if nobody
 * wrote since, a few times at most. A hold someone else wrote in between is read and merged next round.
 */
async function writeHold(calls: TableCalls, keys: ItemKeys, hold: Remembered, runtime: Runtime, settings: CacheSettings): Promise<void> {
  let read = await readHold(calls, keys);
  for (let round = 0; round <= HOLD_REWRITES && read !== FAILED; round++) {
    const merged = longer(read.hold, hold) as Remembered;
    const written = await calls.put(
      keys.itemKey,
      sealState(keys, { kind: 'hold', hold: merged }, settings.rejectionFloorMs),
      read.expected,
      runtime.id(),
    );
    if (written === FAILED || 'rev' in written) return;
    read = await readHold(calls, keys);
  }
}
