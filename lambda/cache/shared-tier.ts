import type { CacheReport } from './report';
import { type ItemState, openState, sealState } from './item-state';
import type { Entry } from './lifetime';
import { type Exchange, exchangeResult, type Outcome, outcomeOf, UNKNOWN_REJECTION } from './outcome';
import type { PepperSource } from './pepper';
import {
  type Expected,
  type KeyRead,
  type Now,
  type ProtocolSettings,
  startVisit,
  type Step,
  step,
  type VisitAction,
  type VisitEvent,
  visitOver,
  type WriteResult,
} from './protocol';
import { type Freshness, fromFleet, hedgeFor, holdScope, longer, type Remembered } from './rules';
import { holdItemKeys, type ItemKeys, requestItemKeys } from './sealed-item';
import { FAILED, type StoredItem, type Table, type TableCalls } from './table-calls';
import { type EpochMs, leftUntil, type MonoMs, type Runtime } from './time';

/** One request's visit to the shared tier. */
export interface SharedAsk extends Freshness {
  /** The key's client secret (the keying material of its item; none for a stored credential: the pepper alone) and canonical text (`requestText`). */
  readonly secret: string | null;
  readonly requestText: string;
  /** The hold item that covers the key (`holdKey`). */
  readonly holdKey: string;
  /** This instance's kept token for the key, and the key's latest rejection it knows of. */
  readonly known: Entry | undefined;
  readonly rejectedAt: EpochMs;
  /** This instance's memory would refresh the known token ahead. */
  readonly refresh: boolean;
  /** A failure or hold this instance remembers for the key (a stale token answers it only once the table shows no rejection). */
  readonly remembered: Remembered | undefined;
  /** A stored credential's key: a hold it earns covers the credential whatever it kept. */
  readonly vouched: boolean;
  readonly deadline: MonoMs;
  readonly exchange: Exchange;
  readonly report: CacheReport;
}

export interface SharedTierSettings {
  readonly table: Table;
  readonly upstreamTimeoutMs: number;
  /** The longest any one table call may take. */
  readonly callLimitMs: number;
  readonly pepper: PepperSource;
  readonly runtime: Runtime;
}

/**
 * The call limit for a deadline: a fifth of it, at most 1 s. Calls still out that long are given up;
 * the protocol's hedge has already sent the request on without them.
 */
export function callLimitFor(upstreamTimeoutMs: number): number {
  return Math.max(1, Math.min(1000, Math.floor(upstreamTimeoutMs / 5)));
}

// Rewrites of a hold over another instance's hold write, before the client's hold is left to the key's item.
const HOLD_REWRITES = 2;

/**
 * The fleet-wide tier: a DynamoDB table every function instance shares, behind each instance's memory.
 * It runs the protocol (protocol.ts) for a request: it does the table calls, the IdP exchange and the
 * timers the protocol asks for, and feeds it what they gave, until the protocol answers.
 */
export class SharedTier {
  private readonly protocol: ProtocolSettings;

  constructor(private readonly settings: SharedTierSettings) {
    this.protocol = {
      upstreamTimeoutMs: settings.upstreamTimeoutMs,
      settleMs: settings.callLimitMs,
      hedgeMs: hedgeFor(settings.upstreamTimeoutMs),
    };
  }

