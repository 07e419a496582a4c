/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  collectCoverageFrom: ['lambda/**/*.ts'],
  coverageThreshold: { global: { lines: 95, branches: 95, functions: 95, statements: 95 } },
  coverageReporters: ['text-summary', 'lcov'],
  testTimeout: 30000,
};
