import type { SealedState } from '../lambda/cache/item-state';
import type { Expected } from '../lambda/cache/protocol';
import type { CacheReport } from '../lambda/cache/report';
import { FAILED, type Failed, type StoredItem, type Table, type TableCalls, type Written } from '../lambda/cache/table-calls';
import type { Owner, World } from './world';

/** An attribute value as DynamoDB holds it: the types this table's items and an adversary's writes use. */
export type Attribute =
  | { readonly S: string }
  | { readonly N: string }
  | { readonly B: Uint8Array }
  | { readonly BOOL: boolean }
  | { readonly NULL: true }
  | { readonly L: readonly Attribute[] };
export type RawItem = Readonly<Record<string, Attribute>>;

/** How the table treats a call made now: latencies in ms, or a fault. */
export type TableBehaviour =
  | { readonly kind: 'normal'; readonly minMs: number; readonly maxMs: number }
  | { readonly kind: 'slow'; readonly minMs: number; readonly maxMs: number }
  /** The call never answers; half the writes still land. */
  | { readonly kind: 'hang' }
  /** The call fails at once (throttled, denied, unreachable): nothing happens. */
  | { readonly kind: 'error' }
  /** The call happens, but its answer is lost: the caller gives up at its call limit. */
  | { readonly kind: 'lost-answer' };

/**
 * Something the table did that the invariants must know: a write that landed (and by whom), one that
 * landed after its caller gave up, a call made while the table was in trouble for its caller.
 */
export type TableNote =
  | { readonly kind: 'write'; readonly at: number; readonly pk: string; readonly by: string; readonly item: RawItem | undefined }
  | { readonly kind: 'late-landing'; readonly at: number; readonly pk: string; readonly item: RawItem | undefined }
  | { readonly kind: 'trouble'; readonly at: number; readonly pk: string; readonly by: string };

/**
 * A DynamoDB table in simulated time, with DynamoDB's semantics for the calls the cache makes:
 * strongly consistent GetItem; PutItem with `#rev IN (:rev0, ...)` or `NOT attribute_type(#rev, :S)`, refused with the item that refused it (`ALL_OLD`); TTL deletion some time after expiry. Every
 * call takes effect at one moment and answers at a later one, so a write can land after its caller gave up.
 */
export class SimTable {
  readonly items = new Map<string, RawItem>();
  /** Every item each key held, oldest first (an adversary replays them). */
  readonly history = new Map<string, RawItem[]>();
  readonly notes: TableNote[] = [];
  /** Writes each item took, landed or refused. */
  readonly writes = new Map<string, number>();
  calls = 0;

  constructor(
    private readonly world: World,
    private readonly random: () => number,
    private readonly behaviour: (at: number, instance: string, pk: string) => TableBehaviour,
    private readonly callLimitMs: number,
    /** Says what a call did, for the trace. */
    private readonly trace: (line: string) => void = () => undefined,
  ) {}

  /** What an item holds, in words, once the simulation has said how to open items. */
  describe: (pk: string, item: RawItem | undefined) => string = () => '';

  /** The table as one instance reaches it: its calls, answered on its behalf. */
  for(owner: Owner): Table {
    return { calls: (report: CacheReport) => this.callsOf(owner, report) };
  }

  /** Write as anyone with write access may: no condition, any attributes. */
  write(pk: string, item: RawItem | undefined): void {
    if (item) this.store(pk, item);
    else this.items.delete(pk);
  }

  private callsOf(owner: Owner, report: CacheReport): TableCalls {
    return {
      get: (itemKey) =>
        this.call<StoredItem | undefined>(owner, report, itemKey, () => {
          const item = this.live(itemKey);
          this.trace(`${owner.name} read ${itemKey.slice(0, 6)}: ${this.describe(itemKey, item)}`);
          return stored(item);
        }),
      put: (itemKey, state, condition, rev) =>
        this.call<Written>(
          owner,
          report,
          itemKey,
          () => {
            const written = this.put(itemKey, state, condition, rev, owner.name);
            const outcome = 'rev' in written ? 'wrote' : 'refused';
            this.trace(
              `${owner.name} ${outcome} ${itemKey.slice(0, 6)} (${typeof condition === 'string' ? condition : 'rev'}): ${this.describe(itemKey, this.items.get(itemKey))}`,
            );
            return written;
          },
          true,
        ),
    };
  }

