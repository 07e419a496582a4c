// One linter (ESLint with typescript-eslint) and one formatter (Prettier, `npm run format`).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/', 'cdk.out/', 'coverage/', 'dist/', 'scratch/', 'reports/', '.stryker-tmp/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    // Type information, so promise misuse is caught: a floating promise in a handler is an answer
    // that may never be sent, or an error that never reaches the error table.
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
    },
  },
  {
    languageOptions: {
      globals: { require: 'readonly', module: 'writable', __dirname: 'readonly', process: 'readonly', console: 'readonly' },
    },
    rules: {
      '@typescript-eslint/no-non-null-assertion': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      eqeqeq: ['error', 'always'],
    },
  },
  {
    // Tests load modules without types (simple-oauth2's internals, joi), and the bench the code
    // under measurement, with require.
    files: ['test/**/*.ts', 'test/support/*.js', 'bench/*.ts', 'jest.config.js', 'jest.mutation.config.js'],
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
