// Under `npm run mutate` only (jest.mutation.config.js): for a mutant, run only the test files that
// reached it in Stryker's dry run, as mutation-coverage-recorder.ts wrote them down. Stryker already
// filters by test name; this spares jest loading every other file that imports the mutated module.
// Without a map, or for a mutant reached while a module loads (Stryker then runs every test), it
// changes nothing.
const { existsSync, readFileSync } = require('node:fs');
const { join } = require('node:path');
const Sequencer = require('@jest/test-sequencer').default;

const MUTATION_COVERAGE_MAP = join(__dirname, 'mutation-coverage.jsonl');

/** Mutant id -> the test files whose tests reached it, and the ids reached at load time. */
function readMap() {
  if (!existsSync(MUTATION_COVERAGE_MAP)) return undefined;
  const filesByMutant = new Map();
  const atLoad = new Set();
  for (const line of readFileSync(MUTATION_COVERAGE_MAP, 'utf8').split('\n')) {
    if (line === '') continue;
    const { file, mutants, static: loaded } = JSON.parse(line);
    for (const id of mutants) filesByMutant.set(id, new Set([...(filesByMutant.get(id) ?? []), file]));
    for (const id of loaded) atLoad.add(id);
  }
  return { filesByMutant, atLoad };
}

let map;

class MutationSequencer extends Sequencer {
  sort(tests) {
    const mutant = process.env.__STRYKER_ACTIVE_MUTANT__;
    if (mutant === undefined) return super.sort(tests);
    map ??= readMap();
    const files = map?.filesByMutant.get(mutant);
    if (files === undefined || map.atLoad.has(mutant)) return super.sort(tests);
    const reached = tests.filter((test) => files.has(test.path));
    return super.sort(reached.length > 0 ? reached : tests);
  }
}

module.exports = MutationSequencer;
