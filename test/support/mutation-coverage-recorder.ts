import { appendFileSync } from 'node:fs';
import { join } from 'node:path';

// Under `npm run mutate` only (jest.mutation.config.js). During Stryker's dry run, write down which
// test files reach which mutant, so mutation-sequencer.js can load only those files for a mutant.
// Stryker already runs only the tests that reached a mutant, but jest still loads every test file
// that imports the mutated module to find them, and that loading was most of a mutant's cost.
/** Read by mutation-sequencer.js, beside this file (in Stryker's sandbox copy of the project). */
const MUTATION_COVERAGE_MAP = join(__dirname, 'mutation-coverage.jsonl');

interface InstrumenterContext {
  mutantCoverage?: { static?: Record<string, number>; perTest?: Record<string, Record<string, number>> };
}

const context = (): InstrumenterContext | undefined =>
  (globalThis as Record<string, unknown>)[String((globalThis as Record<string, unknown>).__strykerGlobalNamespace__ ?? '__stryker__')] as
    InstrumenterContext | undefined;

// A mutant run sets the active mutant; the dry run, which measures coverage, does not.
if (process.env.__STRYKER_ACTIVE_MUTANT__ === undefined && context() !== undefined) {
  const testNames = new Set<string>();
  afterEach(() => {
    const { currentTestName } = expect.getState();
    if (currentTestName !== undefined) testNames.add(currentTestName);
  });
  afterAll(() => {
    const coverage = context()?.mutantCoverage;
    const mutants = new Set<string>();
    for (const name of testNames) for (const id of Object.keys(coverage?.perTest?.[name] ?? {})) mutants.add(id);
    const line = { file: expect.getState().testPath, mutants: [...mutants], static: Object.keys(coverage?.static ?? {}) };
    appendFileSync(MUTATION_COVERAGE_MAP, `${JSON.stringify(line)}\n`);
  });
}
