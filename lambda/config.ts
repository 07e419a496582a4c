import { readFileSync } from 'node:fs';
import { type AwsJsonService, DYNAMODB, KMS, SECRETS_MANAGER } from './aws/endpoints';
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
  /** OAuth clients the broker holds, which IAM callers get tokens of by name (STORED_CREDENTIALS, or the file STORED_CREDENTIALS_FILE names). */
  readonly storedCredentials: readonly StoredCredential[];
}

/** API Gateway gives an integration at most 30 s; a longer upstream wait could never be answered. */
export const MAX_UPSTREAM_TIMEOUT_MS = 29_000;

/** The values of variables left unset (the stack deploys the same defaults). */
export const CONFIG_DEFAULTS = { upstreamTimeoutMs: 5000, tokenCache: 'off', logLevel: 'INFO' } as const;

/** Node's own debug logs of these modules print request options, the Authorization header with them. */
const SECRET_PRINTING_DEBUG_MODULES = ['http', 'https', 'net', 'tls', 'http2'] as const;

/** Reads a file's bytes: the disk's by default; synth passes one that finds the file the stack packages. */
export type ReadFile = (path: string) => Uint8Array;

/**
 * Build the configuration from an environment. Pure but for reading the file STORED_CREDENTIALS_FILE
 * names, through `readFile`: the handler calls it once at module scope, and an invalid value throws
 * there, failing the function's start with the variable's name. Synth calls it too, so it checks only
 * what the stack sets (see {@link loadConfigAtStart} for what Lambda sets).
 */
export function loadConfig(env: Readonly<Record<string, string | undefined>>, readFile: ReadFile = readFileSync): Config {
  assertNoSecretPrintingNodeDebug(env.NODE_DEBUG);
  assertCertificatesChecked(env.NODE_TLS_REJECT_UNAUTHORIZED);
  const allowlist = parseAllowlist(env.TOKEN_URL_ALLOWLIST);
  const config: Config = {
    allowlist,
    upstreamTimeoutMs: getTimeoutFromEnv(env.UPSTREAM_TIMEOUT_MS),
    tokenCache: getTokenCacheFromEnv(env.TOKEN_CACHE, env.TOKEN_CACHE_TABLE, env.TOKEN_CACHE_PEPPER_SECRET),
    logLevel: getLogLevelFromEnv(env.LOG_LEVEL),
    storedCredentials: getStoredCredentialsFromEnv(env.STORED_CREDENTIALS, env.STORED_CREDENTIALS_FILE, allowlist, readFile),
  };
  assertEndpointsUsable(awsServicesOf(config), env);
  return config;
}

/**
 * The configuration the deployed function starts with: {@link loadConfig}'s, and what Lambda sets
 * that the function's AWS calls need, when it makes any: the role's credentials, which its AWS client
 * reads from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY alone (no profile, no container endpoint),
 * and the region.
 */
export function loadConfigAtStart(env: Readonly<Record<string, string | undefined>>, readFile: ReadFile = readFileSync): Config {
  const config = loadConfig(env, readFile);
  if (awsServicesOf(config).length === 0) return config;
  const needs = 'when TOKEN_CACHE is "shared" or there are stored credentials';
  if (!env.AWS_ACCESS_KEY_ID || !env.AWS_SECRET_ACCESS_KEY) {
    throw new Error(
      `Environment variables AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are required ${needs}: the function's AWS client reads the role's credentials from them alone, where Lambda puts them`,
    );
  }
  if (!/^[a-z0-9]+(-[a-z0-9]+)+$/.test(env.AWS_REGION ?? ''))
    throw new Error(`Environment variable AWS_REGION must be a region name ${needs}`);
  return config;
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

/**
 * Node reads NODE_TLS_REJECT_UNAUTHORIZED at each TLS connection: `0` stops it checking certificates,
 * for every IdP and every AWS call, and nothing here sets a check of its own over it.
 */
function assertCertificatesChecked(value: string | undefined): void {
  if (value === '0') {
    throw new Error(
      'Environment variable NODE_TLS_REJECT_UNAUTHORIZED must not be 0: it turns certificate checks off for every IdP and AWS call',
    );
  }
}

/** STORED_CREDENTIALS, or the file STORED_CREDENTIALS_FILE names (UTF-8 JSON, what the stack sets); both is an error. */
function getStoredCredentialsFromEnv(
  value: string | undefined,
  path: string | undefined,
  allowlist: readonly AllowlistEntry[],
  readFile: ReadFile,
): StoredCredential[] {
  if (path === undefined || path.trim() === '') return parseStoredCredentials(value, allowlist);
  if (value !== undefined && value.trim() !== '') {
    throw new Error('Environment variables STORED_CREDENTIALS and STORED_CREDENTIALS_FILE must not both be set: set one');
  }
  const source = `Environment variable STORED_CREDENTIALS_FILE (the file ${path.trim()})`;
  let bytes: Uint8Array;
  try {
    bytes = readFile(path.trim());
  } catch (error) {
    const code = String((error as { code?: unknown }).code);
    throw new Error(`${source} cannot be read: ${code === 'ENOENT' ? 'there is no such file' : code}`);
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new Error(`${source} must be UTF-8 text`);
  }
  if (text.trim() === '') throw new Error(`${source} must be a JSON array of credential entries, and is empty`);
  return parseStoredCredentials(text, allowlist, source);
}

/** The AWS services a configuration calls: the table and the pepper's secret; the stored credentials' secrets and keys. */
function awsServicesOf(config: Config): AwsJsonService[] {
  const services = new Set<AwsJsonService>();
  if (config.tokenCache.mode === 'shared') services.add(DYNAMODB).add(SECRETS_MANAGER);
  for (const { authentication } of config.storedCredentials)
    services.add(authentication.method === 'private_key_jwt' ? KMS : SECRETS_MANAGER);
  return [...services];
}

/**
 * The function's AWS client makes each service's endpoint from the SDK's variables, but names no
 * dual-stack host of its own (lambda/aws/endpoints.ts): with AWS_USE_DUALSTACK_ENDPOINT=true every
 * service the function calls needs its endpoint named, or every call would fail.
 */
function assertEndpointsUsable(services: readonly AwsJsonService[], env: Readonly<Record<string, string | undefined>>): void {
  if (env.AWS_USE_DUALSTACK_ENDPOINT !== 'true') return;
  const named = (service: AwsJsonService) =>
    env.AWS_IGNORE_CONFIGURED_ENDPOINT_URLS !== 'true' &&
    (env[`AWS_ENDPOINT_URL_${service.envName}`] !== undefined || env.AWS_ENDPOINT_URL !== undefined);
  const unnamed = services.filter((service) => !named(service)).map((service) => `AWS_ENDPOINT_URL_${service.envName}`);
  if (unnamed.length > 0) {
    throw new Error(
      `Environment variable AWS_USE_DUALSTACK_ENDPOINT=true is not supported by the function's AWS client: name the dual-stack endpoint in ${unnamed.join(', ')} (or AWS_ENDPOINT_URL), or leave it unset`,
    );
  }
}
