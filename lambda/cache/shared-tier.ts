import { setTimeout as sleep } from 'node:timers/promises';
import { DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { TABLE_SCHEMA } from './table-schema';
import { type ItemState, openState, sealState } from './item-state';
import { Claim, LeaseWatch, newHolder, pollPauseMs } from './lease';
import { type Entry, keepable, newest, openToFleet, phaseOf } from './lifetime';
import { type Exchange, exchangeOutcome, type Outcome, remaining } from './outcome';
import type { PepperSource } from './pepper';
import { CLOCK_TOLERANCE_MS, decide, type Freshness, inForce, type KeyView, type Remembered } from './plan';
import type { CacheReport } from './report';
import { type CacheableRequest, keySecret } from './request-key';
import { holdItemKeys, type ItemKeys, requestItemKeys } from './sealed-item';
import { FAILED, type Read, TableCalls } from './table-calls';

/** One request's visit to the shared tier. */
export interface SharedAsk extends Freshness {
  readonly request: CacheableRequest;
  /** The request's canonical text (`requestText`) and hold key (`holdKey`). */
  readonly requestText: string;
  readonly holdKey: string;
  /** The token this instance keeps for the key, if any: the table may hold an older one, or none. */
  readonly known: Entry | undefined;
  /** This instance's memory would refresh the known token ahead: so does the request, should it go without the table. */
  readonly refresh: boolean;
  /** `performance.now()` by which the caller must have its answer. */
  readonly deadline: number;
  readonly exchange: Exchange;
  readonly report: CacheReport;
}

export interface SharedTierSettings {
  readonly tableName: string;
  readonly upstreamTimeoutMs: number;
  /** The longest any one table call may take before the request goes on without the table. */
  readonly callLimitMs: number;
  readonly pepper: PepperSource;
  /** Epoch milliseconds. */
  readonly clock: () => number;
}

/**
 * The call limit for a deadline: a fifth of it, at most 1 s. DynamoDB answers in milliseconds in
 * region; a call still pending after this long means the table is in trouble, and the IdP is the
 * better bet for what is left. Shorter limits turned a table slowed by a burst into more IdP calls.
 */
export function callLimitFor(upstreamTimeoutMs: number): number {
  return Math.max(1, Math.min(1000, Math.floor(upstreamTimeoutMs / 5)));
}

/** The key of the read that warms the client up; no item key (43 base64url characters) is this. */
const WARM_UP_KEY = 'warm-up';

/**
 * The fleet-wide tier: a DynamoDB table every function instance shares, behind each instance's memory.
 * An item holds the sealed state of one request's key (lambda/cache/item-state.ts). The first instance
 * to need a token claims the key with a conditional write and asks the IdP while it renews its claim;
 * the others read until its outcome (a token, a failure, or a hold) is there, and take over if its
 * renewals stop. Every call and wait stays within the request's deadline, and whenever the table
 * fails, the request goes to the IdP without it.
 */
export class SharedTier {
  private readonly client: DynamoDBClient;
  private readonly maxLeaseMs: number;

  constructor(private readonly settings: SharedTierSettings) {
    // Region, endpoint (AWS_ENDPOINT_URL_DYNAMODB) and credentials come the standard way, from the
    // environment. One retry at most: each call's abort signal bounds the time, retries included.
    this.client = new DynamoDBClient({ maxAttempts: 2 });
    this.maxLeaseMs = settings.upstreamTimeoutMs + settings.callLimitMs + CLOCK_TOLERANCE_MS;
    this.warmUp();
  }

  /**
   * One read while the function initialises, its answer ignored: the SDK loads the rest of itself and
   * opens its connection then, rather than on the first request's call limit.
   */
  private warmUp(): void {
    const read = new GetItemCommand({
      TableName: this.settings.tableName,
      Key: { [TABLE_SCHEMA.partitionKey.name]: { S: WARM_UP_KEY } },
    });
    this.client.send(read, { abortSignal: AbortSignal.timeout(this.settings.callLimitMs * 4) }).catch(() => undefined);
  }

  /** The key's token from the table, from the exchange the fleet has under way, or from the IdP. */
  async fetch(ask: SharedAsk): Promise<Outcome> {
    const calls = this.calls(ask);
    const pepper = await this.pepper(ask.deadline, ask.report);
    if (!pepper) return this.withoutTable(ask, ask.known, undefined, ask.refresh);
    const keys = requestItemKeys(pepper, keySecret(ask.request), ask.requestText);
    const holdKeys = holdItemKeys(pepper, ask.holdKey);
    const watch = new LeaseWatch(this.maxLeaseMs);
    let read = await calls.get(keys.itemKey);
    let kept = ask.known;
    for (;;) {
      // A read the deadline left no time for fails too, and ends the request without the IdP.
      if (read === FAILED) return this.withoutTable(ask, kept, undefined, ask.refresh);
      const now = this.settings.clock();
      const state = openState(keys, read.item?.expiresSeconds, read.item?.sealed);
      const shared = sharedOutcome(state, watch);
      if (shared) return shared;
      const view = this.view(state, read, ask.known, watch, now);
      const plan = decide(view, ask, now);
      kept = view.entry;
      if (plan.act === 'answer') return { kind: 'token', entry: plan.entry, from: plan.entry === ask.known ? 'memory' : 'table' };
      if (plan.act === 'fail') return { kind: 'failure', failure: plan.failure, kept, cause: plan.cause };
      if (plan.act === 'wait') {
        await sleep(pollPauseMs(remaining(ask.deadline), Math.random()));
        read = await calls.get(keys.itemKey);
        continue;
      }
      const holder = newHolder();
      const lease = sealState(keys, {
        kind: 'lease',
        holder,
        until: now + remaining(ask.deadline) + this.settings.callLimitMs,
        kept: view.entry,
      });
      const [hold, written] = await Promise.all([this.readHold(calls, holdKeys, now), calls.put(keys.itemKey, lease, read.item)]);
      if (written === FAILED) return this.withoutTable(ask, view.entry, hold, plan.refresh);
      if ('lost' in written) {
        // Another instance wrote first: decide again from what it wrote.
        read = written.lost ?? (await calls.get(keys.itemKey));
        continue;
      }
      const claim = new Claim(calls, keys.itemKey, lease, written.rev);
      return this.asHolder(ask, { keys, holdKeys, calls, claim, holder, kept: view.entry, hold, refresh: plan.refresh });
    }
  }

  /** The pepper, waited for no longer than one table call may take. */
  private pepper(deadline: number, report: CacheReport): Promise<Buffer | undefined> {
    return this.settings.pepper.get(Math.min(this.settings.callLimitMs, remaining(deadline)), report);
  }

  /** A hold on a client id at a token URL, for a request no cache may answer (`private_key_jwt`). */
  async holdOn(holdKey: string, deadline: number, report: CacheReport): Promise<Remembered | undefined> {
    const calls = this.calls({ deadline, report });
    const pepper = await this.pepper(deadline, report);
    return pepper && this.readHold(calls, holdItemKeys(pepper, holdKey), this.settings.clock());
  }

  /** Tell the fleet that the IdP asked to wait. */
  async putHold(holdKey: string, hold: Remembered, deadline: number, report: CacheReport): Promise<void> {
    const calls = this.calls({ deadline, report });
    const pepper = await this.pepper(deadline, report);
    if (pepper) await writeHold(calls, holdItemKeys(pepper, holdKey), hold);
  }

  /**
   * Ask the IdP as the key's holder, renewing the claim meanwhile, then put the outcome where the
   * waiters read it: a token, a token they alone may take, or a failure; a hold also for the client.
   */
  private async asHolder(ask: SharedAsk, held: Holding): Promise<Outcome> {
    const { claim, kept, hold } = held;
    if (hold) {
      await claim.settle(sealState(held.keys, { kind: 'failure', holder: held.holder, failure: hold, kept }));
      return { kind: 'failure', failure: hold, kept, cause: 'hold' };
    }
    if (held.refresh) ask.report.refresh = 'ahead';
    claim.keepAlive();
    let outcome: Outcome;
    try {
      outcome = await exchangeOutcome(ask.exchange, ask.deadline, kept, this.settings.clock);
    } finally {
      // A bug leaves the claim unrenewed, so a waiter takes over within a second.
      claim.stop();
    }
    const throttled = outcome.kind === 'failure' && outcome.failure.code === 'upstream_throttled' ? outcome.failure : undefined;
    await Promise.all([
      claim.settle(sealState(held.keys, this.stateAfter(outcome, held.holder))),
      throttled && writeHold(held.calls, held.holdKeys, throttled),
    ]);
    return outcome;
  }

  private stateAfter(outcome: Outcome, holder: string): ItemState {
    if (outcome.kind === 'failure') return { kind: 'failure', holder, failure: outcome.failure, kept: outcome.kept };
    if (keepable(outcome.entry.token)) return { kind: 'entry', entry: outcome.entry };
    // A token that cannot be kept goes to those who waited for this exchange, and to no later request.
    return { kind: 'answered', holder, entry: outcome.entry, until: this.settings.clock() + this.settings.upstreamTimeoutMs };
  }

  /**
   * What the table says about the key, with what this instance knows. A token only the table has is
   * the asker's to refresh early in the window (lifetime.ts, openToFleet); memory judged the known one.
   */
  private view(state: ItemState | undefined, read: Read, known: Entry | undefined, watch: LeaseWatch, now: number): KeyView {
    // A rejection since: no token kept anywhere for this key is ever served stale again.
    const rejected = state?.kind === 'failure' && state.failure.code === 'unauthorized';
    const stored = state?.kind === 'entry' ? state.entry : state?.kind === 'lease' || state?.kind === 'failure' ? state.kept : undefined;
    const entry = newest(usable(rejected ? undefined : known, now), usable(stored, now));
    const failure = state?.kind === 'failure' && inForce(state.failure, now) ? state.failure : undefined;
    const busy = state?.kind === 'lease' && watch.alive(state.holder, state.until, read, now);
    const othersToRefresh = entry !== undefined && entry !== known && !openToFleet(entry, now);
    return { entry, failure, hold: undefined, busy, refreshing: busy || othersToRefresh };
  }

  private async readHold(calls: TableCalls, keys: ItemKeys, now: number): Promise<Remembered | undefined> {
    const read = await calls.get(keys.itemKey);
    if (read === FAILED) return undefined;
    const state = openState(keys, read.item?.expiresSeconds, read.item?.sealed);
    return state?.kind === 'hold' && inForce(state.hold, now) ? state.hold : undefined;
  }

  /** Without the table: a hold it showed, or the IdP with what is left of the deadline. */
  private async withoutTable(ask: SharedAsk, kept: Entry | undefined, hold: Remembered | undefined, refresh: boolean): Promise<Outcome> {
    if (hold) return { kind: 'failure', failure: hold, kept, cause: 'hold' };
    if (remaining(ask.deadline) <= 0) return deadlinePassed(kept, this.settings.clock());
    if (refresh) ask.report.refresh = 'ahead';
    return exchangeOutcome(ask.exchange, ask.deadline, kept, this.settings.clock);
  }

  private calls(ask: Pick<SharedAsk, 'deadline' | 'report'>): TableCalls {
    return new TableCalls(this.client, this.settings.tableName, this.settings.callLimitMs, ask.deadline, ask.report);
  }
}

interface Holding {
  readonly keys: ItemKeys;
  readonly holdKeys: ItemKeys;
  readonly calls: TableCalls;
  readonly claim: Claim;
  readonly holder: string;
  readonly kept: Entry | undefined;
  readonly hold: Remembered | undefined;
  readonly refresh: boolean;
}

/** The outcome of an exchange this request waited for: a token no later request may take, or its failure. */
function sharedOutcome(state: ItemState | undefined, watch: LeaseWatch): Outcome | undefined {
  if (state?.kind === 'answered' && watch.waitedFor(state.holder)) return { kind: 'token', entry: state.entry, from: 'table' };
  if (state?.kind === 'failure' && watch.waitedFor(state.holder))
    return { kind: 'failure', failure: state.failure, kept: state.kept, cause: 'exchange' };
  return undefined;
}

/** A kept token that has not expired, and was not dated further ahead than an honest clock would. */
function usable(entry: Entry | undefined, now: number): Entry | undefined {
  return entry && entry.receivedAt <= now + CLOCK_TOLERANCE_MS && phaseOf(entry, now) !== 'expired' ? entry : undefined;
}

function deadlinePassed(kept: Entry | undefined, now: number): Outcome {
  return { kind: 'failure', failure: { code: 'upstream_timeout', until: now }, kept, cause: 'deadline' };
}

async function writeHold(calls: TableCalls, keys: ItemKeys, hold: Remembered): Promise<void> {
  await calls.put(keys.itemKey, sealState(keys, { kind: 'hold', hold }), 'anything');
}
