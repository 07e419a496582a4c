// `npm run sim`: the shared token cache under a seeded, replayable simulation (docs/TOKEN-CACHE.md).
import { simulate } from './simulation';

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
    answered += result.record.answers.length;
    idp += result.record.idp.length;
    const [first] = result.violations;
    if (first || single >= 0) {
      const until = first?.at ?? Infinity;
      for (const { at, line } of result.trace.filter((entry) => entry.at <= until).slice(-150)) console.log(`${at.toFixed(1).padStart(12)} ${line}`);
    }
    if (first) {
      console.log(`seed ${seed}: ${first.rule}: ${first.detail}`);
      console.log(`replay: npm run sim -- --seed ${seed} --requests ${requests}`);
      process.exitCode = 1;
      return;
    }
  }
  const seconds = (performance.now() - started) / 1000;
  console.log(`${seeds} seeds from ${from}, ${answered} requests answered, ${idp} IdP requests, no violation (${seconds.toFixed(1)} s)`);
}

void main();
