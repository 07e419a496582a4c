/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  // lambda/ is a root too, so a file no test imports is still measured (at 0%) and fails the gate.
  roots: ['<rootDir>/test', '<rootDir>/lambda'],
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  collectCoverageFrom: ['lambda/**/*.ts', '!lambda/**/*.d.ts'],
  coverageThreshold: { global: { lines: 100, branches: 100, functions: 100, statements: 100 } },
  coverageReporters: ['text-summary', 'lcov'],
  testTimeout: 30000,
};
