import { type Deadline, epochMs, type EpochMs, monoMs } from '../../clock';
import type { TokenCacheSetting } from '../../config';
import type { CredentialRequest } from '../../credentials/access-policy';
import { ExchangeError, upstreamFailure } from '../../errors';
import type { TokenRequest } from '../../request/token-request';
import type { IdpToken } from '../../upstream/exchange';
import { answerFrom, type Entry, keepable, newest } from '../core/lifetime';
import { MemoryTier, type Pending, type Slot } from '../core/memory-tier';
import { type Outcome, tokenOutcome } from '../core/outcome';
import {
  answerFailure,
  answersNoCache,
  cutShort,
  decide,
  type Freshness,
  happenedAt,
  holdScope,
  inForce,
  isHold,
  isRemembered,
  type KeyView,
  laterRejection,
  longer,
  NO_REJECTION,
  outlastsTimeout,
  type Rejection,
  remember,
} from '../core/rules';
import { type CacheSettings, cacheSettings } from '../core/settings';
import type { CacheReport, CacheTier } from '../report';
import {
  assertionHoldKey,
  type CacheableRequest,
  cacheable,
  clientHoldKey,
  earnedHoldKey,
  holdKeysOf,
  keySecret,
  memoryKey,
  requestText,
  vouched,
} from '../request-key';
import type * as Pepper from './pepper';
import { type Exchange, exchangeResult } from './idp';
import type { Runtime, SharedTier } from './shared-tier';
import type * as Shared from './shared-tier';
import type * as Table from './table-calls';

/** One request's visit to the cache. */
export interface CacheAsk extends Freshness {
  readonly request: TokenRequest | CredentialRequest;
  /** The token URL as the policy normalised it. */
  readonly tokenUrl: string;
  /** The request's one deadline: the same as a direct IdP call's. */
  readonly deadline: Deadline;
  readonly exchange: Exchange;
  readonly report: CacheReport;
}

/** The token for a request, and what `x-token-cache` says of it. */
export interface CacheAnswer {
  readonly token: IdpToken;
  readonly header: 'hit' | 'miss' | 'stale';
}

/** A rejection after every token: a fetch that could not read the key's item cannot know whether the IdP rejected the key elsewhere. */
const UNKNOWN_REJECTION: Rejection = { at: epochMs(Number.MAX_SAFE_INTEGER), own: false };
/** The contract: an instance answering a key from memory looks in the table for a newer token at most once every 30 s. */
const LOOK_EVERY_MS = 30_000;

/**
 * The token cache of one function instance (TOKEN_CACHE `memory` or `shared`): memory in front, the
 * shared table behind it when there is one, the IdP last. It answers from a kept token, refreshes one
 * ahead of its going stale, shares one fetch and its outcome among the requests that arrive while it
 * runs, remembers failures, honours holds, and serves a stale token when the IdP gives none.
 */
export class TokenCache {
  private readonly memory: MemoryTier;

  constructor(
    private readonly shared: SharedTier | undefined,
    private readonly runtime: Runtime,
    private readonly settings: CacheSettings,
  ) {
    this.memory = new MemoryTier(settings.memoryEntries, settings.refreshRetryMs);
  }

