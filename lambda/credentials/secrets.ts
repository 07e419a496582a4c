import { SECRETS_MANAGER } from '../aws/endpoints';
import { awsJsonClient } from '../aws/json-client';
import { type Clock, Deadline } from '../clock';
import { CALL_LIMIT_MS, SharedReads, sourceError, withinDeadline } from './aws-sources';

/** A secret's value, and the read it came from. */
export interface ReadSecret {
  readonly value: string;
  readonly read: Promise<string>;
}

/** The client secrets of stored credentials, by Secrets Manager secret id. */
export interface SecretSource {
  /** Start reading a secret now, as the function initialises, so that the first request rarely waits. */
  prefetch(secretId: string): void;
  /** The secret's value: read once per instance, then kept. */
  current(secretId: string, deadline: Deadline): Promise<ReadSecret>;
  /**
   * The value after the IdP refused `used`: of a read started since `used` was taken, which every
   * request refused in the same burst shares, or of a new one. So a rotation costs one refused
   * exchange, and a burst of refusals one read. The same value again means the secret has not changed.
   */
  afterRejection(secretId: string, used: ReadSecret, deadline: Deadline): Promise<ReadSecret>;
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
    async current(secretId, deadline) {
      const read = reads.get(secretId);
      return { value: await withinDeadline(read, deadline), read };
    },
    async afterRejection(secretId, used, deadline) {
      // The kept read is newer than `used`'s when another refusal of this burst started it: share it.
      const kept = reads.get(secretId);
      const read = kept !== used.read ? kept : reads.again(secretId);
      return { value: await withinDeadline(read, deadline), read };
    },
  };
}
