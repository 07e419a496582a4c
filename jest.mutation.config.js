// The jest run Stryker uses for each mutant (stryker.config.mjs). It leaves out tests that cannot
// kill a mutant of lambda/: those that run the bundle or the local server in a child process (the
// mutant lives in Stryker's in-process copy, not in what the child loads) and the CDK synth tests.
const base = require('./jest.config.js');

/** @type {import('jest').Config} */
module.exports = {
  ...base,
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/infra/', '<rootDir>/test/local-server\\.test\\.ts$'],
  setupFiles: ['<rootDir>/test/support/mutation-setup.ts'],
  collectCoverageFrom: undefined,
  coverageThreshold: undefined,
};