  /** The request's token, or the ExchangeError it gets. Everything it does ends within its deadline. */
  async resolve(ask: CacheAsk): Promise<CacheAnswer> {
    const { request } = ask;
    if (!cacheable(request)) return this.uncached(ask);
    const key = memoryKey(request, ask.tokenUrl);
    const found = this.memory.peek(key);
    const now = this.runtime.epoch();
    const holdKeys = holdKeysOf(request, ask.tokenUrl);
    const plan = decide(this.view(found, holdKeys, ask, now), ask, now);
    switch (plan.act) {
      case 'answer':
        // With the table, a copy answered from memory is checked against the table every 30 s: a newer token there replaces it.
        if (this.shared && found && this.lookDue(found, now))
          return this.answer(await this.start(key, found, false, ask, request), ask, found);
        // A look under way may bring a newer token: it is a table read away.
        if (found?.looking)
          return ask.deadline.race(found.looking).then(
            () => this.resolve(ask),
            () => this.answer(this.cutShort(found), ask, found),
          );
        return this.answer(tokenOutcome(plan.entry, 'memory'), ask, found);
      case 'fail': {
        // With the table, a failure or hold this instance remembers is answered once the table shows no kept
        // token of the fleet's in its place, and a stale one stands in only once it shows no rejection since;
        // a hold (all a no-cache request fails on here) once it shows no longer one of the fleet's.
        if (this.shared) {
          const slot = found ?? this.memory.slot(key);
          return this.answer(await this.start(key, slot, false, ask, request), ask, slot);
        }
        const [kept, rejection] = [found?.kept, found?.rejection ?? NO_REJECTION];
        return this.answer(
          { kind: 'failure', failure: plan.failure, kept, rejection, scope: 'key', cause: plan.cause, metAt: now },
          ask,
          found,
        );
      }
      case 'wait': {
        const slot = found as Slot;
        const pending = slot.pending as NonNullable<Slot['pending']>;
        // A request whose deadline ends a fifth of the deadline after the fetch's may not wait on it: it fetches itself.
        if (ask.deadline.at > pending.deadline + this.settings.dominanceMs)
          return this.answer(await this.start(key, slot, false, ask, request), ask, slot);
        // A fetch started by a request with more time left is waited on no longer than this one's own deadline.
        const outcome = await ask.deadline.race(pending.outcome).catch(() => this.cutShort(slot));
        if (this.again(outcome, ask)) return this.resolve(ask);
        // A request that joins a fetch under way gets its outcome as a hit (it cost the IdP nothing), a hold as the seconds left.
        const shared: Outcome =
          outcome.kind === 'token'
            ? outcome.from === 'idp'
              ? { ...outcome, from: 'memory' }
              : outcome
            : { ...outcome, metAt: this.runtime.epoch() };
        return this.answer(shared, ask, slot);
      }
      case 'exchange': {
        const slot = found ?? this.memory.slot(key);
        return this.answer(await this.start(key, slot, plan.refresh, ask, request), ask, slot);
      }
    }
  }

  /** What memory shows this request of the key: a timeout it outlasts was that exchange's deadline, not its own. */
  private view(slot: Slot | undefined, holdKeys: readonly string[], ask: CacheAsk, now: EpochMs): KeyView {
    const view = this.memory.view(slot, this.memory.hold(holdKeys, now), now);
    const { failure } = view;
    if (failure && outlastsTimeout(failure, ask.arrivedAt, ask.deadline.leftMs(), this.settings.dominanceMs))
      return { ...view, failure: undefined };
    return view;
  }

  /** The outcome of a request whose deadline passed while it waited: a timeout of its own, which nobody remembers; what memory keeps may stand in. */
  private cutShort(slot: Slot): Outcome {
    const now = this.runtime.epoch();
    return {
      kind: 'failure',
      failure: { code: 'upstream_timeout', until: now },
      kept: slot.kept,
      rejection: slot.rejection,
      scope: 'key',
      cause: 'deadline',
      metAt: now,
    };
  }

  private lookDue(slot: Slot, now: EpochMs): boolean {
    return now - slot.lookedAt >= LOOK_EVERY_MS || now < slot.lookedAt;
  }

  /**
   * Whether a request that shared a fetch must look again: the fetch ended at its own, earlier deadline
   * while there is time left for this one; it gave a token that cannot be kept and came before this
   * request did (such a token goes to no later request); or it gave a `no-cache` request something
   * older than it takes.
   */
  private again(outcome: Outcome, ask: CacheAsk): boolean {
    if (outcome.kind === 'failure' && outcome.cause === 'deadline') return !ask.deadline.passed();
    // A failure whose time was over before this request came is no answer to it: it asks again.
    if (outcome.kind === 'failure' && outcome.failure.until <= ask.arrivedAt) return true;
    if (outcome.kind === 'token' && !keepable(outcome.entry.token) && outcome.runningAt < ask.arrivedAt) {
      return true;
    }
    if (!ask.noCache) return false;
    if (outcome.kind === 'token') return !answersNoCache(outcome.entry, ask);
    // A no-cache request takes no remembered failure: none told of that happened before it came, a hold aside.
    return outcome.cause === 'failure' || (!isHold(outcome.failure) && happenedAt(outcome.failure) < ask.arrivedAt);
  }