  private call<T>(owner: Owner, report: CacheReport, pk: string, effect: () => T, isWrite = false): Promise<T | Failed> {
    this.calls++;
    const behaviour = this.behaviour(this.world.now, owner.name, pk);
    const started = this.world.now;
    if (behaviour.kind !== 'normal') this.notes.push({ kind: 'trouble', at: started, pk, by: owner.name });
    return new Promise((resolve) => {
      let settled = false;
      const answer = (value: T | Failed, name?: string) => {
        if (settled) return;
        settled = true;
        if (value === FAILED) report.tableError ??= name;
        report.tableLatencyMs = (report.tableLatencyMs ?? 0) + (this.world.now - started);
        resolve(value);
      };
      const limit = this.world.schedule(started + this.callLimitMs, owner, () => answer(FAILED, 'TimeoutError'));
      const latency = (min: number, max: number) => min + this.random() * (max - min);
      switch (behaviour.kind) {
        case 'error':
          this.world.schedule(started + latency(0.5, 3), owner, () => answer(FAILED, 'ProvisionedThroughputExceededException'));
          return;
        case 'hang':
          if (isWrite && this.random() < 0.5)
            this.world.schedule(started + latency(1, 3 * this.callLimitMs), undefined, () => this.late(effect, pk));
          return;
        case 'lost-answer':
          this.world.schedule(started + latency(0.5, 5), undefined, () => this.late(effect, pk));
          return;
        default: {
          const applyAt = started + latency(behaviour.minMs, behaviour.maxMs) / 2;
          const answerAt = applyAt + latency(behaviour.minMs, behaviour.maxMs) / 2;
          // The effect happens whatever becomes of the caller; its answer reaches the caller when it runs.
          this.world.schedule(applyAt, undefined, () => {
            const value = effect();
            if (isWrite && answerAt > started + this.callLimitMs)
              this.notes.push({ at: this.world.now, pk, kind: 'late-landing', item: this.items.get(pk) });
            this.world.schedule(answerAt, owner, () => {
              limit.cancel();
              answer(value);
            });
          });
        }
      }
    });
  }

  private late(effect: () => unknown, pk: string): void {
    effect();
    this.notes.push({ at: this.world.now, pk, kind: 'late-landing', item: this.items.get(pk) });
  }

  private put(pk: string, state: SealedState, condition: Expected, rev: string, by: string): Written {
    this.writes.set(pk, (this.writes.get(pk) ?? 0) + 1);
    const current = this.live(pk);
    if (!holds(condition, current)) return { lost: stored(current) };
    this.store(pk, { pk: { S: pk }, state: { B: state.sealed }, rev: { S: rev }, expires: { N: String(state.expiresSeconds) } });
    this.notes.push({ kind: 'write', at: this.world.now, pk, by, item: this.items.get(pk) });
    return { rev };
  }

  private store(pk: string, item: RawItem): void {
    this.items.set(pk, item);
    const past = this.history.get(pk) ?? [];
    past.push(item);
    if (past.length > 32) past.shift();
    this.history.set(pk, past);
  }

  /** The item, unless TTL has deleted it: DynamoDB deletes an expired item some time after its TTL. */
  private live(pk: string): RawItem | undefined {
    const item = this.items.get(pk);
    const expires = item && 'N' in (item.expires ?? {}) ? Number((item.expires as { N: string }).N) : Number.NaN;
    // Deleted within a minute of expiring, at a moment fixed by the item (so a read is repeatable).
    if (item && expires * 1000 + deletionLag(pk, expires) < this.world.epoch()) {
      this.items.delete(pk);
      return undefined;
    }
    return item;
  }
}

function deletionLag(pk: string, expires: number): number {
  let hash = expires | 0;
  for (const character of pk) hash = (Math.imul(hash, 31) + character.charCodeAt(0)) | 0;
  return Math.abs(hash) % 60_000;
}

/** DynamoDB's evaluation of the conditions the cache writes with. */
function holds(condition: Expected, item: RawItem | undefined): boolean {
  const rev = item?.rev;
  const isString = rev !== undefined && 'S' in rev;
  return isString ? condition.revs.includes((rev as { S: string }).S) : condition.unversioned;
}

/** An item as the cache's table calls see it: attributes of the expected types, anything else absent. */
function stored(item: RawItem | undefined): StoredItem | undefined {
  if (!item) return undefined;
  const expires = item.expires && 'N' in item.expires ? Number(item.expires.N) : Number.NaN;
  return {
    rev: item.rev && 'S' in item.rev ? item.rev.S : undefined,
    expiresSeconds: Number.isSafeInteger(expires) ? expires : undefined,
    sealed: item.state && 'B' in item.state ? item.state.B : undefined,
  };
}
