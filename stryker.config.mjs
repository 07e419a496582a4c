// Mutation testing of lambda/ (`npm run mutate`, see docs/TESTING.md). Not part of `npm test`: a
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
  // Two type-checker processes and one test runner until every mutant is checked, then three test
  // runners on two cores: the cache's tests mostly wait on sockets and timers, so a third keeps both busy.
  concurrency: 3,
  reporters: ['clear-text', 'progress', 'html', 'json'],
  htmlReporter: { fileName: 'reports/mutation/index.html' },
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
};