  /** Fetch the key's token, as the one request on this instance whose outcome the others share. */
  private start(key: string, slot: Slot, refresh: boolean, ask: CacheAsk, request: CacheableRequest): Promise<Outcome> {
    const now = this.runtime.epoch();
    const holdKeys = holdKeysOf(request, ask.tokenUrl);
    // Assigned at once: a promise's executor runs before the constructor returns.
    let lookDone!: () => void;
    const looking = new Promise<void>((resolve) => (lookDone = resolve));
    const looked = (seen: Entry | undefined, rejection: Rejection): void => {
      this.memory.looked(key, slot, seen, rejection);
      if (slot.looking === looking) slot.looking = undefined;
      lookDone();
    };
    const clientHold = earnedHoldKey(request, ask.tokenUrl);
    // The fetch's pending entry, once made: the visit may shorten its deadline to a holder's it waits on.
    const own: { pending: Pending | undefined } = { pending: undefined };
    const fetching = this.shared
      ? this.shared.fetch({
          ...ask,
          secret: keySecret(request),
          requestText: requestText(request, ask.tokenUrl),
          holdKeys,
          clientHoldKey: earnedHoldKey(request, ask.tokenUrl),
          memory: this.view(slot, holdKeys, ask, now),
          rejection: slot.rejection,
          rejectedAt: () => slot.rejection.at,
          vouched: vouched(request),
          looked,
          waits: (until) => {
            if (own.pending) own.pending.deadline = monoMs(Math.min(own.pending.deadline, until));
          },
          met: (outcome) => this.memory.store(key, slot, clientHold, outcome, false, this.runtime.epoch()),
          heldNow: () => {
            const now = this.runtime.epoch();
            return longer(this.memory.hold(holdKeys, now), inForce(slot.hold, now) ? slot.hold : undefined);
          },
        })
      : this.fromIdp(ask, slot, refresh, vouched(request));
    if (this.shared) {
      slot.lookedAt = now;
      slot.looking = looking;
    }
    const outcome = fetching.then((outcome) => {
      this.memory.store(key, slot, clientHold, outcome, refresh || ask.report.refresh === 'ahead', this.runtime.epoch());
      return outcome;
    });
    const pending: Pending = { outcome, deadline: ask.deadline.at };
    own.pending = pending;
    slot.pending = pending;
    void outcome
      .finally(() => {
        if (slot.looking === looking) slot.looking = undefined;
        lookDone();
        if (slot.pending === pending) slot.pending = undefined;
      })
      .catch(() => undefined);
    return outcome;
  }

  /** Without a table (TOKEN_CACHE=memory): the IdP, with what is left of the deadline. */
  private async fromIdp(ask: CacheAsk, slot: Slot, refresh: boolean, vouchedFor: boolean): Promise<Outcome> {
    if (refresh) ask.report.refresh = 'ahead';
    const budgetMs = ask.deadline.leftMs();
    const result = await exchangeResult(ask.exchange, this.runtime, this.runtime.instance, ask.deadline, () => slot.rejection.at);
    if ('token' in result) return tokenOutcome(result.token, 'idp');
    const now = this.runtime.epoch();
    const { failure } = result;
    const rejection = failure.code === 'unauthorized' ? laterRejection(slot.rejection, { at: now, own: true }) : slot.rejection;
    return {
      kind: 'failure',
      failure,
      kept: failure.code === 'unauthorized' ? undefined : slot.kept,
      rejection,
      scope: holdScope(vouchedFor, slot.kept, slot.rejection, now),
      cause: cutShort(failure, budgetMs, this.settings.upstreamTimeoutMs) ? 'deadline' : 'exchange',
      metAt: now,
    };
  }

