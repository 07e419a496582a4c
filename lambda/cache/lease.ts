import { randomBytes } from 'node:crypto';
import type { SealedState } from './item-state';
import { FAILED, type Read, type TableCalls } from './table-calls';

/** How often a holder renews its claim while its exchange runs. */
const LEASE_RENEW_MS = 250;
/**
 * How long a claim may go unrenewed before waiters count its holder as gone and one of them takes
 * over: three renewals missed. A holder that died delays its key by this and a read, under a second.
 */
const LEASE_SILENCE_MS = 750;

// Waiters read again every twentieth of what is left of their deadline, between 20 and 100 ms: a dead
// holder is noticed well within a second, and a waiter near its deadline sees an outcome promptly.
const MIN_POLL_MS = 20;
const MAX_POLL_MS = 100;

/** How long a waiter with `leftMs` of its deadline sleeps before it reads again; `random` in [0, 1) spreads the fleet's reads ±20%. */
export function pollPauseMs(leftMs: number, random: number): number {
  const pauseMs = Math.min(MAX_POLL_MS, Math.max(MIN_POLL_MS, leftMs / 20)) * (0.8 + random * 0.4);
  return Math.min(leftMs, pauseMs);
}

/** A random name for the holder of one claim, so waiters can tell the outcome they waited for. */
export function newHolder(): string {
  return randomBytes(9).toString('base64url');
}

/**
 * A claim this request holds on a key's exchange. It rewrites the claim under a new revision every
 * 250 ms while the exchange runs, which is how waiters elsewhere know its holder is alive, and settles
 * it with the exchange's outcome, only if nobody took the key over meanwhile.
 */
export class Claim {
  private writes: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  private renewing = true;

  constructor(
    private readonly calls: TableCalls,
    private readonly itemKey: string,
    private readonly lease: SealedState,
    private rev: string,
  ) {}

  /** Renew every LEASE_RENEW_MS until {@link stop} or {@link settle}. */
  keepAlive(): void {
    this.timer = setTimeout(() => {
      this.writes = this.writes.then(() => this.renew());
    }, LEASE_RENEW_MS);
  }

  /** No more renewals: what is in flight lands, nothing more is written. */
  stop(): void {
    this.renewing = false;
    clearTimeout(this.timer);
  }

  /**
   * Replace the claim with the outcome, after any renewal in flight, unless another instance took the
   * key over: then the claim's revision has moved on, and the write's condition refuses it.
   */
  async settle(outcome: SealedState): Promise<void> {
    this.stop();
    await this.writes;
    await this.calls.put(this.itemKey, outcome, { rev: this.rev });
  }

  private async renew(): Promise<void> {
    const written = await this.calls.put(this.itemKey, this.lease, { rev: this.rev });
    // A refused condition means another instance counted this holder as gone and took over.
    if (written === FAILED || 'lost' in written) return;
    this.rev = written.rev;
    if (this.renewing) this.keepAlive();
  }
}

/**
 * A waiter's view of the claims it has seen: which holders it waited for, and whether the claim it
 * sees now is still renewed. Renewal is judged on this instance's own clock, from the revisions it
 * reads, so clocks that differ between instances cannot make a live holder look gone.
 */
export class LeaseWatch {
  private readonly holders = new Set<string>();
  private seen: { readonly rev: string | undefined; readonly at: number } | undefined;

  /** `maxLeaseMs`: the furthest ahead an honest holder dates its claim (its deadline and one call). */
  constructor(private readonly maxLeaseMs: number) {}

  /**
   * Whether a claim read in `read` has a live holder: dated within the bound an honest holder keeps,
   * not past it, and renewed within LEASE_SILENCE_MS. The revision the claim carried when first seen
   * existed from at least the end of that read to the start of this one.
   */
  alive(holder: string, until: number, read: Read, now: number): boolean {
    if (!(until > now && until <= now + this.maxLeaseMs)) return false;
    this.holders.add(holder);
    const rev = read.item?.rev;
    if (this.seen === undefined || this.seen.rev !== rev) {
      this.seen = { rev, at: read.endedAt };
      return true;
    }
    return read.startedAt - this.seen.at < LEASE_SILENCE_MS;
  }

  /** Whether this request waited for the exchange of `holder`, so its outcome is this request's too. */
  waitedFor(holder: string): boolean {
    return this.holders.has(holder);
  }
}
