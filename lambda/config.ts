import { parseStoredCredentials, type StoredCredential } from './credentials/registry';
import { type AllowlistEntry, parseAllowlist } from './policy/token-url-policy';

export const LOG_LEVELS = ['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR', 'CRITICAL', 'SILENT'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** `memory`: one function instance reuses its tokens; `shared`: memory in front of a DynamoDB table every instance shares. */
export const TOKEN_CACHE_MODES = ['off', 'memory', 'shared'] as const;
export type TokenCacheMode = (typeof TOKEN_CACHE_MODES)[number];

/** TOKEN_CACHE and what its mode needs: `shared` a table and the Secrets Manager secret holding the pepper. */
export type TokenCacheSetting =
  { readonly mode: 'off' | 'memory' } | { readonly mode: 'shared'; readonly table: string; readonly pepperSecret: string };

/** The function's configuration, read once from its environment. */
export interface Config {
  /** Empty: any public https URL. */
  readonly allowlist: readonly AllowlistEntry[];
  /** Whole token request, connect to last byte. */
  readonly upstreamTimeoutMs: number;
  readonly tokenCache: TokenCacheSetting;
  readonly logLevel: LogLevel;
  /** OAuth clients the broker holds, which IAM callers get tokens of by name (STORED_CREDENTIALS). */
  readonly storedCredentials: readonly StoredCredential[];
}

/** API Gateway gives an integration at most 30 s; a longer upstream wait could never be answered. */
export const MAX_UPSTREAM_TIMEOUT_MS = 29_000;

/** The values of variables left unset (the stack deploys the same defaults). */
export const CONFIG_DEFAULTS = { upstreamTimeoutMs: 5000, tokenCache: 'off', logLevel: 'INFO' } as const;

/** Node's own debug logs of these modules print request options, the Authorization header with them. */
const SECRET_PRINTING_DEBUG_MODULES = ['http', 'https', 'net', 'tls', 'http2'] as const;

/**
 * Build the configuration from an environment. Pure: the handler calls it once at module scope, and
 * an invalid value throws there, failing the function's start with the variable's name.
 */
export function loadConfig(env: Readonly<Record<string, string | undefined>>): Config {
  assertNoSecretPrintingNodeDebug(env.NODE_DEBUG);
  const allowlist = parseAllowlist(env.TOKEN_URL_ALLOWLIST);
  return {
    allowlist,
    upstreamTimeoutMs: getTimeoutFromEnv(env.UPSTREAM_TIMEOUT_MS),
    tokenCache: getTokenCacheFromEnv(env.TOKEN_CACHE, env.TOKEN_CACHE_TABLE, env.TOKEN_CACHE_PEPPER_SECRET),
    logLevel: getLogLevelFromEnv(env.LOG_LEVEL),
    storedCredentials: parseStoredCredentials(env.STORED_CREDENTIALS, allowlist),
  };
}

function getTimeoutFromEnv(value: string | undefined): number {
  const text = (value ?? '').trim();
  if (text === '') return CONFIG_DEFAULTS.upstreamTimeoutMs;
  const ms = Number(text);
  if (!/^\d+$/.test(text) || ms < 1 || ms > MAX_UPSTREAM_TIMEOUT_MS) {
    throw new Error(`Environment variable UPSTREAM_TIMEOUT_MS must be a whole number of milliseconds from 1 to ${MAX_UPSTREAM_TIMEOUT_MS}`);
  }
  return ms;
}

// DynamoDB's rule for table names.
const TABLE_NAME = /^[A-Za-z0-9_.-]{3,255}$/;

// A Secrets Manager secret's ARN or name.
const SECRET_ID = /^[\x21-\x7E]{1,2048}$/;

function getTokenCacheFromEnv(mode: string | undefined, table: string | undefined, pepperSecret: string | undefined): TokenCacheSetting {
  const normalized = (mode ?? '').trim().toLowerCase();
  // `on` predates the shared tier and keeps its meaning.
  const tokenCache =
    normalized === ''
      ? CONFIG_DEFAULTS.tokenCache
      : normalized === 'on'
        ? 'memory'
        : TOKEN_CACHE_MODES.find((known) => known === normalized);
  if (!tokenCache) throw new Error('Environment variable TOKEN_CACHE must be "off", "memory" (or its alias "on") or "shared"');
  if (tokenCache !== 'shared') return { mode: tokenCache };
  const tableName = (table ?? '').trim();
  if (tableName === '') throw new Error('Environment variable TOKEN_CACHE_TABLE is required when TOKEN_CACHE is "shared"');
  if (!TABLE_NAME.test(tableName)) {
    throw new Error('Environment variable TOKEN_CACHE_TABLE must be a DynamoDB table name: 3 to 255 letters, digits, _ . or -');
  }
  const secret = (pepperSecret ?? '').trim();
  if (secret === '') throw new Error('Environment variable TOKEN_CACHE_PEPPER_SECRET is required when TOKEN_CACHE is "shared"');
  if (!SECRET_ID.test(secret))
    throw new Error('Environment variable TOKEN_CACHE_PEPPER_SECRET must be a Secrets Manager secret ARN or name');
  return { mode: tokenCache, table: tableName, pepperSecret: secret };
}

function getLogLevelFromEnv(value: string | undefined): LogLevel {
  const normalized = (value ?? '').trim().toUpperCase();
  if (normalized === '') return CONFIG_DEFAULTS.logLevel;
  const level = LOG_LEVELS.find((candidate) => candidate === normalized);
  if (!level) throw new Error(`Environment variable LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`);
  return level;
}

/**
 * NODE_DEBUG is read by Node itself when the process starts, so the function cannot turn it off;
 * it can only refuse to serve. The names are matched as Node matches them: comma-separated,
 * case-insensitive, `*` a wildcard (so `*` and `ht*` count too).
 */
function assertNoSecretPrintingNodeDebug(value: string | undefined): void {
  if (value === undefined) return;
  const pattern = value
    .replace(/[|\\{}()[\]^$+?.]/g, '\\$&')
    .replaceAll('*', '.*')
    .replaceAll(',', '$|^');
  const enabled = new RegExp(`^${pattern}$`, 'i');
  const named = SECRET_PRINTING_DEBUG_MODULES.filter((module) => enabled.test(module));
  if (named.length > 0) {
    throw new Error(
      `Environment variable NODE_DEBUG must not enable ${named.join(', ')}: Node's debug output of those modules prints request headers, client secrets among them`,
    );
  }
}
