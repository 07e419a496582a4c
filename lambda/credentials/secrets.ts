import { SECRETS_MANAGER } from '../aws/endpoints';
import { awsJsonClient } from '../aws/json-client';
import { type Clock, Deadline } from '../clock';
import { CALL_LIMIT_MS, SharedReads, sourceError, withinDeadline } from './aws-sources';

/** The client secrets of stored credentials, by Secrets Manager secret id. */
export interface SecretSource {
  /** Start reading a secret now, as the function initialises, so that the first request rarely waits. */
  prefetch(secretId: string): void;
  /** The secret's value: read once per instance, then kept. */
  current(secretId: string, deadline: Deadline): Promise<string>;
  /**
   * The value after the IdP refused `used`: read again, once for all the requests refused with it,
   * so a rotation costs one refused exchange. `used` again means the secret has not changed.
   */
  afterRejection(secretId: string, used: string, deadline: Deadline): Promise<string>;
}

// What the contract allows a caller's client_secret: the same holds for one the broker sends.
const USABLE_SECRET = /^[\x20-\x7E]{1,1024}$/;

/**
 * Secrets Manager, configured the standard way (AWS_ENDPOINT_URL_SECRETS_MANAGER points it at a local
 * stand-in). Called only when a stored credential has a secret.
 */
export function secretsManagerSecrets(clock: Clock): SecretSource {
  const client = awsJsonClient(SECRETS_MANAGER, process.env, clock);
  const reads = new SharedReads(async (secretId) => {
    const { SecretString: value } = await client.call('GetSecretValue', { SecretId: secretId }, Deadline.after(clock, CALL_LIMIT_MS));
    // The SecretString is the client secret itself, as the IdP issued it: not a JSON document, no line break.
    if (typeof value !== 'string' || !USABLE_SECRET.test(value)) throw sourceError('SecretUnusable');
    return value;
  });
  return {
    prefetch: (secretId) => void reads.get(secretId).catch(() => undefined),
    current: (secretId, deadline) => withinDeadline(reads.get(secretId), deadline),
    async afterRejection(secretId, used, deadline) {
      // Another request refused with the same value may have started the new read already: share it.
      const kept = await withinDeadline(reads.get(secretId), deadline);
      return kept !== used ? kept : withinDeadline(reads.again(secretId), deadline);
    },
  };
}
