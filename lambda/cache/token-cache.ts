import type { TokenCacheSetting } from '../config';
import { ExchangeError, upstreamFailure } from '../errors';
import type { IdpToken } from '../upstream/exchange';
import type { CredentialRequest } from '../credentials/access-policy';
import type { TokenRequest } from '../request/token-request';
import { answerFrom, type Entry, newest } from './lifetime';
import { MemoryTier, type Slot } from './memory-tier';
import { type Exchange, exchangeResult, type Outcome, outcomeOf } from './outcome';
import { answerFailure, answersNoCache, decide, type Freshness, holdScope, isRemembered, longer, type Remembered, remember } from './rules';
import type { CacheReport, CacheTier } from './report';
import {
  assertionHoldKey,
  type CacheableRequest,
  cacheable,
  clientHoldKey,
  holdKeyOf,
  keySecret,
  memoryKey,
  requestText,
  vouched,
} from './request-key';
import type * as Pepper from './pepper';
import type * as Shared from './shared-tier';
import type * as Table from './table-calls';
import type { SharedTier } from './shared-tier';
import { epochMs, leftUntil, type MonoMs, type Runtime } from './time';

/** One request's visit to the cache. */
export interface CacheAsk extends Freshness {
  readonly request: TokenRequest | CredentialRequest;
  /** The token URL as the policy normalised it. */
  readonly tokenUrl: string;
  /** When the caller must have its answer: the same deadline as a direct IdP call. */
  readonly deadline: MonoMs;
  readonly exchange: Exchange;
  readonly report: CacheReport;
}

