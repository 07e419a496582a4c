import type { Config } from './config';
import type { IdpToken } from './exchange';
import type * as SharedTier from './shared-token-cache';
import type { SharedTokenCache, TableReport } from './shared-token-cache';
import { cacheKey, type Fetched, type SecretRequest, type TieredResult, TokenCache, tokenShapingFields } from './token-cache';

/** The cache tiers of one function instance, as TOKEN_CACHE configures them. */
export interface TokenCacheTiers {
  /**
   * The request's token from the first tier that has it fresh (memory, then the shared table), or
   * from `exchange` (the IdP, given what is left of the deadline). Everything it does, table calls and
   * waits included, ends within `UPSTREAM_TIMEOUT_MS` of its start. Only for a request a cache may
   * answer (see `cacheable`).
   */
  resolve(
    request: SecretRequest,
    tokenUrl: string,
    exchange: (timeoutMs: number) => Promise<IdpToken>,
    report: TableReport,
  ): Promise<TieredResult>;
}

/** The tiers for a configuration; undefined when TOKEN_CACHE is off. */
export function createTokenCacheTiers(
  config: Pick<Config, 'tokenCache' | 'tokenCacheTable' | 'upstreamTimeoutMs'>,
): TokenCacheTiers | undefined {
  if (config.tokenCache === 'off') return undefined;
  const memory = new TokenCache();
  const shared = config.tokenCache === 'shared' ? loadSharedTier(config.tokenCacheTable, config.upstreamTimeoutMs) : undefined;
  return {
    async resolve(request, tokenUrl, exchange, report) {
      const deadline = performance.now() + config.upstreamTimeoutMs;
      const fetch = async (): Promise<Fetched> => {
        if (!shared) return { token: await exchange(config.upstreamTimeoutMs), tier: 'miss' };
        return shared.fetch({
          clientSecret: request.clientSecret,
          fields: tokenShapingFields(request, tokenUrl),
          deadline,
          fetchToken: exchange,
          report,
        });
      };
      return memory.resolve(cacheKey(request, tokenUrl), fetch);
    },
  };
}

/**
 * Load the shared tier, and with it the AWS SDK, only when it is configured: `off` and `memory`
 * never pay for loading the SDK. Called while the function initialises, not on a request.
 */
function loadSharedTier(tableName: string | undefined, upstreamTimeoutMs: number): SharedTokenCache {
  if (!tableName) throw new Error('Environment variable TOKEN_CACHE_TABLE is required when TOKEN_CACHE is "shared"');
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- a lazy load, on purpose (see above)
  const { callTimeoutFor, SharedTokenCache: Shared } = require('./shared-token-cache') as typeof SharedTier;
  return new Shared(tableName, callTimeoutFor(upstreamTimeoutMs));
}
