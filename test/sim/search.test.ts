import { corpus } from '../../sim/corpus';
import { runScenario, simulate } from '../../sim/simulation';

// The simulator's search, within CI's budget: 2,000 seeds of 40 requests each, every one a different
// fleet, IdP, table and trouble (docs/TOKEN-CACHE.md). `npm run sim` runs as many as asked.

const SEEDS = 2000;
const REQUESTS = 40;

describe('the simulator', () => {
  it.each(corpus.map(({ name, scenario }) => [name, scenario] as const))(
    'finds no broken invariant in the hard case: %s',
    async (_, scenario) => {
      const result = await runScenario(scenario);

      expect(result.violations).toEqual([]);
    },
  );

  it(`finds no broken invariant in ${SEEDS} seeds of ${REQUESTS} requests`, async () => {
    const broken: string[] = [];
    let answered = 0;
    for (let seed = 1; seed <= SEEDS && broken.length === 0; seed++) {
      const result = await simulate(seed, REQUESTS);
      answered += result.record.answers.length;
      for (const violation of result.violations)
        broken.push(`seed ${seed}: ${violation.rule}: ${violation.detail} (replay: npm run sim -- --seed ${seed} --requests ${REQUESTS})`);
    }

    expect(broken).toEqual([]);
    expect(answered).toBeGreaterThan(SEEDS * REQUESTS * 0.9);
  }, 240_000);
});
