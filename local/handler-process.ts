import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import type { TokenHandler } from '../lambda/handler';
import type { RequestRecord } from '../lambda/observability';
import type { Response } from '../lambda/responses';

const REPO_ROOT = join(__dirname, '..');

/** The handler running in a child process, invoked with events as Lambda would. */
export interface HandlerProcess {
  invoke(event: Parameters<TokenHandler>[0]): Promise<Response>;
  /** The same, with the handler's own duration (ms) as the process measured it. */
  measure(event: Parameters<TokenHandler>[0]): Promise<{ result: Response; ms: number }>;
  /** The log record of every request answered so far, in order (from the sources only: a bundle logs to its stdout). */
  readonly records: RequestRecord[];
  /** The CPU time (user and system, ms) the process had used when it sent its latest answer. */
  readonly cpuMs: number;
  stop(): Promise<void>;
  /** End the process at once, as a Lambda instance dies: no cleanup, nothing more sent or written. */
  kill(): Promise<void>;
}

type Reply =
  | { ready: true }
  | { record: RequestRecord }
  | { id: number; result: Response; ms: number; cpuMs: number }
  | { id: number; rejected: string };

/**
 * Start `createHandler(loadConfig(env))` in a process of its own, on the Node.js binary running the
 * caller: an instance of its own (its own memory, sockets and event loop), and settings Node reads only
 * when a process starts, such as `NODE_EXTRA_CA_CERTS`. `env` is the whole environment: nothing of the
 * caller's configuration leaks in. With `bundle` (a built bundle's path), the process runs that bundle's
 * `handler`, as Lambda loads the deployed function, rather than the TypeScript sources.
 */
export async function startHandlerProcess(env: NodeJS.ProcessEnv, options: { bundle?: string } = {}): Promise<HandlerProcess> {
  let stderr = '';
  const child: ChildProcess = fork(join(__dirname, 'handler-process-entry.ts'), options.bundle === undefined ? [] : [options.bundle], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH, ...env },
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
  });
  type Measured = { result: Response; ms: number };
  const pending = new Map<number, { resolve(measured: Measured): void; reject(error: Error): void }>();
  const exited = once(child, 'exit');
  let ready: () => void = () => undefined;
  const started = new Promise<void>((resolve) => (ready = resolve));
  const records: RequestRecord[] = [];
  let cpuMs = 0;
  child.on('message', (reply: Reply) => {
    if ('ready' in reply) return ready();
    if ('record' in reply) return void records.push(reply.record);
    const waiting = pending.get(reply.id);
    pending.delete(reply.id);
    if ('cpuMs' in reply) cpuMs = reply.cpuMs;
    if ('result' in reply) waiting?.resolve({ result: reply.result, ms: reply.ms });
    else waiting?.reject(new Error(`the handler rejected: ${reply.rejected}`));
  });
  child.on('exit', (code) => {
    const error = new Error(`the handler process exited (${code}); stderr:\n${stderr}`);
    for (const waiting of pending.values()) waiting.reject(error);
    pending.clear();
  });
  await Promise.race([
    started,
    exited.then(([code]) => {
      throw new Error(`the handler process exited (${code}) before it was ready; stderr:\n${stderr}`);
    }),
  ]);

  let nextId = 0;
  const measure = (event: Parameters<TokenHandler>[0]): Promise<Measured> => {
    const id = (nextId += 1);
    return new Promise((resolve, reject) => {
      pending.set(id, { resolve, reject });
      // A process that has gone cannot take the event: the send fails here rather than as an unhandled 'error'.
      child.send({ id, event }, (error) => {
        if (error === null || !pending.delete(id)) return;
        reject(error);
      });
    });
  };
  return {
    records,
    get cpuMs() {
      return cpuMs;
    },
    measure,
    invoke: (event) => measure(event).then(({ result }) => result),
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.disconnect();
      await exited;
    },
    async kill() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGKILL');
      await exited;
    },
  };
}
