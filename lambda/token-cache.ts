import { createHash } from 'node:crypto';
import type { IdpToken } from './exchange';
import type { TokenRequest } from './token-request';

interface Entry {
  readonly token: IdpToken;
  /** When the IdP says the token expires (epoch ms). */
  readonly expiresAt: number;
  /** When the cache stops handing it out (epoch ms): expiresAt less the safety margin. */
  readonly staleAt: number;
}

export interface CacheResult {
  readonly token: IdpToken;
  readonly hit: boolean;
}

const MIN_MARGIN_MS = 30_000;
const MARGIN_FRACTION = 0.1;

/**
 * The cache key: a SHA-256 of everything that shapes the token, the secret included, so a wrong
 * secret can never be answered from a right one's entry, and no secret is kept as a key.
 */
export function cacheKey(request: TokenRequest, tokenUrl: string): string {
  const parts = [
    tokenUrl,
    request.clientId,
    request.clientSecret,
    request.authMethod,
    request.grantType,
    request.scope ?? null,
    request.audience ?? null,
    request.resource ?? null,
    request.basicCredentialsEncoding ?? null,
  ];
  return createHash('sha256').update(JSON.stringify(parts)).digest('base64url');
}

/**
 * Tokens of one function instance, reused until `expires_in` less a margin (the larger of 30 s and
 * 10%), least-recently-used first out. Identical concurrent requests share one IdP call. Failures
 * and tokens without a usable `expires_in` are never kept.
 */
export class TokenCache {
  private readonly entries = new Map<string, Entry>();
  private readonly inflight = new Map<string, Promise<IdpToken>>();

  constructor(
    private readonly maxEntries = 1000,
    private readonly now: () => number = Date.now,
  ) {}

  async get(key: string, fetchToken: () => Promise<IdpToken>): Promise<CacheResult> {
    const cached = this.fresh(key);
    if (cached) return { token: withRemainingLifetime(cached, this.now()), hit: true };

    const pending = this.inflight.get(key);
    if (pending) return { token: await pending, hit: true };

    const fetching = fetchToken();
    this.inflight.set(key, fetching);
    try {
      const token = await fetching;
      this.store(key, token);
      return { token, hit: false };
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

  private store(key: string, token: IdpToken): void {
    const lifetimeMs = expiresInSeconds(token) * 1000;
    const marginMs = Math.max(MIN_MARGIN_MS, lifetimeMs * MARGIN_FRACTION);
    if (!(lifetimeMs > marginMs)) return;
    const now = this.now();
    this.entries.set(key, { token, expiresAt: now + lifetimeMs, staleAt: now + lifetimeMs - marginMs });
    while (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
  }
}

// RFC 6749 5.1 makes expires_in a number of seconds; some IdPs send it as a numeric string.
function expiresInSeconds(token: IdpToken): number {
  const value = token.expires_in;
  const seconds = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
  return typeof seconds === 'number' && Number.isFinite(seconds) && seconds > 0 ? seconds : Number.NaN;
}

/** The cached token with `expires_in` lowered to what is left, in the type the IdP used. */
function withRemainingLifetime(entry: Entry, now: number): IdpToken {
  const left = Math.max(0, Math.floor((entry.expiresAt - now) / 1000));
  return { ...entry.token, expires_in: typeof entry.token.expires_in === 'string' ? String(left) : left };
}
