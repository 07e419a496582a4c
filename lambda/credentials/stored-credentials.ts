import type { Clock, Deadline } from '../clock';
import { type ExchangeError, upstreamFailure } from '../errors';
import type { TokenTarget } from '../policy/token-url-policy';
import { clientAssertionClaims } from '../request/client-assertion';
import type { ClientAuthentication, CredentialAsk } from '../request/token-request';
import { exchangeToken, type IdpToken, type UpstreamReport } from '../upstream/exchange';
import { authorize, type CredentialByIssuer, type CredentialRequest } from './access-policy';
import { CredentialSourceError } from './aws-sources';
import { verifiedCaller } from './callers';
import type { PublicJwk } from './jose';
import { type KeyRing, kmsKeyRing } from './kms-keys';
import type { StoredAuthentication, StoredCredential } from './registry';
import { type SecretSource, secretsManagerSecrets } from './secrets';

/** What the stored-credential part of one request did, for its log line: never a secret or an assertion. */
export interface CredentialReport {
  /** The name the caller asked for. */
  credential?: string;
  /** The caller's ARN, as API Gateway verified it. */
  caller?: string;
  /**
   * Why no secret, key or signature came: the AWS error's name, or one of ours. On the JWKS route,
   * `NAME: ERROR` for each key that could not be read, by the first credential that signs with it.
   */
  failure?: string;
}

/** The JWK Set the JWKS route publishes, and whether every key could be read for it. */
export interface PublishedKeys {
  readonly jwks: { readonly keys: PublicJwk[] };
  readonly complete: boolean;
}

/** Up to this many secrets and keys are read as the instance starts; beyond, none is until needed. */
export const PREFETCH_LIMIT = 10;

/** Sends one exchange with the client authentication given. */
type Send = (authentication: ClientAuthentication) => Promise<IdpToken>;

/** How the broker authenticates one stored credential's client, for one exchange: one strategy per method. */
type StoredClientAuth = (send: Send, tokenUrl: string, deadline: Deadline) => Promise<IdpToken>;

/**
 * The stored credentials of one function instance (STORED_CREDENTIALS): who may use which, and how
 * the broker authenticates each client. The AWS SDK clients load only for the kinds configured: a
 * secret loads Secrets Manager's, a key KMS's; with neither, nothing does. Each secret and public key
 * starts loading as the function initialises, when there are at most {@link PREFETCH_LIMIT} of them.
 */
export class StoredCredentials {
  private readonly byName: ReadonlyMap<string, { readonly credential: StoredCredential; readonly auth: StoredClientAuth }>;
  /** Each key a credential signs with, and the first credential that does: what a log line names it by. */
  private readonly keyOwners = new Map<string, string>();
  private keys?: KeyRing;

  constructor(credentials: readonly StoredCredential[], clock: Clock) {
    let secrets: SecretSource | undefined;
    const strategy = ({ authentication: auth, clientId, name }: StoredCredential): StoredClientAuth => {
      if (auth.method !== 'private_key_jwt') return secretAuth((secrets ??= secretsManagerSecrets(clock)), auth);
      if (!this.keyOwners.has(auth.keyId)) this.keyOwners.set(auth.keyId, name);
      return keyAuth((this.keys ??= kmsKeyRing(clock)), auth.keyId, clientId, clock);
    };
    this.byName = new Map(credentials.map((credential) => [credential.name, { credential, auth: strategy(credential) }]));
    // A few are read as the instance starts, so a first request rarely waits; many (a platform's file) each when first
    // needed: a start that read them all would pay a call for each before its first answer, most of them never used.
    const ids = new Set(credentials.map(({ authentication: auth }) => (auth.method === 'private_key_jwt' ? auth.keyId : auth.secretId)));
    if (ids.size > PREFETCH_LIMIT) return;
    for (const { authentication: auth } of credentials) {
      if (auth.method === 'private_key_jwt') (this.keys as KeyRing).prefetch(auth.keyId);
      else (secrets as SecretSource).prefetch(auth.secretId);
    }
  }

  /** Whether `GET /.well-known/jwks.json` is served: only when a credential signs with a KMS key. */
  get publishesKeys(): boolean {
    return this.keys !== undefined;
  }

