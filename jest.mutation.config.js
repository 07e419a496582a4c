// The jest run Stryker uses for each mutant (stryker.config.mjs). It leaves out tests that cannot
// kill a mutant of lambda/: those that run the bundle, the local server or the exchange in a child
// process (the mutant lives in Stryker's in-process copy, not in what the child loads), the CDK
// synth tests and the docs' link checks. For each mutant it loads only the test files that reached it, and stops at the first
// failing test (test/support/mutation-*).
const { join } = require('node:path');
const base = require('./jest.config.js');

// MUTATION_TESTS (comma-separated test files) runs those alone: a lower bound on the score, for files
// whose own unit tests are fast while the rest of the suite that reaches them is slow.
const only = process.env.MUTATION_TESTS?.split(',').map((file) => join(__dirname, file.trim()));

/** @type {import('jest').Config} */
module.exports = {
  ...base,
  ...(only ? { testMatch: only } : {}),
  testPathIgnorePatterns: [
    '/node_modules/',
    '<rootDir>/test/infra/',
    '<rootDir>/test/local-server\\.test\\.ts$',
    '<rootDir>/test/local-shared-cache\\.test\\.ts$',
    '<rootDir>/test/https-exchange\\.test\\.ts$',
    '<rootDir>/test/docs\\.test\\.ts$',
    // Reaches nearly every line of lambda/cache/ and runs 30 s: the scripted scenarios beside it stay.
    '<rootDir>/test/sim/search\\.test\\.ts$',
  ],
  setupFiles: ['<rootDir>/test/support/mutation-setup.ts'],
  setupFilesAfterEnv: ['<rootDir>/test/support/mutation-coverage-recorder.ts'],
  testSequencer: '<rootDir>/test/support/mutation-sequencer.js',
  // An absolute path: Stryker resolves the environment itself, without jest's <rootDir>.
  testEnvironment: join(__dirname, 'test', 'support', 'mutation-environment.js'),
  collectCoverageFrom: undefined,
  coverageThreshold: undefined,
};
