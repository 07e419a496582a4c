// What the scripts run from the command line (`npm start`, `npm run bench`, `npm run faults`) do at their entry: answer
// --help before anything starts, and say a failure on stderr with exit code 1 rather than leave it an unhandled rejection.

/** With --help or -h among the arguments, print `help` and end the process. */
export function exitOnHelp(help: string): void {
  if (!process.argv.includes('--help') && !process.argv.includes('-h')) return;
  process.stdout.write(help);
  process.exit(0);
}

/** Run `main`, then end the process (servers it started would hold it open) with the exit code it returns. */
export function runScript(name: string, main: () => Promise<number>): void {
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      console.error(`${name} failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
      process.exit(1);
    },
  );
}