  /** The key's token from the table, from the exchange the fleet has under way, or from the IdP. */
  async fetch(ask: SharedAsk): Promise<Outcome> {
    const pepper = await this.pepper(ask.deadline, ask.report);
    if (!pepper) return this.withoutTable(ask);
    const keys = requestItemKeys(pepper, ask.secret, ask.requestText);
    const holdKeys = holdItemKeys(pepper, ask.holdKey);
    const calls = this.settings.table.calls(ask.report);
    const { runtime } = this.settings;
    return new Promise<Outcome>((resolve, reject) => {
      // One timer of each kind at a time: one set again replaces the last (the protocol matches timers by
      // when they were set for), so a long wait never piles up timers.
      const timers = new Map<string, AbortController>();
      const stop = (): void => {
        over = true;
        for (const timer of timers.values()) timer.abort();
      };
      let over = false;
      let visit: Step['visit'];
      let holdWrite: Promise<void> | undefined;
      const now = (): Now => ({ epoch: runtime.epoch(), mono: runtime.mono() });
      const feed = (event: VisitEvent): void => {
        if (!over) apply(step(visit, event, now()));
      };
      const apply = (next: Step): void => {
        visit = next.visit;
        for (const action of next.actions) perform(action);
        if (visitOver(visit)) stop();
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
          case 'write': {
            const startedAt = runtime.mono();
            void calls.put(keys.itemKey, sealState(keys, action.state), action.expected, action.rev).then((written) =>
              feed({
                kind: 'written',
                write: action.write,
                rev: action.rev,
                result: writeResult(keys, written, startedAt, runtime.mono()),
              }),
            );
            return;
          }
          case 'read-hold':
            void readHold(calls, holdKeys).then((read) => feed({ kind: 'hold', hold: read === FAILED ? undefined : read.hold }));
            return;
          case 'write-hold':
            holdWrite = writeHold(calls, holdKeys, action.hold, runtime);
            return;
          case 'exchange':
            if (action.refresh) ask.report.refresh = 'ahead';
            // The request went on without a table call that took longer than the hedge: the table's trouble.
            if (action.hedged) ask.report.tableError ??= 'TableSlow';
            exchangeResult(ask.exchange, action.leftMs, runtime.epoch).then(
              (result) => feed({ kind: 'exchanged', result }),
              (bug: unknown) => {
                // A bug ends the visit where it is: its claim goes unrenewed, and a waiter takes over within a second.
                stop();
                reject(bug);
              },
            );
            return;
          case 'timer': {
            timers.get(action.timer)?.abort();
            const timer = new AbortController();
            timers.set(action.timer, timer);
            runtime.sleep(action.at - runtime.mono(), timer.signal).then(
              () => feed({ kind: 'timer', timer: action.timer, at: action.at }),
              () => undefined,
            );
            return;
          }
          case 'answer': {
            // A hold for the whole client is worth the wait of one write, within the hedge.
            const pending = holdWrite ? Promise.race([holdWrite, runtime.sleep(this.protocol.hedgeMs)]) : undefined;
            if (pending) void pending.then(() => resolve(action.outcome));
            else resolve(action.outcome);
            return;
          }
        }
      };
      apply(
        startVisit(
          {
            known: ask.known,
            rejectedAt: ask.rejectedAt,
            refresh: ask.refresh,
            remembered: ask.remembered,
            deadline: ask.deadline,
            noCache: ask.noCache,
            arrivedAt: ask.arrivedAt,
            holder: runtime.id(),
            vouched: ask.vouched,
          },
          this.protocol,
          now(),
        ),
      );
    });
  }

  /** The pepper, waited for no longer than the hedge: past that, the request goes on without the table. */
  private pepper(deadline: MonoMs, report: CacheReport): Promise<Buffer | undefined> {
    return this.settings.pepper.get(Math.min(this.protocol.hedgeMs, leftUntil(deadline, this.settings.runtime.mono())), report);
  }

  /**
   * Without the table (no pepper): the IdP with what is left of the deadline. Nothing tells this
   * instance whether the IdP rejected the key elsewhere, so no kept token stands in for a failure.
   */
  private async withoutTable(ask: SharedAsk): Promise<Outcome> {
    const { runtime } = this.settings;
    if (ask.refresh) ask.report.refresh = 'ahead';
    const budgetMs = leftUntil(ask.deadline, runtime.mono());
    const result = await exchangeResult(ask.exchange, budgetMs, runtime.epoch);
    const scope = holdScope(ask.vouched, ask.known, ask.rejectedAt, runtime.epoch());
    return outcomeOf(
      result,
      { kept: ask.known, rejectedAt: UNKNOWN_REJECTION, scope },
      { budgetMs, upstreamTimeoutMs: this.settings.upstreamTimeoutMs },
    );
  }

  /** The longest hold on some hold items (a request no cache may answer reads them: `private_key_jwt`), as far as the table tells within the hedge. */
  holdOn(holdKeys: readonly string[], deadline: MonoMs, report: CacheReport): Promise<Remembered | undefined> {
    return this.withinHedge(async () => {
      const pepper = await this.pepper(deadline, report);
      if (!pepper) return undefined;
      const calls = this.settings.table.calls(report);
      const reads = await Promise.all(holdKeys.map((holdKey) => readHold(calls, holdItemKeys(pepper, holdKey))));
      const now = this.settings.runtime.epoch();
      return reads.map((read) => (read === FAILED ? undefined : fromFleet(read.hold, now))).reduce(longer, undefined);
    });
  }

  /** Tell the fleet that the IdP asked to wait, never shortening a longer hold already there; the caller waits for it no longer than the hedge. */
  putHold(holdKey: string, hold: Remembered, deadline: MonoMs, report: CacheReport): Promise<void> {
    return this.withinHedge(async () => {
      const pepper = await this.pepper(deadline, report);
      if (pepper) await writeHold(this.settings.table.calls(report), holdItemKeys(pepper, holdKey), hold, this.settings.runtime);
    });
  }

  /** What `work` gives within the hedge, or undefined: it goes on, but nobody waits for it any longer. */
  private async withinHedge<T>(work: () => Promise<T>): Promise<T | undefined> {
    const stopped = new AbortController();
    const hedge = this.settings.runtime.sleep(this.protocol.hedgeMs, stopped.signal).then(
      () => undefined,
      () => undefined,
    );
    try {
      return await Promise.race([work(), hedge]);
    } finally {
      stopped.abort();
    }
  }
}

function keyRead(keys: ItemKeys, item: StoredItem | undefined, startedAt: MonoMs, endedAt: MonoMs): KeyRead {
  const state = item && openState(keys, item.expiresSeconds, item.sealed);
  return { state: state?.kind === 'key' ? state : undefined, expected: expectedOf(item), startedAt, endedAt };
}

function writeResult(keys: ItemKeys, written: Awaited<ReturnType<TableCalls['put']>>, startedAt: MonoMs, endedAt: MonoMs): WriteResult {
  if (written === FAILED) return { kind: 'failed' };
  if ('rev' in written) return { kind: 'won' };
  return { kind: 'lost', read: written.lost && keyRead(keys, written.lost, startedAt, endedAt) };
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
async function writeHold(calls: TableCalls, keys: ItemKeys, hold: Remembered, runtime: Runtime): Promise<void> {
  let read = await readHold(calls, keys);
  for (let round = 0; round <= HOLD_REWRITES && read !== FAILED; round++) {
    const merged = longer(read.hold, hold) as Remembered;
    const written = await calls.put(keys.itemKey, sealState(keys, { kind: 'hold', hold: merged }), read.expected, runtime.id());
    if (written === FAILED || 'rev' in written) return;
    read = await readHold(calls, keys);
  }
}
