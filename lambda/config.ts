import { type AllowlistEntry, parseAllowlist } from './token-url-policy';

export const LOG_LEVELS = ['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR', 'CRITICAL', 'SILENT'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** The function's configuration, read once from its environment. */
export interface Config {
  /** Empty: any public https URL. */
  readonly allowlist: readonly AllowlistEntry[];
  /** Whole token request, connect to last byte. */
  readonly upstreamTimeoutMs: number;
  readonly tokenCache: boolean;
  readonly logLevel: LogLevel;
}

/** API Gateway gives an integration at most 30 s; a longer upstream wait could never be answered. */
export const MAX_UPSTREAM_TIMEOUT_MS = 29_000;

/** The values of variables left unset (the stack deploys the same defaults). */
export const CONFIG_DEFAULTS = { upstreamTimeoutMs: 5000, tokenCache: false, logLevel: 'INFO' } as const satisfies Partial<Config>;

/** Node's own debug logs of these modules print request options, the Authorization header with them. */
const SECRET_PRINTING_DEBUG_MODULES = ['http', 'https', 'net', 'tls', 'http2'] as const;

/**
 * Build the configuration from an environment. Pure: the handler calls it once at module scope, and
 * an invalid value throws there, failing the function's start with the variable's name.
 */
export function loadConfig(env: Readonly<Record<string, string | undefined>>): Config {
  assertNoSecretPrintingNodeDebug(env.NODE_DEBUG);
  return {
    allowlist: parseAllowlist(env.TOKEN_URL_ALLOWLIST),
    upstreamTimeoutMs: getTimeoutFromEnv(env.UPSTREAM_TIMEOUT_MS),
    tokenCache: getSwitchFromEnv('TOKEN_CACHE', env.TOKEN_CACHE),
    logLevel: getLogLevelFromEnv(env.LOG_LEVEL),
  };
}

function getTimeoutFromEnv(value: string | undefined): number {
  if (value === undefined || value.trim() === '') return CONFIG_DEFAULTS.upstreamTimeoutMs;
  const ms = Number(value.trim());
  if (!/^\d+$/.test(value.trim()) || ms < 1 || ms > MAX_UPSTREAM_TIMEOUT_MS) {
    throw new Error(`Environment variable UPSTREAM_TIMEOUT_MS must be a whole number of milliseconds from 1 to ${MAX_UPSTREAM_TIMEOUT_MS}`);
  }
  return ms;
}

function getSwitchFromEnv(name: string, value: string | undefined): boolean {
  const normalized = (value ?? '').trim().toLowerCase();
  if (normalized === '') return CONFIG_DEFAULTS.tokenCache;
  if (normalized === 'off') return false;
  if (normalized === 'on') return true;
  throw new Error(`Environment variable ${name} must be "on" or "off"`);
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
  if (value === undefined || value.trim() === '') return;
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