/** The token for a request, and what `x-token-cache` says of it. */
export interface CacheAnswer {
  readonly token: IdpToken;
  readonly header: 'hit' | 'miss' | 'stale';
}

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
    private readonly upstreamTimeoutMs: number,
    maxEntries = 1000,
  ) {
    this.memory = new MemoryTier(maxEntries);
  }

  /** The request's token, or the ExchangeError it gets. Everything it does ends within its deadline. */
  async resolve(ask: CacheAsk): Promise<CacheAnswer> {
    const { request } = ask;
    if (!cacheable(request)) return this.uncached(ask);
    const key = memoryKey(request, ask.tokenUrl);
    const holdKey = holdKeyOf(request, ask.tokenUrl);
    const found = this.memory.peek(key);
    const now = this.runtime.epoch();
    const plan = decide(this.memory.view(found, this.memory.hold(holdKey, now), now), ask, now);
    switch (plan.act) {
      case 'answer':
        return this.answer({ kind: 'token', entry: plan.entry, from: 'memory' }, ask, found);
      case 'fail': {
        const kept = found?.kept;
        const rejectedAt = found?.rejectedAt ?? epochMs(0);
        // With the table, a stale token stands in only once the table shows the IdP has not rejected the key since.
        if (this.shared && answerFailure(plan.failure, kept, rejectedAt, ask, now).served === 'stale') {
          const slot = this.memory.slot(key);
          return this.answer(await this.start(key, slot, holdKey, { refresh: false, remembered: plan.failure }, ask, request), ask, slot);
        }
        return this.answer({ kind: 'failure', failure: plan.failure, kept, rejectedAt, scope: 'key', cause: plan.cause }, ask, found);
      }
      case 'wait': {
        const slot = found as Slot;
        // A request that joins a fetch under way gets its outcome as a hit: it cost the IdP nothing.
        const outcome = await (slot.pending as Promise<Outcome>);
        if (this.again(outcome, ask)) return this.resolve(ask);
        return this.answer(outcome.kind === 'token' && outcome.from === 'idp' ? { ...outcome, from: 'memory' } : outcome, ask, slot);
      }
      case 'exchange': {
        const slot = found ?? this.memory.slot(key);
        return this.answer(await this.start(key, slot, holdKey, { refresh: plan.refresh, remembered: undefined }, ask, request), ask, slot);
      }
    }
  }

  /**
   * Whether a request that shared a fetch must look again: the fetch ended at its own, earlier deadline
   * while there is time left for this one, or gave a `no-cache` request something older than it takes.
   */
  private again(outcome: Outcome, ask: CacheAsk): boolean {
    if (outcome.kind === 'failure' && outcome.cause === 'deadline') return leftUntil(ask.deadline, this.runtime.mono()) > 0;
    if (!ask.noCache) return false;
    return outcome.kind === 'token' ? !answersNoCache(outcome.entry, ask) : outcome.cause === 'failure';
  }

  /** Fetch the key's token, as the one request on this instance whose outcome the others share. */
  private start(
    key: string,
    slot: Slot,
    holdKey: string,
    { refresh, remembered }: { readonly refresh: boolean; readonly remembered: Remembered | undefined },
    ask: CacheAsk,
    request: CacheableRequest,
  ): Promise<Outcome> {
    const fetching = this.shared
      ? this.shared.fetch({
          ...ask,
          secret: keySecret(request),
          requestText: requestText(request, ask.tokenUrl),
          holdKey,
          known: slot.kept,
          rejectedAt: slot.rejectedAt,
          refresh,
          remembered,
          vouched: vouched(request),
        })
      : this.fromIdp(ask, slot, refresh, vouched(request));
    const pending = fetching
      .then((outcome) => {
        this.memory.store(key, slot, holdKey, outcome, refresh, this.runtime.epoch());
        return outcome;
      })
      .finally(() => {
        if (slot.pending === pending) slot.pending = undefined;
      });
    slot.pending = pending;
    return pending;
  }

  private async fromIdp(ask: CacheAsk, slot: Slot, refresh: boolean, vouchedFor: boolean): Promise<Outcome> {
    if (refresh) ask.report.refresh = 'ahead';
    const budgetMs = leftUntil(ask.deadline, this.runtime.mono());
    const result = await exchangeResult(ask.exchange, budgetMs, () => this.runtime.epoch());
    const scope = holdScope(vouchedFor, slot.kept, slot.rejectedAt, this.runtime.epoch());
    return outcomeOf(
      result,
      { kept: slot.kept, rejectedAt: slot.rejectedAt, scope },
      { budgetMs, upstreamTimeoutMs: this.upstreamTimeoutMs },
    );
  }

  /** The answer an outcome gives this request, and the tier that gave it. Every kept copy may stand in for a failure, this instance's own included. */
  private answer(outcome: Outcome, ask: CacheAsk, slot: Slot | undefined): CacheAnswer {
    const now = this.runtime.epoch();
    if (outcome.kind === 'token') {
      if (outcome.from === 'idp') return this.served(ask, 'miss', outcome.entry.token);
      return this.served(ask, outcome.from === 'table' ? 'shared' : 'memory', answerFrom(outcome.entry, now));
    }
    if (outcome.cause === 'failure' || outcome.cause === 'hold') ask.report.remembered = outcome.cause;
    const rejectedAt = epochMs(Math.max(outcome.rejectedAt, slot?.rejectedAt ?? 0));
    const kept = newest(outcome.kept, slot?.kept);
    const answer = answerFailure(outcome.failure, kept, rejectedAt, ask, now);
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
    const [clientHold, assertionHold] = [clientHoldKey(clientId, ask.tokenUrl), assertionHoldKey(clientId, ask.tokenUrl)];
    const now = this.runtime.epoch();
    const held =
      longer(this.memory.hold(clientHold, now), this.memory.hold(assertionHold, now)) ??
      (await this.shared?.holdOn([clientHold, assertionHold], ask.deadline, ask.report));
    if (held) {
      ask.report.remembered = 'hold';
      ask.report.tier = 'miss';
      throw upstreamFailure(held.code, Math.ceil((held.until - this.runtime.epoch()) / 1000));
    }
    try {
      return this.served(ask, 'miss', await ask.exchange(Math.max(1, leftUntil(ask.deadline, this.runtime.mono()))));
    } catch (error) {
      ask.report.tier = 'miss';
      if (error instanceof ExchangeError && isRemembered(error) && error.code === 'upstream_throttled') {
        const hold = remember(error, this.runtime.epoch());
        this.memory.setHold(assertionHold, hold.until);
        await this.shared?.putHold(assertionHold, hold, ask.deadline, ask.report);
      }
      throw error;
    }
  }
}

function isOwn(entry: Entry, slot: Slot | undefined): boolean {
  return slot?.kept === entry && entry.fleet !== true;
}

/**
 * The cache TOKEN_CACHE configures, or undefined when it is off. The shared tier, and with it the AWS
 * SDK, is loaded only for `shared`, while the function initialises: `memory` never pays for the SDK.
 */
export function createTokenCache(setting: TokenCacheSetting, upstreamTimeoutMs: number, runtime: Runtime): TokenCache | undefined {
  if (setting.mode === 'off') return undefined;
  if (setting.mode !== 'shared') return new TokenCache(undefined, runtime, upstreamTimeoutMs);
  /* eslint-disable @typescript-eslint/no-require-imports -- lazy loads, on purpose (see above) */
  const { callLimitFor, SharedTier: Tier } = require('./shared-tier') as typeof Shared;
  const { dynamoDbTable } = require('./table-calls') as typeof Table;
  const { secretsManagerPepper } = require('./pepper') as typeof Pepper;
  /* eslint-enable @typescript-eslint/no-require-imports */
  const callLimitMs = callLimitFor(upstreamTimeoutMs);
  const pepper = secretsManagerPepper(setting.pepperSecret, () => runtime.epoch());
  const table = dynamoDbTable(setting.table, callLimitMs);
  return new TokenCache(new Tier({ table, upstreamTimeoutMs, callLimitMs, pepper, runtime }), runtime, upstreamTimeoutMs);
}
