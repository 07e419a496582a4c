import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

// Every script answers --help with what it does and its settings, and starts nothing (`npm start` and
// `npm run smoke` are asked in their own tests).

const REPO_ROOT = join(__dirname, '..');
const run = promisify(execFile);

describe('--help', () => {
  it.each([
    ['npm run bench', 'bench/run.ts', ['--cold-start', 'BENCH_NODE', 'reports/bench.md']],
    ['npm run sim', 'sim/run.ts', ['--seeds N', '--requests M', '--seed S']],
    ['npm run faults', 'faults/run.ts', ['TOKEN_CACHE=off', '127.0.0.1']],
  ])('of %s says what it does and its settings, and exits 0', async (command, script, settings) => {
    // Act
    const { stdout } = await run(join(REPO_ROOT, 'node_modules/.bin/tsx'), [script, '--help'], { cwd: REPO_ROOT, timeout: 20_000 });

    // Assess
    expect(stdout.startsWith(command)).toBe(true);
    for (const setting of settings) expect(stdout).toContain(setting);
  });
});
