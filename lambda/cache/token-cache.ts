import type { TokenCacheSetting } from '../config';
import { ExchangeError, upstreamFailure } from '../errors';
import type { IdpToken } from '../upstream/exchange';
import type { CredentialRequest } from '../credentials/access-policy';
import type { TokenRequest } from '../request/token-request';
import { answerFrom, type Entry } from './lifetime';
import { MemoryTier, type Slot } from './memory-tier';
import { type Exchange, exchangeOutcome, type Outcome, remaining } from './outcome';
import { answerFailure, decide, type Freshness, isRemembered, remember } from './plan';
import type { CacheReport, CacheTier } from './report';
import { type CacheableRequest, cacheable, holdKeyOf, memoryKey, requestText } from './request-key';
import type * as Pepper from './pepper';
import type * as Shared from './shared-tier';
import type { SharedTier } from './shared-tier';

/** One request's visit to the cache. */
export interface CacheAsk extends Freshness {
  readonly request: TokenRequest | CredentialRequest;
  /** The token URL as the policy normalised it. */
  readonly tokenUrl: string;
  /** `performance.now()` by which the caller must have its answer: the same deadline as a direct IdP call. */
  readonly deadline: number;
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
 * ahead of its going stale, shares one exchange and its outcome among the requests that arrive while
 * it runs, remembers failures, honours holds, and serves a stale token when the IdP gives none.
 */
export class TokenCache {
  private readonly memory: MemoryTier;

  constructor(
    private readonly shared: SharedTier | undefined,
    private readonly clock: () => number,
    maxEntries = 1000,
  ) {
    this.memory = new MemoryTier(maxEntries);
  }

  /** The request's token, or the ExchangeError it gets. Everything it does ends within its deadline. */
  async resolve(ask: CacheAsk): Promise<CacheAnswer> {
    const { request } = ask;
    const held = holdKeyOf(request, ask.tokenUrl);
    if (!cacheable(request)) return this.uncached(ask, held);
    const slot = this.memory.slot(memoryKey(request, ask.tokenUrl));
    const known = slot.kept;
    const now = this.clock();
    const plan = decide(this.memory.view(slot, this.memory.hold(held, now), ask, now), ask, now);
    switch (plan.act) {
      case 'answer':
        return this.answer({ kind: 'token', entry: plan.entry, from: 'memory' }, ask, known);
      case 'fail':
        return this.answer({ kind: 'failure', failure: plan.failure, kept: slot.kept, cause: plan.cause }, ask, known);
      case 'wait': {
        // A request that joins a fetch under way gets its outcome as a hit: it cost the IdP nothing.
        const outcome = await (slot.pending as NonNullable<Slot['pending']>).outcome;
        // The fetch ran out of its own, earlier deadline while the fleet's exchange went on: try again.
        if (outcome.kind === 'failure' && outcome.cause === 'deadline' && remaining(ask.deadline) > 0) return this.resolve(ask);
        return this.answer(outcome.kind === 'token' ? { ...outcome, from: 'memory' } : outcome, ask, known);
      }
      case 'exchange':
        return this.answer(await this.start(slot, held, plan.refresh, ask, request), ask, known);
    }
  }

  /** Fetch the key's token, as the one request on this instance whose outcome the others share. */
  private start(slot: Slot, held: string, refresh: boolean, ask: CacheAsk, request: CacheableRequest): Promise<Outcome> {
    const kept = slot.kept;
    const fetching = this.shared
      ? this.shared.fetch({
          ...ask,
          request,
          requestText: requestText(request, ask.tokenUrl),
          holdKey: held,
          known: kept,
          refresh,
        })
      : this.fromIdp(ask, kept, refresh);
    const pending = {
      fresh: ask.noCache,
      outcome: fetching
        .then((outcome) => {
          this.memory.store(slot, held, outcome, refresh, this.clock());
          return outcome;
        })
        .finally(() => {
          if (slot.pending === pending) slot.pending = undefined;
        }),
    };
    slot.pending = pending;
    return pending.outcome;
  }

  private fromIdp(ask: CacheAsk, kept: Entry | undefined, refresh: boolean): Promise<Outcome> {
    if (refresh) ask.report.refresh = 'ahead';
    return exchangeOutcome(ask.exchange, ask.deadline, kept, this.clock);
  }

  /** The answer an outcome gives this request, and the tier that gave it. */
  private answer(outcome: Outcome, ask: CacheAsk, known: Entry | undefined): CacheAnswer {
    const now = this.clock();
    if (outcome.kind === 'token') {
      if (outcome.from === 'idp') return this.served(ask, 'miss', outcome.entry.token);
      return this.served(ask, outcome.from === 'table' ? 'shared' : 'memory', answerFrom(outcome.entry, now));
    }
    if (outcome.cause === 'failure' || outcome.cause === 'hold') ask.report.remembered = outcome.cause;
    const answer = answerFailure(outcome.failure, outcome.kept, ask, now);
    if (answer.served === 'error') {
      ask.report.tier = 'miss';
      throw answer.error;
    }
    const tier = answer.served === 'stale' ? 'stale' : answer.entry === known ? 'memory' : 'shared';
    return this.served(ask, tier, answerFrom(answer.entry, now));
  }

  private served(ask: CacheAsk, tier: CacheTier, token: IdpToken): CacheAnswer {
    ask.report.tier = tier;
    return { token, header: tier === 'miss' || tier === 'stale' ? tier : 'hit' };
  }

  /**
   * A request no cache may answer (a caller's `private_key_jwt`): it goes to the IdP every time, but a hold on its
   * client id and token URL applies to it, and a hold it gets applies to the others.
   */
  private async uncached(ask: CacheAsk, held: string): Promise<CacheAnswer> {
    const hold = this.memory.hold(held, this.clock()) ?? (await this.shared?.holdOn(held, ask.deadline, ask.report));
    if (hold) {
      ask.report.remembered = 'hold';
      ask.report.tier = 'miss';
      throw upstreamFailure(hold.code, Math.ceil((hold.until - this.clock()) / 1000));
    }
    try {
      return this.served(ask, 'miss', await ask.exchange(Math.max(1, remaining(ask.deadline))));
    } catch (error) {
      ask.report.tier = 'miss';
      if (error instanceof ExchangeError && isRemembered(error) && error.code === 'upstream_throttled') {
        const until = remember(error, this.clock()).until;
        this.memory.setHold(held, until);
        await this.shared?.putHold(held, { code: 'upstream_throttled', until }, ask.deadline, ask.report);
      }
      throw error;
    }
  }
}

/**
 * The cache TOKEN_CACHE configures, or undefined when it is off. The shared tier, and with it the AWS
 * SDK, is loaded only for `shared`, while the function initialises: `memory` never pays for the SDK.
 */
export function createTokenCache(setting: TokenCacheSetting, upstreamTimeoutMs: number, clock: () => number): TokenCache | undefined {
  if (setting.mode === 'off') return undefined;
  if (setting.mode !== 'shared') return new TokenCache(undefined, clock);
  /* eslint-disable @typescript-eslint/no-require-imports -- lazy loads, on purpose (see above) */
  const { callLimitFor, SharedTier: Tier } = require('./shared-tier') as typeof Shared;
  const { secretsManagerPepper } = require('./pepper') as typeof Pepper;
  /* eslint-enable @typescript-eslint/no-require-imports */
  const pepper = secretsManagerPepper(setting.pepperSecret, clock);
  return new TokenCache(
    new Tier({ tableName: setting.table, upstreamTimeoutMs, callLimitMs: callLimitFor(upstreamTimeoutMs), pepper, clock }),
    clock,
  );
}
