import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';

const REPO_ROOT = join(__dirname, '..');
const START_TIMEOUT_MS = 20_000;

interface Started {
  child: ChildProcess;
  output(): string;
}

/** `TOKEN_CACHE=shared npm start` on free ports, with no AWS setting of the shell carried over; waits for its banner. */
async function startSharedLocalServer(): Promise<Started> {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, TOKEN_CACHE: 'shared', PORT: '0', IDP_PORT: '0', SECOND_INSTANCE_PORT: '0' };
  // Its own process group, so the tests can stop tsx and the node process it spawns together.
  const child = spawn(join(REPO_ROOT, 'node_modules/.bin/tsx'), ['local/server.ts'], {
    cwd: REPO_ROOT,
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString('utf8');
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    output += chunk.toString('utf8');
  });
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (!/-d '[^']*'\n/.test(output)) {
    if (child.exitCode !== null || Date.now() > deadline) {
      stop(child);
      throw new Error(`the local server did not print its banner:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { child, output: () => output };
}

function stop(child: ChildProcess | undefined): void {
  if (child?.pid === undefined) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // ESRCH: already gone.
  }
}

function match(text: string, pattern: RegExp): string {
  const found = pattern.exec(text)?.[1];
  if (found === undefined) throw new Error(`no match for ${pattern} in:\n${text}`);
  return found;
}

describe('TOKEN_CACHE=shared npm start', () => {
  let server: Started | undefined;

  beforeAll(async () => {
    server = await startSharedLocalServer();
  }, START_TIMEOUT_MS + 5000);

  afterAll(() => stop(server?.child));

  it('says in its banner that the table is in an embedded DynamoDB-compatible server', () => {
    const banner = server?.output() ?? '';

    expect(banner).toMatch(
      /table +token-cache in an embedded DynamoDB-compatible server \(dynalite, in memory\) at http:\/\/127\.0\.0\.1:\d+/,
    );
    expect(banner).toMatch(/2nd instance +http:\/\/localhost:\d+/);
  });

  it('answers the printed curl, then the same request on the second instance from the table', async () => {
    // Prepare: the curl as printed
    const banner = server?.output() ?? '';
    const url = match(banner, /curl -s (\S+)/);
    const body = match(banner, /-d '([^']+)'/);
    const second = match(banner, /2nd instance +(http:\/\/localhost:\d+)/);
    const post = (target: string) =>
      fetch(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body, signal: AbortSignal.timeout(10_000) });

    // Act
    const first = await post(url);
    const shared = await post(url.replace(/^http:\/\/localhost:\d+/, second));

    // Assess
    expect([first.status, shared.status]).toEqual([200, 200]);
    expect([first.headers.get('x-token-cache'), shared.headers.get('x-token-cache')]).toEqual(['miss', 'hit']);
    const [fetched, kept] = (await Promise.all([first.json(), shared.json()])) as { access_token: string }[];
    expect(kept?.access_token).toBe(fetched?.access_token);
  });
});

describe('TOKEN_CACHE=shared npm start with a bad table name', () => {
  it('stops before starting the table, naming TOKEN_CACHE_TABLE and the rule it breaks', async () => {
    // Prepare: `x` is no DynamoDB table name (3 to 255 characters)
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      TOKEN_CACHE: 'shared',
      TOKEN_CACHE_TABLE: 'x',
      PORT: '0',
      IDP_PORT: '0',
      SECOND_INSTANCE_PORT: '0',
    };
    const child = spawn(join(REPO_ROOT, 'node_modules/.bin/tsx'), ['local/server.ts'], {
      cwd: REPO_ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));

    // Act
    const [code] = (await once(child, 'exit')) as [number | null];

    // Assess
    expect(output).toContain(
      'npm start failed: Environment variable TOKEN_CACHE_TABLE must be a DynamoDB table name: 3 to 255 letters, digits, _ . or -',
    );
    expect(output).not.toMatch(/ValidationException|dynalite|listening/);
    expect(code).toBe(1);
  }, 30_000);
});