  /** The answer an outcome gives this request, and the tier that gave it. Every kept copy may stand in for a failure, this instance's own included. */
  private answer(outcome: Outcome, ask: CacheAsk, slot: Slot | undefined): CacheAnswer {
    const now = this.runtime.epoch();
    if (outcome.kind === 'token') {
      if (outcome.from === 'idp') return this.served(ask, 'miss', outcome.entry.token);
      return this.served(ask, outcome.from === 'table' ? 'shared' : 'memory', answerFrom(outcome.entry, now));
    }
    if (outcome.cause === 'failure' || outcome.cause === 'hold') ask.report.remembered = outcome.cause;
    const rejection = laterRejection(
      outcome.rejection === 'unknown' ? UNKNOWN_REJECTION : outcome.rejection,
      slot?.rejection ?? UNKNOWN_REJECTION,
    );
    // A pepper switch hides the 401s sealed before it: a token memory kept from before stands in no more (one the new item shows does).
    const switchedAt = this.shared?.pepperSwitchedAt() ?? 0;
    const remembered = slot?.kept && slot.kept.receivedAt > switchedAt ? slot.kept : undefined;
    const kept = newest(outcome.kept, remembered);
    // Only the IdP's own answer to this request tells its seconds as given; a hold told of tells those left as the answer leaves.
    const answer = answerFailure(outcome.failure, kept, rejection, ask, now, outcome.cause === 'exchange' ? outcome.metAt : now);
    if (answer.served === 'error') {
      ask.report.tier = 'miss';
      throw answer.error;
    }
    const tier = answer.served === 'stale' ? 'stale' : isOwn(answer.entry, slot) ? 'memory' : 'shared';
    return this.served(ask, tier, answerFrom(answer.entry, now));
  }

  private served(ask: CacheAsk, tier: CacheTier, token: IdpToken): CacheAnswer {
    ask.report.tier = tier;
    return { token, header: tier === 'miss' || tier === 'stale' ? tier : 'hit' };
  }

  /**
   * A request no cache may answer (a caller's `private_key_jwt`): it goes to the IdP every time, but the holds on
   * its client id and token URL apply to it. A hold it earns covers that client's `private_key_jwt`
   * requests alone: nothing proves the assertion was the client's own.
   */
  private async uncached(ask: CacheAsk): Promise<CacheAnswer> {
    const { clientId } = ask.request;
    const holdKeys = [clientHoldKey(clientId, ask.tokenUrl), assertionHoldKey(clientId, ask.tokenUrl)];
    // The table is read even under a hold memory knows: another instance may have met a longer one since.
    const read = await this.shared?.holdOn(holdKeys, ask.deadline, ask.report);
    // Memory is asked after the read, just before sending: a hold another request here met meanwhile counts as well.
    const held = longer(read, this.memory.hold(holdKeys, this.runtime.epoch()));
    if (held) {
      ask.report.remembered = 'hold';
      ask.report.tier = 'miss';
      throw upstreamFailure(held.code, Math.ceil((held.until - this.runtime.epoch()) / 1000));
    }
    try {
      return this.served(ask, 'miss', await ask.exchange());
    } catch (error) {
      ask.report.tier = 'miss';
      if (error instanceof ExchangeError && isRemembered(error) && error.code === 'upstream_throttled') {
        const hold = remember(error, this.runtime.epoch());
        this.memory.setHold(holdKeys[1] as string, hold.until);
        await this.shared?.putHold(holdKeys[1] as string, hold, ask.deadline, ask.report);
      }
      throw error;
    }
  }
}

function isOwn(entry: Entry, slot: Slot | undefined): boolean {
  return slot?.kept === entry && !entry.copy;
}

/**
 * The cache TOKEN_CACHE configures, or undefined when it is off. The shared tier and its AWS client
 * are loaded only for `shared`, while the function initialises: `memory` never pays for them.
 */
export function createTokenCache(setting: TokenCacheSetting, upstreamTimeoutMs: number, runtime: Runtime): TokenCache | undefined {
  if (setting.mode === 'off') return undefined;
  const settings = cacheSettings(upstreamTimeoutMs);
  if (setting.mode !== 'shared') return new TokenCache(undefined, runtime, settings);
  /* eslint-disable @typescript-eslint/no-require-imports -- lazy loads, on purpose (see above) */
  const { SharedTier: Tier } = require('./shared-tier') as typeof Shared;
  const { dynamoDbTable } = require('./table-calls') as typeof Table;
  const { secretsManagerPepper } = require('./pepper') as typeof Pepper;
  /* eslint-enable @typescript-eslint/no-require-imports */
  const pepper = secretsManagerPepper(setting.pepperSecret, runtime, settings.pepper);
  const table = dynamoDbTable(setting.table, settings.callLimitMs, runtime);
  return new TokenCache(new Tier({ table, settings, pepper, runtime }), runtime, settings);
}
