import { type ExchangeError } from '../errors';
import { type AllowlistEntry, checkTokenUrl } from '../policy/token-url-policy';
import { CREDENTIAL_NAME, RESOURCE_URI, SCOPE_TOKEN } from '../request/token-request';
import { isRecord } from '../type-guards';
import { type CallerPattern, callerPattern } from './callers';

/** How the broker authenticates a stored credential's client: a secret it reads, or a key it signs with in KMS. */
export type StoredAuthentication =
  | { readonly method: 'client_secret_basic' | 'client_secret_post'; readonly secretId: string }
  | { readonly method: 'private_key_jwt'; readonly keyId: string };

export type StoredMethod = StoredAuthentication['method'];

/** One entry of STORED_CREDENTIALS: an OAuth client the broker holds, and who may get its tokens. */
export interface StoredCredential {
  readonly name: string;
  readonly clientId: string;
  /** Where its tokens come from: a token URL, or an issuer whose metadata names one. */
  readonly idp: { readonly tokenUrl: string } | { readonly issuer: string };
  readonly authentication: StoredAuthentication;
  /** The scope tokens a caller may ask for; absent: any. */
  readonly scopes?: readonly string[];
  /** The only audience a caller may ask for, sent when the caller names none; absent: any. */
  readonly audience?: string;
  /** The only resource a caller may ask for, sent when the caller names none; absent: any. */
  readonly resource?: string;
  /** IAM principal ARN patterns, at least one. */
  readonly callers: readonly CallerPattern[];
}

const ENTRY_FIELDS = ['name', 'clientId', 'tokenUrl', 'issuer', 'method', 'secretId', 'keyId', 'scopes', 'audience', 'resource', 'callers'];
const METHODS: readonly StoredMethod[] = ['client_secret_basic', 'client_secret_post', 'private_key_jwt'];
const PRINTABLE_ASCII = /^[\x20-\x7E]+$/;
// A Secrets Manager secret's ARN or name, or a KMS key's id, ARN, alias name or alias ARN.
const AWS_ID = /^[\x21-\x7E]{1,2048}$/;

/**
 * Parse STORED_CREDENTIALS (or its file's text): a JSON array of entries (the contract's Stored
 * credentials). Each token URL or issuer is held to the token URL policy's rules that need no lookup,
 * with the function's allowlist. Throws a message naming the `source` and the entry; unset or empty
 * is no credential.
 */
export function parseStoredCredentials(
  value: string | undefined,
  allowlist: readonly AllowlistEntry[],
  source = 'Environment variable STORED_CREDENTIALS',
): StoredCredential[] {
  if (value === undefined || value.trim() === '') return [];
  let entries: unknown;
  try {
    entries = JSON.parse(value);
  } catch {
    // Reported below, as any other value that is not an array.
  }
  if (!Array.isArray(entries)) throw new Error(`${source} must be a JSON array of credential entries`);
  const names = new Set<string>();
  return entries.map((entry: unknown, index) => {
    const label = isRecord(entry) && typeof entry.name === 'string' ? `"${entry.name}"` : `at index ${index}`;
    try {
      const credential = readEntry(entry, allowlist);
      if (names.has(credential.name)) throw new Error('has a name another entry has');
      names.add(credential.name);
      return credential;
    } catch (error) {
      throw new Error(`${source}: the entry ${label} ${(error as Error).message}`);
    }
  });
}

