import { callErrorName } from '../aws/json-client';
import type { Deadline } from '../clock';

/**
 * A Secrets Manager or KMS call, or what it gave, that left the broker without a secret, a key or a
 * signature. Its name (the AWS error's, or one of ours) goes into the log line; the caller gets a 502,
 * or a 504 when the request's deadline passed first.
 */
export class CredentialSourceError extends Error {
  constructor(
    readonly errorName: string,
    readonly timedOut = false,
  ) {
    super(errorName);
  }
}

export const sourceError = (name: string): CredentialSourceError => new CredentialSourceError(name);

/**
 * How long one AWS call may take. A shared read (a secret, a public key) is not cut short by one
 * request's deadline, for the others waiting; a request waits for none past its own deadline.
 */
export const CALL_LIMIT_MS = 2000;

/** The name of what failed: ours, or the AWS call's. */
export function awsErrorName(error: unknown): string {
  return error instanceof CredentialSourceError ? error.errorName : callErrorName(error);
}

/** What `work` gives, unless the request's deadline passes first; an AWS failure as a {@link CredentialSourceError}. */
export function withinDeadline<T>(work: Promise<T>, deadline: Deadline): Promise<T> {
  const failed = work.catch((error: unknown) => Promise.reject(new CredentialSourceError(awsErrorName(error))));
  return deadline.race(failed, () => new CredentialSourceError('Timeout', true));
}

/**
 * Values read once per instance and shared: the first request for a key starts the read, the others
 * wait for it, and a failed read is forgotten so that the next request tries again.
 */
export class SharedReads<T> {
  private readonly reads = new Map<string, Promise<T>>();

  constructor(private readonly read: (key: string) => Promise<T>) {}

  /** The kept read of `key`, or a new one. */
  get(key: string): Promise<T> {
    return this.reads.get(key) ?? this.again(key);
  }

  /** A new read of `key`, which later requests share. */
  again(key: string): Promise<T> {
    const reading = this.read(key);
    this.reads.set(key, reading);
    reading.catch(() => this.reads.delete(key));
    return reading;
  }
}
