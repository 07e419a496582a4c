import { fork } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import type { IdpOptions } from '../../local/idp';

/** An embedded IdP in a process of its own. */
export interface IdpProcess {
  readonly issuer: string;
  readonly tokenUrl: string;
  stop(): Promise<void>;
}

/**
 * Start the embedded IdP (oidc-provider on 127.0.0.1, a free port) in a child process, with clients
 * and settings of the test's choosing: oidc-provider is an ES module that jest's workers cannot load,
 * so global-setup.ts starts the shared one, and a test that needs its own starts it here.
 */
export async function startIdpProcess(options: IdpOptions): Promise<IdpProcess> {
  let stderr = '';
  const child = fork(join(__dirname, 'idp-process-entry.ts'), [], {
    cwd: join(__dirname, '..', '..'),
    env: { PATH: process.env.PATH, IDP_OPTIONS: JSON.stringify({ port: 0, ...options }) },
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
  });
  const exited = once(child, 'exit');
  const [started] = (await Promise.race([
    once(child, 'message'),
    exited.then(([code]) => {
      throw new Error(`the IdP process exited (${code}) before it started; stderr:\n${stderr}`);
    }),
  ])) as [{ issuer: string; tokenUrl: string }];
  return {
    ...started,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.disconnect();
      await exited;
    },
  };
}