function readEntry(entry: unknown, allowlist: readonly AllowlistEntry[]): StoredCredential {
  if (!isRecord(entry)) throw new Error('must be an object');
  const unknown = Object.keys(entry).filter((key) => !ENTRY_FIELDS.includes(key));
  // A misspelt `scope` or `caller` would otherwise leave a credential wider open than written.
  if (unknown.length > 0) throw new Error(`has fields no entry has: ${unknown.join(', ')}`);
  const text = (field: string, pattern: RegExp, rule: string): string | undefined => {
    const raw = entry[field];
    if (raw === undefined) return undefined;
    if (typeof raw !== 'string' || !pattern.test(raw)) throw new Error(`must have ${field} ${rule}`);
    return raw;
  };
  const name = text('name', CREDENTIAL_NAME, 'of 1 to 64 letters, digits, . _ or -, starting with a letter or digit');
  if (name === undefined) throw new Error('must have a name');
  const clientId = text('clientId', PRINTABLE_ASCII, 'of printable ASCII');
  if (clientId === undefined || clientId.length > 256) throw new Error('must have a clientId of 1 to 256 printable ASCII characters');
  const audience = text('audience', PRINTABLE_ASCII, 'of printable ASCII');
  if (audience !== undefined && audience.length > 2048) throw new Error('must have an audience of at most 2048 characters');
  const resource = text('resource', RESOURCE_URI, 'as an absolute URI without a fragment (RFC 8707 2)');
  return {
    name,
    clientId,
    idp: readIdp(entry, allowlist),
    authentication: readAuthentication(entry, text),
    ...readScopes(entry.scopes),
    ...(audience === undefined ? {} : { audience }),
    ...(resource === undefined ? {} : { resource }),
    callers: readCallers(entry.callers),
  };
}

/** Exactly one of `tokenUrl` and `issuer`, accepted by the policy's rules that need no lookup. */
function readIdp(entry: Record<string, unknown>, allowlist: readonly AllowlistEntry[]): StoredCredential['idp'] {
  const { tokenUrl, issuer } = entry;
  if ((tokenUrl === undefined) === (issuer === undefined)) throw new Error('must have exactly one of tokenUrl and issuer');
  const url = tokenUrl ?? issuer;
  const field = tokenUrl === undefined ? 'issuer' : 'tokenUrl';
  if (typeof url !== 'string') throw new Error(`must have ${field} as a string`);
  try {
    checkTokenUrl(url, allowlist);
  } catch (error) {
    // The policy names the caller's field; here the entry's is meant.
    const why = (error as ExchangeError).description.replace(/^access_token_url /, '');
    throw new Error(`has ${field === 'issuer' ? 'an issuer' : 'a tokenUrl'} the token URL policy refuses: it ${why}`);
  }
  if (field === 'issuer' && url.includes('?')) throw new Error('has an issuer with a query (RFC 8414 2 gives an issuer none)');
  return field === 'issuer' ? { issuer: url } : { tokenUrl: url };
}

function readAuthentication(
  entry: Record<string, unknown>,
  text: (field: string, pattern: RegExp, rule: string) => string | undefined,
): StoredAuthentication {
  const method = entry.method;
  if (!METHODS.includes(method as StoredMethod)) throw new Error(`must have a method: one of ${METHODS.join(', ')}`);
  const secretId = text('secretId', AWS_ID, 'as a Secrets Manager secret ARN or name');
  const keyId = text('keyId', AWS_ID, 'as a KMS key id, ARN or alias');
  if (method === 'private_key_jwt') {
    if (keyId === undefined || secretId !== undefined) throw new Error('must have a keyId and no secretId with private_key_jwt');
    return { method, keyId };
  }
  if (secretId === undefined || keyId !== undefined) throw new Error(`must have a secretId and no keyId with ${String(method)}`);
  return { method: method as 'client_secret_basic' | 'client_secret_post', secretId };
}

function readScopes(scopes: unknown): { scopes?: readonly string[] } {
  if (scopes === undefined) return {};
  if (!Array.isArray(scopes) || scopes.length === 0 || !scopes.every((scope) => typeof scope === 'string' && SCOPE_TOKEN.test(scope))) {
    throw new Error('must have scopes as a non-empty array of scope tokens (RFC 6749 3.3)');
  }
  return { scopes: scopes as string[] };
}

function readCallers(callers: unknown): CallerPattern[] {
  if (!Array.isArray(callers) || callers.length === 0 || !callers.every((caller) => typeof caller === 'string')) {
    throw new Error('must have callers: a non-empty array of IAM principal ARN patterns');
  }
  return (callers as string[]).map(callerPattern);
}
