import type { Expected } from '../lambda/cache/core/visit';
import type { CacheReport } from '../lambda/cache/report';
import type { SealedState } from '../lambda/cache/shell/sealed-item';
import { FAILED, type Failed, type StoredItem, type Table, type TableCalls, type Written } from '../lambda/cache/shell/table-calls';
import type { TableCall, TableFault } from './record';
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
  | { readonly kind: 'lost-answer' }
  /** A write lands, its answer is cut, and the client sends it again: the second attempt meets the first's revision. */
  | { readonly kind: 'retried' };

/** DynamoDB's item limit: 400 KB, attribute names and values together. */
const MAX_ITEM_BYTES = 400 * 1024;

/**
 * A DynamoDB table in simulated time, with DynamoDB's semantics for the calls the cache makes:
 * strongly consistent GetItem; PutItem with `#rev IN (:rev0, ...)` or `NOT attribute_type(#rev, :S)`,
 * refused with the item that refused it (`ALL_OLD`), or refused outright as too large; TTL deletion
 * some time after expiry. Every call takes effect at one moment and answers at a later one, so a write
 * can land after its caller gave up. It records each call and what the world did to it.
 */
export class SimTable {
  readonly items = new Map<string, RawItem>();
  /** Every item each key held, oldest first, with when it was written (an adversary replays them). */
  readonly history = new Map<string, { readonly at: number; readonly item: RawItem }[]>();
  readonly calls: TableCall[] = [];
  readonly deletions: { at: number; item: string }[] = [];
  /** Writes each item took, landed or refused. */
  readonly writes = new Map<string, number>();

  constructor(
    private readonly world: World,
    private readonly random: () => number,
    private readonly behaviour: (at: number, instance: string, pk: string) => TableBehaviour,
    private readonly callLimitMs: number,
    /** How long after an item's TTL the table deletes it. */
    private readonly ttlLagMs: number,
    /** The name of the key (or hold) an item is of, for the record. */
    private readonly nameOf: (pk: string) => string,
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

  /** The item as a reader would find it now (TTL deletion applied). */
  peek(pk: string): RawItem | undefined {
    return this.live(pk);
  }

  private callsOf(owner: Owner, report: CacheReport): TableCalls {
    return {
      get: (itemKey) =>
        this.call<StoredItem | undefined>(owner, report, itemKey, 'get', () => {
          const item = this.live(itemKey);
          this.trace(`${owner.name} read ${this.nameOf(itemKey)}: ${this.describe(itemKey, item)}`);
          return stored(item);
        }),
      put: (itemKey, state, condition, rev) =>
        this.call<Written>(
          owner,
          report,
          itemKey,
          'put',
          () => {
            const written = this.put(itemKey, state, condition, rev);
            this.trace(
              `${owner.name} ${'rev' in written ? 'wrote' : 'refused'} ${this.nameOf(itemKey)}: ${this.describe(itemKey, this.items.get(itemKey))}`,
            );
            return written;
          },
          state,
        ),
    };
  }

  private call<T>(
    owner: Owner,
    report: CacheReport,
    pk: string,
    op: 'get' | 'put',
    effect: () => T,
    state?: SealedState,
  ): Promise<T | Failed> {
    let behaviour = this.behaviour(this.world.now, owner.name, pk);
    if (behaviour.kind === 'retried' && op === 'get') behaviour = { kind: 'normal', minMs: 1, maxMs: 12 };
    const sentAt = this.world.now;
    const record: { -readonly [K in keyof TableCall]: TableCall[K] } = {
      instance: owner.name,
      item: this.nameOf(pk),
      op,
      sentAt,
      answeredAt: undefined,
      fault: faultOf(behaviour),
      landedAt: undefined,
    };
    this.calls.push(record);
    return new Promise((resolve) => {
      let settled = false;
      const answer = (value: T | Failed, name?: string) => {
        if (settled) return;
        settled = true;
        if (value === FAILED) report.tableError ??= name;
        else record.answeredAt = this.world.now;
        resolve(value);
      };
      const apply = (): T => {
        const before = this.writes.get(pk);
        const value = effect();
        if (op === 'put' && this.writes.get(pk) !== before && value && typeof value === 'object' && 'rev' in value)
          record.landedAt = this.world.now;
        return value;
      };
      const limit = this.world.schedule(sentAt + this.callLimitMs, owner, () => answer(FAILED, 'TimeoutError'));
      const latency = (min: number, max: number) => min + this.random() * (max - min);
      if (state && state.sealed.length + 200 > MAX_ITEM_BYTES) {
        record.fault = 'too-large';
        this.world.schedule(sentAt + latency(1, 5), owner, () => answer(FAILED, 'ValidationException'));
        return;
      }
      switch (behaviour.kind) {
        case 'error':
          this.world.schedule(sentAt + latency(0.5, 3), owner, () => answer(FAILED, 'ProvisionedThroughputExceededException'));
          return;
        case 'hang':
          if (op === 'put' && this.random() < 0.5) this.world.schedule(sentAt + latency(1, 3 * this.callLimitMs), undefined, apply);
          return;
        case 'lost-answer':
          this.world.schedule(sentAt + latency(0.5, 5), undefined, apply);
          return;
        case 'retried':
          // The first attempt lands; its answer is cut; the second meets the item at the first's revision.
          this.world.schedule(sentAt + latency(0.5, 5), undefined, () => {
            apply();
            this.world.schedule(this.world.now + latency(1, 10), undefined, () => {
              const again = effect();
              this.world.schedule(this.world.now + latency(0.5, 5), owner, () => {
                limit.cancel();
                answer(again);
              });
            });
          });
          return;
        default: {
          const applyAt = sentAt + latency(behaviour.minMs, behaviour.maxMs) / 2;
          const answerAt = applyAt + latency(behaviour.minMs, behaviour.maxMs) / 2;
          // The effect happens whatever becomes of the caller; its answer reaches the caller when it runs.
          this.world.schedule(applyAt, undefined, () => {
            const value = apply();
            this.world.schedule(answerAt, owner, () => {
              limit.cancel();
              answer(value);
            });
          });
        }
      }
    });
  }

  private put(pk: string, state: SealedState, condition: Expected, rev: string): Written {
    const current = this.live(pk);
    if (!holds(condition, current)) return { lost: stored(current) };
    this.writes.set(pk, (this.writes.get(pk) ?? 0) + 1);
    this.store(pk, { pk: { S: pk }, state: { B: state.sealed }, rev: { S: rev }, expires: { N: String(state.expiresSeconds) } });
    return { rev };
  }

  private store(pk: string, item: RawItem): void {
    this.items.set(pk, item);
    const past = this.history.get(pk) ?? [];
    past.push({ at: this.world.now, item });
    if (past.length > 64) past.shift();
    this.history.set(pk, past);
  }

  /** The item, unless TTL has deleted it: DynamoDB deletes an expired item some time after its TTL. */
  private live(pk: string): RawItem | undefined {
    const item = this.items.get(pk);
    const expires = item && 'N' in (item.expires ?? {}) ? Number((item.expires as { N: string }).N) : Number.NaN;
    const deletedAt = expires * 1000 + this.ttlLagMs;
    if (item && deletedAt < this.world.epoch()) {
      this.items.delete(pk);
      // Deleted when its time came, whoever noticed it first: in true time.
      this.deletions.push({ at: deletedAt - (this.world.epoch() - this.world.now), item: this.nameOf(pk) });
      return undefined;
    }
    return item;
  }
}

function faultOf(behaviour: TableBehaviour): TableFault {
  return behaviour.kind === 'normal' ? 'none' : behaviour.kind;
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
