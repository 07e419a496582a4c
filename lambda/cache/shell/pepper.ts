import { SECRETS_MANAGER } from '../../aws/endpoints';
import { awsJsonClient, callErrorName } from '../../aws/json-client';
import { type Clock, Deadline, type EpochMs, epochMs } from '../../clock';
import { type CacheSettings, pepperFreshness } from '../core/settings';
import type { CacheReport } from '../report';

/** The server-side secret mixed into every shared item's keys; the table never holds it. */
export interface PepperSource {
  /** The pepper in use, or undefined when none can be had by `deadline` (the reason goes into the report). */
  get(deadline: Deadline, report: CacheReport): Promise<Buffer | undefined>;
  /** When this instance began using a pepper that replaced one it used before (0: never): the items before are out of its sight. */
  switchedAt(): EpochMs;
}

/** A pepper shorter than this adds too little to a guess: refuse it rather than trust it. */
const MIN_PEPPER_CHARACTERS = 32;

/** The pepper from AWS Secrets Manager: the secret's `SecretString`, as {@link pepperSource} reads it. */
export function secretsManagerPepper(secretId: string, clock: Clock, settings: CacheSettings['pepper']): PepperSource {
  const client = awsJsonClient(SECRETS_MANAGER, process.env, clock);
  return pepperSource(
    (deadline) => client.call('GetSecretValue', { SecretId: secretId }, deadline).then(({ SecretString: value }) => value),
    clock,
    settings,
  );
}

/**
 * A pepper read as the function initialises, read again in the background once it is
 * `refreshAfterMs` old, and never used once `maxAgeMs` old without a newer read: after a rotation
 * every instance uses the new pepper within a minute, and items sealed with the old one are then
 * ignored. While none is usable the table is skipped, never waited on past a request's own limit.
 */
export function pepperSource(
  read: (deadline: Deadline) => Promise<unknown>,
  clock: Clock,
  settings: CacheSettings['pepper'],
): PepperSource {
  let loaded: { readonly value: Buffer; readonly at: EpochMs } | undefined;
  let loading: Promise<void> | undefined;
  let failure: { readonly name: string; readonly at: EpochMs } | undefined;
  let used: { readonly value: Buffer; readonly switchedAt: EpochMs } | undefined;
  // The pepper handed out, noting when it replaced another: the 401s sealed under the old one are then out of sight.
  const use = (value: Buffer): Buffer => {
    if (!used || !used.value.equals(value)) used = { value, switchedAt: used ? clock.epoch() : epochMs(0) };
    return value;
  };

  const load = (): Promise<void> => {
    const started = clock.epoch();
    loading = read(Deadline.after(clock, settings.loadLimitMs))
      .then((value) => {
        if (typeof value !== 'string' || value.length < MIN_PEPPER_CHARACTERS) throw Object.assign(new Error(), { name: 'PepperTooShort' });
        // Dated when the read began: the value is at least that fresh.
        loaded = { value: Buffer.from(value, 'utf8'), at: started };
        failure = undefined;
      })
      .catch((error: unknown) => {
        failure = { name: callErrorName(error), at: clock.epoch() };
      })
      .finally(() => (loading = undefined));
    return loading;
  };
  // One read at a time, and after a failed one, one a second at most.
  const maybeLoad = (now: EpochMs): Promise<void> | undefined =>
    loading ?? (!failure || now - failure.at >= settings.retryAfterMs || now < failure.at ? load() : undefined);

  void load();
  return {
    async get(deadline, report) {
      const now = clock.epoch();
      const freshness = loaded ? pepperFreshness(loaded.at, now, settings) : 'stale';
      if (freshness !== 'stale' && loaded) {
        if (freshness === 'refresh') void maybeLoad(now);
        return use(loaded.value);
      }
      // A read under way may bring a value already too old (it was sent before the instance was frozen): then one more.
      for (let attempt = 0; attempt < 2; attempt++) {
        const reading = maybeLoad(clock.epoch());
        if (!reading) break;
        await deadline.race(reading).catch(() => undefined);
        if (loaded && pepperFreshness(loaded.at, clock.epoch(), settings) !== 'stale') return use(loaded.value);
      }
      report.tableError = loading ? 'PepperTimeout' : (failure?.name ?? 'PepperTimeout');
      return undefined;
    },
    switchedAt: () => used?.switchedAt ?? epochMs(0),
  };
}
