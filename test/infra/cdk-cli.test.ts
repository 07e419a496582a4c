import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OPEN_RELAY_REFUSAL } from '../../infra/token-exchange-stack';

// The real CDK CLI (node_modules/aws-cdk) running the app as cdk.json says, offline: no AWS
// credentials, no profile (HOME is an empty directory), no instance metadata, and a network locked
// to loopback in every process it starts, so what it tried shows up in a log instead of leaving.

const REPO_ROOT = join(__dirname, '..', '..');
const CDK = join(REPO_ROOT, 'node_modules', 'aws-cdk', 'bin', 'cdk');
const JAIL = join(__dirname, '..', 'support', 'loopback-only-network.js');
const CLI_TIMEOUT_MS = 120_000;

interface CliRun {
  code: number;
  output: string;
  /** Non-loopback lookups and connections the jail refused. */
  networkAttempts: string[];
}

let scratch: string;

beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), 'cdk-cli-'));
});

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** The CDK CLI, or with `npm: true` the package's own script (`npm run synth -- ...`). */
function cdk(name: string, args: string[], { npm = false } = {}): Promise<CliRun> {
  const log = join(scratch, `${name}.network.log`);
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: join(scratch, 'home'),
    AWS_EC2_METADATA_DISABLED: 'true',
    // The CLI's version check (and npx's update notice) would ask the npm registry.
    CDK_DISABLE_VERSION_CHECK: '1',
    npm_config_update_notifier: 'false',
    NODE_OPTIONS: `--require ${JAIL}`,
    LOOPBACK_ONLY_LOG: log,
  };
  return new Promise((resolve) => {
    const command = npm ? 'npm' : process.execPath;
    const output = ['--output', join(scratch, `${name}.out`)];
    execFile(
      command,
      npm ? ['run', '--silent', ...args, '--', ...output] : [CDK, ...args, ...output],
      { cwd: REPO_ROOT, env, timeout: CLI_TIMEOUT_MS },
      (error, stdout, stderr) => {
        const networkAttempts = existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n') : [];
        resolve({ code: typeof error?.code === 'number' ? error.code : error ? -1 : 0, output: `${stdout}${stderr}`, networkAttempts });
      },
    );
  });
}

describe('the CDK CLI with no token URL choice', () => {
  it(
    'runs `cdk bootstrap` as far as the missing AWS credentials',
    async () => {
      // Act
      const run = await cdk('bootstrap', ['bootstrap']);

      // Assess
      expect(run.output).toMatch(/Unable to resolve AWS account to use/);
      expect(run.output).not.toContain('allowedTokenUrls is empty');
      expect(run.code).not.toBe(0);
      expect(run.networkAttempts).toEqual([]);
    },
    CLI_TIMEOUT_MS,
  );

  it(
    'stops `cdk synth` with the open-relay refusal',
    async () => {
      // Act
      const run = await cdk('synth', ['synth', '--quiet']);

      // Assess
      expect(run.output).toContain(OPEN_RELAY_REFUSAL);
      expect(run.code).not.toBe(0);
      expect(run.networkAttempts).toEqual([]);
    },
    CLI_TIMEOUT_MS,
  );

  it(
    'stops `npm run synth` with the open-relay refusal too: the script makes no choice for the user',
    async () => {
      // Act
      const run = await cdk('npm-synth', ['synth'], { npm: true });

      // Assess
      expect(run.output).toContain(OPEN_RELAY_REFUSAL);
      expect(run.code).not.toBe(0);
      expect(run.networkAttempts).toEqual([]);
    },
    CLI_TIMEOUT_MS,
  );
});
