// dynalite with the token cache table, Secrets Manager with a new pepper and, if asked, KMS with a stored credential's key,
// in a process of their own, so that the table calls of the fleets that `npm run bench` and `npm run faults` measure do
// not share the caller's event loop.
import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { type LocalEndpoints, localAwsEnvironment } from './dynamodb-local';

export interface ServicesEndpoints extends LocalEndpoints {
  readonly dynamoDb: string;
  readonly secretsManager: string;
}

export interface ServicesProcess {
  readonly endpoints: ServicesEndpoints;
  /** The function's settings for them: the SDK pointed at the endpoints, and the table's and the pepper secret's names. */
  readonly environment: Record<string, string>;
  /** End the process, its servers closed first. */
  stop(): Promise<void>;
}

/** Start the services; with `keyAlias`, KMS holds an RSA_2048 key by that alias. The process ends when this one goes. */
export async function startServicesProcess(tableName: string, pepperSecret: string, keyAlias?: string): Promise<ServicesProcess> {
  const args = [tableName, pepperSecret, ...(keyAlias ? [keyAlias] : [])];
  const { child, message: endpoints, exited } = await forkScript<ServicesEndpoints>(join(__dirname, 'services-process-entry.ts'), args);
  const names = { TOKEN_CACHE_TABLE: tableName, TOKEN_CACHE_PEPPER_SECRET: pepperSecret };
  return {
    endpoints,
    environment: { ...localAwsEnvironment(endpoints), ...names },
    async stop() {
      child.disconnect();
      await exited;
    },
  };
}

/** A TypeScript script in a process of its own (tsx), once it has sent its first message over IPC. */
export async function forkScript<T>(file: string, args: string[]): Promise<{ child: ChildProcess; message: T; exited: Promise<unknown> }> {
  const child = fork(file, args, {
    cwd: join(__dirname, '..'),
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = once(child, 'exit');
  const failed = exited.then(([code]) => Promise.reject(new Error(`${file} exited (${code}) before it started`)));
  const [message] = (await Promise.race([once(child, 'message'), failed])) as [T];
  return { child, message, exited };
}
