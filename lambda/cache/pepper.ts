import { setTimeout as sleep } from 'node:timers/promises';
import { SECRETS_MANAGER } from '../aws/endpoints';
import { awsJsonClient, callErrorName } from '../aws/json-client';
import type { CacheReport } from './report';

/** The server-side secret mixed into every shared item's keys; the table never holds it. */
export interface PepperSource {
  /** The pepper, or undefined when it cannot be had within `budgetMs` (the reason goes into the report). */
  get(budgetMs: number, report: CacheReport): Promise<Buffer | undefined>;
}

/** A pepper shorter than this adds too little to a guess: refuse it rather than trust it. */
const MIN_PEPPER_CHARACTERS = 32;
// The load as the function initialises may take longer than a request's call limit (nobody waits on it
// yet), but not so long that a load that hangs keeps the instance off the table for long.
const LOAD_LIMIT_MS = 2000;
// After a failed load, one request a second may try again; the others go on without the table.
const RETRY_AFTER_MS = 1000;

/**
 * The pepper from AWS Secrets Manager (the secret's `SecretString`), loaded once as the function
 * initialises and kept for the instance's life. Until it is loaded the shared tier is skipped, never
 * waited on beyond a request's budget.
 */
export function secretsManagerPepper(secretId: string, clock: () => number): PepperSource {
  const client = awsJsonClient(SECRETS_MANAGER, process.env, Date.now);
  // When the latest load failed; none while it runs, so that requests meanwhile wait for it rather than start another.
  let failedAt: number | undefined;
  // The latest load: under way, or settled with the pepper or with the name of what went wrong.
  let latest: Promise<Buffer | string>;

  const load = (): void => {
    failedAt = undefined;
    latest = client
      .call('GetSecretValue', { SecretId: secretId }, AbortSignal.timeout(LOAD_LIMIT_MS))
      .then(({ SecretString: value }) => {
        if (typeof value !== 'string' || value.length < MIN_PEPPER_CHARACTERS) throw Object.assign(new Error(), { name: 'PepperTooShort' });
        const pepper = Buffer.from(value, 'utf8');
        // Kept for the instance's life: from now on a request has it at once, with no wait to bound.
        source.get = async () => pepper;
        return pepper;
      })
      .catch((error: unknown) => {
        failedAt = clock();
        return callErrorName(error);
      });
  };
  const source: PepperSource = {
    async get(budgetMs, report) {
      if (failedAt !== undefined && clock() - failedAt >= RETRY_AFTER_MS) load();
      // A settled load answers at once: with the pepper, or with what went wrong within the second.
      const loaded = await Promise.race([latest, sleep(budgetMs, 'PepperTimeout')]);
      if (typeof loaded !== 'string') return loaded;
      report.tableError = loaded;
      return undefined;
    },
  };
  load();
  return source;
}
