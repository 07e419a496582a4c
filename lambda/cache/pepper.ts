import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { CacheReport } from './report';
import { tableErrorName } from './table-calls';

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
  const client = new SecretsManagerClient({ maxAttempts: 2 });
  let pepper: Buffer | undefined;
  // The load under way: the pepper, or the name of what went wrong.
  let loading: Promise<Buffer | string> | undefined;
  let failure = { at: Number.NEGATIVE_INFINITY, name: 'PepperUnavailable' };

  const load = (): Promise<Buffer | string> => {
    const loaded = client
      .send(new GetSecretValueCommand({ SecretId: secretId }), { abortSignal: AbortSignal.timeout(LOAD_LIMIT_MS) })
      .then(({ SecretString: value }) => {
        if (value === undefined || value.length < MIN_PEPPER_CHARACTERS) throw Object.assign(new Error(), { name: 'PepperTooShort' });
        pepper = Buffer.from(value, 'utf8');
        return pepper;
      })
      .catch((error: unknown) => {
        failure = { at: clock(), name: tableErrorName(error) };
        return failure.name;
      })
      .finally(() => {
        loading = undefined;
      });
    loading = loaded;
    return loaded;
  };
  void load();

  return {
    async get(budgetMs, report) {
      if (pepper) return pepper;
      const pending = loading ?? (clock() - failure.at >= RETRY_AFTER_MS ? load() : undefined);
      const loaded = pending ? await within(pending, budgetMs) : failure.name;
      if (typeof loaded !== 'string') return loaded;
      report.tableError = loaded;
      return undefined;
    },
  };
}

/** The promise's value if it settles within `ms`, else `PepperTimeout`. */
async function within(promise: Promise<Buffer | string>, ms: number): Promise<Buffer | string> {
  let timer: NodeJS.Timeout | undefined;
  const outOfTime = new Promise<string>((resolve) => {
    timer = setTimeout(() => resolve('PepperTimeout'), ms);
  });
  try {
    return await Promise.race([promise, outOfTime]);
  } finally {
    clearTimeout(timer);
  }
}
