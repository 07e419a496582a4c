// `npm run sim`: the shared token cache under a seeded, replayable simulation (docs/TOKEN-CACHE.md).
import { randomInt } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { corpus } from './corpus';
import type { Scenario } from './scenario';
import { shrink } from './shrink';
import { runScenario, type SimResult, simulate } from './simulation';

const HELP = `npm run sim [-- options]: the shared token cache's simulator. Each seed is a fleet, an IdP, a table,
clocks and trouble, run on simulated time through the real cache code; an independent judge checks
the record against the contract. Exits 1 at the first seed that breaks a promise, with its trace.

  (no options)            the published search: the hard cases of sim/corpus.ts, then 300 seeds of 600
                          requests from seed 1
  --corpus                the hard cases alone
  --seeds N --requests M  N seeds of M requests (from --from S, default 1)
  --fresh                 a random first seed (printed), for a search nobody ran before
  --seconds S             stop starting seeds after S seconds (the search so far is reported)
  --seed S --requests M   one seed, with its whole trace
  --shrink                with a failing seed: cut it down to a short schedule, saved as sim-shrunk.json
  --scenario FILE         run a scenario saved as JSON (as --shrink writes it)
`;

const argument = (name: string, fallback: number): number => {
  const index = process.argv.indexOf(`--${name}`);
  const value = index < 0 ? Number.NaN : Number(process.argv[index + 1]);
  return Number.isSafeInteger(value) && value >= 0 ? value : fallback;
};
const flag = (name: string): boolean => process.argv.includes(`--${name}`);

/** A line as printed: the simulator's oversized tokens cut to their names. */
const shown = (line: string): string => line.replace(/x{16,}/g, 'x…');

function printTrace(result: SimResult, until = Infinity, lines = 150): void {
  for (const { at, line } of result.trace.filter((entry) => entry.at <= until).slice(-lines))
    console.log(`${at.toFixed(1).padStart(12)} ${shown(line)}`);
}

async function report(result: SimResult, replay: string): Promise<boolean> {
  const [first] = result.violations;
  if (!first) return false;
  printTrace(result, first.at);
  console.log(`seed ${result.seed}: ${first.rule}: ${shown(first.detail)}`);
  console.log(`replay: ${replay}`);
  if (flag('shrink')) {
    const { scenario, runs } = await shrink(result.scenario, first.rule);
    writeFileSync('sim-shrunk.json', JSON.stringify(scenario, null, 1));
    const arrivals = scenario.traffic.kind === 'scripted' ? scenario.traffic.arrivals.length : '?';
    console.log(`shrunk in ${runs} runs to ${arrivals} requests: sim-shrunk.json (npm run sim -- --scenario sim-shrunk.json)`);
  }
  return true;
}

async function main(): Promise<void> {
  if (flag('help') || flag('h')) return void console.log(HELP);
  const file = process.argv[process.argv.indexOf('--scenario') + 1];
  if (flag('scenario') && file) {
    const result = await runScenario(JSON.parse(readFileSync(file, 'utf8')) as Scenario);
    if (!(await report(result, `npm run sim -- --scenario ${file}`))) printTrace(result, Infinity, 400);
    process.exitCode = result.violations.length > 0 ? 1 : 0;
    return;
  }
  const single = argument('seed', -1);
  // The hard cases go first in the published search; a range asked for is that range alone.
  const published = !['seed', 'seeds', 'from', 'fresh', 'requests'].some(flag);
  const schedules = flag('corpus') || published ? corpus : [];
  for (const { name, scenario } of schedules) {
    const result = await runScenario(scenario);
    if (await report(result, `npm run sim -- --corpus (${name})`)) {
      process.exitCode = 1;
      return;
    }
  }
  if (flag('corpus')) return void console.log(`${schedules.length} hard cases: no violation`);
  const requests = argument('requests', single >= 0 ? 60 : 600);
  const from = single >= 0 ? single : flag('fresh') ? randomInt(1_000_000, 2 ** 31 - 1) : argument('from', 1);
  const seeds = single >= 0 ? 1 : argument('seeds', 300);
  const budgetMs = argument('seconds', 0) * 1000;
  if (flag('fresh')) console.log(`a fresh range from seed ${from}`);
  const started = performance.now();
  let [ran, answered, idp] = [0, 0, 0];
  for (let seed = from; seed < from + seeds; seed++) {
    if (budgetMs > 0 && performance.now() - started > budgetMs) break;
    const result = await simulate(seed, requests);
    ran++;
    answered += result.record.answers.length;
    idp += result.record.idp.length;
    if (await report(result, `npm run sim -- --seed ${seed} --requests ${requests}`)) {
      process.exitCode = 1;
      return;
    }
    if (single >= 0) printTrace(result, Infinity, 400);
  }
  const seconds = (performance.now() - started) / 1000;
  console.log(
    `${schedules.length > 0 ? `${schedules.length} hard cases, then ` : ''}${ran} seeds of ${requests} requests from ${from}: ${answered} answered, ${idp} IdP requests, no violation (${seconds.toFixed(1)} s)`,
  );
}

void main();
