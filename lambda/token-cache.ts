import { createHash } from 'node:crypto';
import type { IdpToken } from './exchange';
import type { TokenRequest } from './token-request';

/** When a kept token stops being handed out, and when the IdP says it expires (epoch ms). */
export interface Lifetime {
  readonly expiresAt: number;
  /** expiresAt less the safety margin. */
  readonly staleAt: number;
}

interface Entry extends Lifetime {
  readonly token: IdpToken;
}

export interface CacheResult {
  readonly token: IdpToken;
  readonly hit: boolean;
}

/** Which tier answered a request: this instance's memory, the table every instance shares, or neither (the IdP did). */
export type CacheTier = 'memory' | 'shared' | 'miss';

/** What the fetch behind the memory tier produced: a token from the IdP, or one the shared tier kept, with its lifetime. */
export interface Fetched {
  readonly token: IdpToken;
  readonly tier: 'shared' | 'miss';
  /** Known when the shared tier answered, so memory keeps the entry's own margin rather than one computed from what is left. */
  readonly lifetime?: Lifetime;
}

export interface TieredResult {
  readonly token: IdpToken;
  readonly tier: CacheTier;
}

const MIN_MARGIN_MS = 30_000;
const MARGIN_FRACTION = 0.1;

/**
 * What shapes a token, as one canonical string: every field of the request but the secret, with the
 * token URL as the policy normalised it. Generic on purpose, so a field added to the request later
 * keeps tokens apart without anyone remembering to list it here.
 */
export function tokenShapingFields(request: TokenRequest, tokenUrl: string): string {
  const fields = Object.entries({ ...request, accessTokenUrl: tokenUrl })
    .filter(([name]) => name !== 'clientSecret')
    // Field names are unique, so no two compare equal.
    .sort(([a], [b]) => (a < b ? -1 : 1));
  return JSON.stringify(fields);
}

/**
 * The memory key: a SHA-256 of everything that shapes the token, the secret included, so a wrong
 * secret can never be answered from a right one's entry, and no secret is kept as a key.
 */
export function cacheKey(request: SecretRequest, tokenUrl: string): string {
  return createHash('sha256')
    .update(JSON.stringify([request.clientSecret, tokenShapingFields(request, tokenUrl)]))
    .digest('base64url');
}

/** A request authenticated by a client secret: the only kind a cache tier may answer or keep. */
export type SecretRequest = Extract<TokenRequest, { clientSecret: string }>;

/**
 * Whether any cache tier may answer or keep a request's token. Every secret method may (the
 * `client_secret_jwt` one too): both tiers are keyed, and the shared one sealed, by the client
 * secret, so only the same secret finds the entry. A `private_key_jwt` request may not: the service
 * cannot verify the caller's assertion (the IdP holds the key), so a cached token would go to anyone
 * presenting a forged one for that client.
 */
export function cacheable(request: TokenRequest): request is SecretRequest {
  return request.authMethod !== 'private_key_jwt';
}

/**
 * How long a fresh token may be handed out: until `expires_in` less a margin of the larger of 30 s
 * and 10%. Undefined for a token that must not be kept (no usable `expires_in`, or none past the margin).
 */
export function lifetimeOf(token: IdpToken, now: number): Lifetime | undefined {
  const lifetimeMs = expiresInSeconds(token) * 1000;
  const marginMs = Math.max(MIN_MARGIN_MS, lifetimeMs * MARGIN_FRACTION);
  if (!(lifetimeMs > marginMs)) return undefined;
  return { expiresAt: now + lifetimeMs, staleAt: now + lifetimeMs - marginMs };
}

/**
 * Tokens of one function instance, reused until `expires_in` less a margin (the larger of 30 s and
 * 10%), least-recently-used first out. Identical concurrent requests share one fetch. Failures and
 * tokens without a usable `expires_in` are never kept.
 */
export class TokenCache {
  private readonly entries = new Map<string, Entry>();
  private readonly inflight = new Map<string, Promise<Fetched>>();

  constructor(
    private readonly maxEntries = 1000,
    private readonly now: () => number = Date.now,
  ) {}

  /** The token for `key`: from memory, or from `fetchToken` (the IdP), kept for next time. */
  async get(key: string, fetchToken: () => Promise<IdpToken>): Promise<CacheResult> {
    const { token, tier } = await this.resolve(key, async () => ({ token: await fetchToken(), tier: 'miss' }));
    return { token, hit: tier !== 'miss' };
  }

  /**
   * The token for `key` and the tier that answered: memory, or whatever `fetch` reports (the shared
   * tier or the IdP). Requests that join a fetch already under way count as memory hits.
   */
  async resolve(key: string, fetch: () => Promise<Fetched>): Promise<TieredResult> {
    const cached = this.fresh(key);
    if (cached) return { token: withRemainingLifetime(cached.token, cached.expiresAt, this.now()), tier: 'memory' };

    const pending = this.inflight.get(key);
    if (pending) return { token: (await pending).token, tier: 'memory' };

    const fetching = fetch();
    this.inflight.set(key, fetching);
    try {
      const fetched = await fetching;
      this.store(key, fetched);
      return { token: fetched.token, tier: fetched.tier };
    } finally {
      this.inflight.delete(key);
    }
  }

  get size(): number {
    return this.entries.size;
  }

  private fresh(key: string): Entry | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    this.entries.delete(key);
    if (entry.staleAt <= this.now()) return undefined;
    this.entries.set(key, entry); // most recently used goes last
    return entry;
  }

  private store(key: string, { token, lifetime }: Fetched): void {
    const kept = lifetime ?? lifetimeOf(token, this.now());
    if (!kept) return;
    this.entries.set(key, { token, ...kept });
    while (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
  }
}

// RFC 6749 5.1 makes expires_in a number of seconds; some IdPs send it as a numeric string. Zero or
// a negative number needs no check here: it is shorter than any margin, so lifetimeOf refuses it.
function expiresInSeconds(token: IdpToken): number {
  const value = token.expires_in;
  const seconds = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
  return typeof seconds === 'number' && Number.isFinite(seconds) ? seconds : Number.NaN;
}

/** The kept token with `expires_in` lowered to what is left, in the type the IdP used. */
export function withRemainingLifetime(token: IdpToken, expiresAt: number, now: number): IdpToken {
  const left = Math.max(0, Math.floor((expiresAt - now) / 1000));
  return { ...token, expires_in: typeof token.expires_in === 'string' ? String(left) : left };
}