  /** The request to send for a caller's ask, or the one refusal (see access-policy.ts); the report names both. */
  authorize(ask: CredentialAsk, event: unknown, report: CredentialReport): CredentialRequest | CredentialByIssuer {
    const caller = verifiedCaller(event);
    report.credential = ask.credential;
    report.caller = caller?.arn;
    return authorize(ask, this.byName.get(ask.credential)?.credential, caller?.principal);
  }

  /**
   * The exchange of an authorised request, with the client authentication the broker holds. A
   * Secrets Manager or KMS failure is a 502 (a 504 when the deadline ended it), its name in the report.
   */
  async exchange(
    request: CredentialRequest,
    target: TokenTarget,
    deadline: Deadline,
    upstream: UpstreamReport,
    report: CredentialReport,
  ): Promise<IdpToken> {
    const { auth } = this.byName.get(request.credential) as { auth: StoredClientAuth };
    const send: Send = (authentication) => exchangeToken({ ...request, ...authentication }, target, deadline, upstream);
    return sourced(() => auth(send, target.url.href, deadline), report);
  }

  /**
   * The JWK Set of every key a credential signs with (RFC 7517 5), each once: the keys that could be
   * read, each one that could not named in the report. Only when none could is it a 502 (a 504 when
   * the deadline ended every read).
   */
  async jwks(deadline: Deadline, report: CredentialReport): Promise<PublishedKeys> {
    // publicKey fails with a CredentialSourceError only (withinDeadline wraps whatever the read threw).
    const reads = await Promise.all(
      [...this.keyOwners].map(([keyId, owner]) =>
        (this.keys as KeyRing).publicKey(keyId, deadline).then(
          (key) => ({ key }),
          (error: CredentialSourceError) => ({ failure: `${owner}: ${error.errorName}`, timedOut: error.timedOut }),
        ),
      ),
    );
    const keys = reads.flatMap((read) => ('key' in read ? [read.key] : []));
    const failed = reads.flatMap((read) => ('failure' in read ? [read] : []));
    if (failed.length > 0) report.failure = failed.map(({ failure }) => failure).join(', ');
    if (keys.length === 0) throw upstreamFailure(failed.every(({ timedOut }) => timedOut) ? 'upstream_timeout' : 'upstream_error');
    // Two credentials may share a key by two names (its alias, its ARN): one JWK for each key.
    const unique = keys.filter((key, index) => keys.findIndex((other) => other.kid === key.kid) === index);
    return { jwks: { keys: unique }, complete: failed.length === 0 };
  }
}

/**
 * `client_secret_basic` or `_post` with the secret from Secrets Manager. After a `401` the secret is
 * read again, and a new value is tried at once: a rotation costs the IdP one refused exchange and
 * the caller nothing.
 */
function secretAuth(secrets: SecretSource, auth: Exclude<StoredAuthentication, { method: 'private_key_jwt' }>): StoredClientAuth {
  return async (send, _tokenUrl, deadline) => {
    const used = await secrets.current(auth.secretId, deadline);
    try {
      return await send({ authMethod: auth.method, clientSecret: used.value });
    } catch (error) {
      // An exchange fails with an ExchangeError only; only the client's rejection says the secret may have moved.
      if ((error as ExchangeError).code !== 'unauthorized') throw error;
      const fresh = await secrets.afterRejection(auth.secretId, used, deadline);
      if (fresh.value === used.value) throw error;
      return await send({ authMethod: auth.method, clientSecret: fresh.value });
    }
  };
}

/** `private_key_jwt` (RFC 7523 2.2) with a fresh assertion signed in KMS for each exchange, never resent. */
function keyAuth(keys: KeyRing, keyId: string, clientId: string, clock: Clock): StoredClientAuth {
  return async (send, tokenUrl, deadline) => {
    const clientAssertion = await keys.signJwt(keyId, clientAssertionClaims(clientId, tokenUrl, clock.epoch()), deadline);
    return send({ authMethod: 'private_key_jwt', clientAssertion });
  };
}

/** Run `work`, turning a Secrets Manager or KMS failure into the caller's 502 (504 when the deadline ended it), named in the report. */
async function sourced<T>(work: () => Promise<T>, report: CredentialReport): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (!(error instanceof CredentialSourceError)) throw error;
    report.failure = error.errorName;
    throw upstreamFailure(error.timedOut ? 'upstream_timeout' : 'upstream_error');
  }
}
