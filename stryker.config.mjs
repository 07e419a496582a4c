// Mutation testing of lambda/ (`npm run mutate`, see docs/MUTATION.md). Not part of `npm test`: a
// whole run takes about two hours on two cores.
/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  mutate: ['lambda/**/*.ts', '!lambda/**/*.d.ts'],
  testRunner: 'jest',
  jest: { configFile: 'jest.mutation.config.js' },
  // Each mutant runs only the tests that reached its code.
  coverageAnalysis: 'perTest',
  // A mutant that does not type-check is discarded instead of counted as killed.
  checkers: ['typescript'],
  tsconfigFile: 'tsconfig.json',
  // One type-checker process and two test runners: the checker would otherwise hold one of the two
  // slots for the whole run, long after it has checked every mutant.
  concurrency: 3,
  reporters: ['clear-text', 'progress', 'html', 'json'],
  htmlReporter: { fileName: 'reports/mutation/index.html' },
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
};
