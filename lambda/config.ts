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
    tokenCache: getSwitchFromEnv('TOKEN_CACHE', env.TOKEN_CACHE),
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

function getSwitchFromEnv(name: string, value: string | undefined): boolean {
  const normalized = (value ?? '').trim().toLowerCase();
  if (normalized === '' || normalized === 'off') return false;
  if (normalized === 'on') return true;
  throw new Error(`Environment variable ${name} must be "on" or "off"`);
}

function getLogLevelFromEnv(value: string | undefined): LogLevel {
  const normalized = (value ?? '').trim().toUpperCase();
  if (normalized === '') return 'INFO';
  const level = LOG_LEVELS.find((candidate) => candidate === normalized);
  if (!level) throw new Error(`Environment variable LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`);
  return level;
}
