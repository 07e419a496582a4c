import { ExchangeError, upstreamFailure } from '../errors';
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
  /** Why no secret, key or signature came: the AWS error's name, or one of ours. */
  failure?: string;
}

/** Sends one exchange with the client authentication given. */
type Send = (authentication: ClientAuthentication) => Promise<IdpToken>;

/** How the broker authenticates one stored credential's client, for one exchange: one strategy per method. */
type StoredClientAuth = (send: Send, tokenUrl: string, deadline: number) => Promise<IdpToken>;

/**
 * The stored credentials of one function instance (STORED_CREDENTIALS): who may use which, and how
 * the broker authenticates each client. The AWS SDK clients load only for the kinds configured: a
 * secret loads Secrets Manager's, a key KMS's; with neither, nothing does.
 */
export class StoredCredentials {
  private readonly byName: ReadonlyMap<string, { readonly credential: StoredCredential; readonly auth: StoredClientAuth }>;
  private readonly keyIds: readonly string[];
  private readonly keys?: KeyRing;

  constructor(credentials: readonly StoredCredential[], clock: () => number) {
    const stored = credentials.map((credential) => credential.authentication);
    const secretIds = unique(stored.flatMap((auth) => (auth.method === 'private_key_jwt' ? [] : [auth.secretId])));
    this.keyIds = unique(stored.flatMap((auth) => (auth.method === 'private_key_jwt' ? [auth.keyId] : [])));
    const secrets = secretIds.length > 0 ? secretsManagerSecrets(secretIds) : undefined;
    const keys = this.keyIds.length > 0 ? kmsKeyRing(this.keyIds) : undefined;
    this.keys = keys;
    const strategy = (credential: StoredCredential): StoredClientAuth => {
      const auth = credential.authentication;
      return auth.method === 'private_key_jwt'
        ? keyAuth(keys as KeyRing, auth.keyId, credential.clientId, clock)
        : secretAuth(secrets as SecretSource, auth);
    };
    this.byName = new Map(credentials.map((credential) => [credential.name, { credential, auth: strategy(credential) }]));
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
   * Secrets Manager or KMS failure is a 502 (a 504 once the deadline passed), its name in the report.
   */
  async exchange(
    request: CredentialRequest,
    target: TokenTarget,
    timeoutMs: number,
    upstream: UpstreamReport,
    report: CredentialReport,
  ): Promise<IdpToken> {
    const deadline = performance.now() + timeoutMs;
    const { auth } = this.byName.get(request.credential) as { auth: StoredClientAuth };
    const send: Send = (authentication) => exchangeToken({ ...request, ...authentication }, target, left(deadline), upstream);
    return sourced(() => auth(send, target.url.href, deadline), deadline, report);
  }

  /** The JWK Set of every key a credential signs with (RFC 7517 5), each once. */
  async jwks(deadline: number, report: CredentialReport): Promise<{ keys: PublicJwk[] }> {
    const keys = await sourced(
      () => Promise.all(this.keyIds.map((keyId) => (this.keys as KeyRing).publicKey(keyId, deadline))),
      deadline,
      report,
    );
    return { keys: keys.filter((key, index) => keys.findIndex((other) => other.kid === key.kid) === index) };
  }
}

/**
 * `client_secret_basic` or `_post` with the secret from Secrets Manager. After a `401` the secret is
 * read again, and a new value is tried at once: a rotation costs the IdP one refused exchange and
 * the caller nothing.
 */
function secretAuth(secrets: SecretSource, auth: Exclude<StoredAuthentication, { method: 'private_key_jwt' }>): StoredClientAuth {
  const withSecret = (clientSecret: string): ClientAuthentication =>
    auth.method === 'client_secret_basic'
      ? { authMethod: auth.method, clientSecret, basicCredentialsEncoding: 'form' }
      : { authMethod: auth.method, clientSecret };
  return async (send, _tokenUrl, deadline) => {
    const used = await secrets.current(auth.secretId, deadline);
    try {
      return await send(withSecret(used));
    } catch (error) {
      if (!(error instanceof ExchangeError) || error.code !== 'unauthorized') throw error;
      const fresh = await secrets.afterRejection(auth.secretId, used, deadline);
      if (fresh === used) throw error;
      return await send(withSecret(fresh));
    }
  };
}

/** `private_key_jwt` (RFC 7523 2.2) with a fresh assertion signed in KMS for each exchange, never resent. */
function keyAuth(keys: KeyRing, keyId: string, clientId: string, clock: () => number): StoredClientAuth {
  return async (send, tokenUrl, deadline) => {
    const clientAssertion = await keys.signJwt(keyId, clientAssertionClaims(clientId, tokenUrl, clock()), deadline);
    return send({ authMethod: 'private_key_jwt', clientAssertion });
  };
}

/** Run `work`, turning a Secrets Manager or KMS failure into the caller's 502 or 504 and naming it in the report. */
async function sourced<T>(work: () => Promise<T>, deadline: number, report: CredentialReport): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (!(error instanceof CredentialSourceError)) throw error;
    report.failure = error.errorName;
    throw upstreamFailure(error.timedOut || performance.now() >= deadline ? 'upstream_timeout' : 'upstream_error');
  }
}

/** What is left of a `performance.now()` deadline, in whole milliseconds, at least 1 (the exchange's own timer then ends it). */
function left(deadline: number): number {
  return Math.max(1, Math.floor(deadline - performance.now()));
}

function unique(values: readonly string[]): string[] {
  return [...new Set(values)];
}
