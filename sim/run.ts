// `npm run sim`: the shared token cache's protocol under a seeded, replayable simulation (docs/TOKEN-CACHE.md).
// `--seeds N` seeds from `--from S` (default 1), `--requests M` per seed; `--seed S` replays one seed and
// prints its trace. Exits 1 at the first seed that breaks an invariant, naming it and printing its trace.
import { simulate } from './simulation';

if (process.argv.includes('--help') || process.argv.includes('-h')) {
  process.stdout.write(`npm run sim [-- --seeds N] [--from S] [--requests M] [--seed S]

Runs the shared token cache's protocol (the production code) in a seeded, deterministic simulation of
a fleet, its table, clocks and IdP, with faults, and judges each run's history against the contract.
  --seeds N      how many seeds to run (default 200), from --from S (default 1)
  --requests M   requests per seed (default 60)
  --seed S       replay one seed and print its trace
Exits 1 at the first seed that breaks a rule, naming it and printing its trace and how to replay it.
`);
  process.exit(0);
}

const argument = (name: string, fallback: number): number => {
  const index = process.argv.indexOf(`--${name}`);
  const value = index < 0 ? Number.NaN : Number(process.argv[index + 1]);
  return Number.isSafeInteger(value) && value >= 0 ? value : fallback;
};

async function main(): Promise<void> {
  const single = argument('seed', -1);
  const requests = argument('requests', 60);
  const from = single >= 0 ? single : argument('from', 1);
  const seeds = single >= 0 ? 1 : argument('seeds', 200);
  const started = performance.now();
  let answered = 0;
  let idp = 0;
  for (let seed = from; seed < from + seeds; seed++) {
    const result = await simulate(seed, requests);
    answered += result.answered;
    idp += result.idpRequests;
    if (result.violations.length > 0 || single >= 0) {
      console.log(result.trace.join('\n'));
      console.log(JSON.stringify({ ...result.scenario, secrets: undefined, keys: result.scenario.keys.map((key) => key.id) }));
    }
    if (result.violations.length > 0) {
      const [first] = result.violations;
      console.log(`seed ${seed}: ${first?.rule}: ${first?.detail}`);
      console.log(`replay: npm run sim -- --seed ${seed} --requests ${requests}`);
      process.exitCode = 1;
      return;
    }
  }
  const seconds = (performance.now() - started) / 1000;
  console.log(`${seeds} seeds from ${from}, ${answered} requests answered, ${idp} IdP requests, no violation (${seconds.toFixed(1)} s)`);
}

void main();
