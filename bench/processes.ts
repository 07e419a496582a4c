import { spawn } from 'node:child_process';

export interface NodeRun {
  /** What the worker wrote on fd 3, parsed; undefined when it wrote nothing. */
  readonly result: unknown;
  /** spawn() to the child's exit, seen from the bench. */
  readonly wallMs: number;
}

/**
 * Run `node ...args` with exactly `env` (nothing inherited, so no NODE_OPTIONS or DEBUG of the shell
 * changes what is measured). Handler logs on stdout are discarded as cheaply as Lambda's log pipe
 * takes them; the result comes back on fd 3.
 */
export function runNode(args: readonly string[], env: Record<string, string>, timeoutMs = 90_000): Promise<NodeRun> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let wallMs = Number.NaN;
    const child = spawn(process.execPath, args, { env, stdio: ['ignore', 'ignore', 'pipe', 'pipe'], timeout: timeoutMs });
    const result: Buffer[] = [];
    const errors: Buffer[] = [];
    child.stdio[3]?.on('data', (chunk: Buffer) => result.push(chunk));
    child.stderr?.on('data', (chunk: Buffer) => errors.push(chunk));
    child.on('exit', () => {
      wallMs = performance.now() - started;
    });
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (code !== 0) {
        reject(new Error(`node ${args.join(' ')} ended with ${code ?? signal}: ${Buffer.concat(errors).toString('utf8').trim()}`));
        return;
      }
      const text = Buffer.concat(result).toString('utf8');
      resolve({ result: text === '' ? undefined : JSON.parse(text), wallMs });
    });
  });
}
