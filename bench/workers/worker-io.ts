import { writeSync } from 'node:fs';

/** File descriptor 3: a pipe the bench reads results from, kept apart from the handler's logs on stdout. */
const RESULT_FD = 3;

/** A setting the bench passes in the worker's environment. */
export function setting(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === '') throw new Error(`bench worker needs ${name}`);
  return value;
}

/**
 * Hand the result to the bench and end the process: kept-alive sockets would otherwise hold it open
 * until the server drops them, as a frozen Lambda sandbox would hold them.
 */
export function finish(result: unknown): never {
  writeSync(RESULT_FD, JSON.stringify(result));
  process.exit(0);
}

/** Report a failure (never a response body: it could hold a token) and end the process. */
export function fail(error: unknown): never {
  process.stderr.write(`bench worker failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
}
