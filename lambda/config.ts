import { type AllowlistEntry, parseAllowlist } from './token-url-policy';

export const LOG_LEVELS = ['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR', 'CRITICAL', 'SILENT'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** `memory`: one function instance reuses its tokens; `shared`: memory in front of a DynamoDB table every instance shares. */
export const TOKEN_CACHE_MODES = ['off', 'memory', 'shared'] as const;
export type TokenCacheMode = (typeof TOKEN_CACHE_MODES)[number];

/** The function's configuration, read once from its environment. */
export interface Config {
  /** Empty: any public https URL. */
  readonly allowlist: readonly AllowlistEntry[];
  /** Whole token request, connect to last byte. */
  readonly upstreamTimeoutMs: number;
  readonly tokenCache: TokenCacheMode;
  /** With `shared`: the DynamoDB table's name. */
  readonly tokenCacheTable?: string;
  readonly logLevel: LogLevel;
}

// API Gateway gives an integration at most 30 s; a longer upstream wait could never be answered.
const MAX_UPSTREAM_TIMEOUT_MS = 29_000;

/**
 * Build the configuration from an environment. Pure: the handler calls it once at module scope, and
 * an invalid value throws there, failing the function's start with the variable's name.
 */
export function loadConfig(env: Readonly<Record<string, string | undefined>>): Config {
  return {
    allowlist: parseAllowlist(env.TOKEN_URL_ALLOWLIST),
    upstreamTimeoutMs: getTimeoutFromEnv(env.UPSTREAM_TIMEOUT_MS),
    ...getTokenCacheFromEnv(env.TOKEN_CACHE, env.TOKEN_CACHE_TABLE),
    logLevel: getLogLevelFromEnv(env.LOG_LEVEL),
  };
}

function getTimeoutFromEnv(value: string | undefined): number {
  if (value === undefined || value.trim() === '') return 5000;
  const ms = Number(value.trim());
  if (!/^\d+$/.test(value.trim()) || ms < 1 || ms > MAX_UPSTREAM_TIMEOUT_MS) {
    throw new Error(`Environment variable UPSTREAM_TIMEOUT_MS must be a whole number of milliseconds from 1 to ${MAX_UPSTREAM_TIMEOUT_MS}`);
  }
  return ms;
}

// DynamoDB's rule for table names.
const TABLE_NAME = /^[A-Za-z0-9_.-]{3,255}$/;

function getTokenCacheFromEnv(mode: string | undefined, table: string | undefined): Pick<Config, 'tokenCache' | 'tokenCacheTable'> {
  const normalized = (mode ?? '').trim().toLowerCase();
  // `on` predates the shared tier and keeps its meaning.
  const tokenCache = normalized === '' ? 'off' : normalized === 'on' ? 'memory' : TOKEN_CACHE_MODES.find((known) => known === normalized);
  if (!tokenCache) throw new Error('Environment variable TOKEN_CACHE must be "off", "memory" (or its alias "on") or "shared"');
  if (tokenCache !== 'shared') return { tokenCache };
  const tokenCacheTable = (table ?? '').trim();
  if (tokenCacheTable === '') throw new Error('Environment variable TOKEN_CACHE_TABLE is required when TOKEN_CACHE is "shared"');
  if (!TABLE_NAME.test(tokenCacheTable)) {
    throw new Error('Environment variable TOKEN_CACHE_TABLE must be a DynamoDB table name: 3 to 255 letters, digits, _ . or -');
  }
  return { tokenCache, tokenCacheTable };
}

function getLogLevelFromEnv(value: string | undefined): LogLevel {
  const normalized = (value ?? '').trim().toUpperCase();
  if (normalized === '') return 'INFO';
  const level = LOG_LEVELS.find((candidate) => candidate === normalized);
  if (!level) throw new Error(`Environment variable LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`);
  return level;
}
