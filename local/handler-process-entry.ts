/**
 * The child side of handler-process.ts: the handler built from this process's own environment, as
 * the deployed function builds it, answering each event sent over IPC. Given a bundle's path as its
 * argument, it loads that bundle's `handler` as the Lambda runtime does, instead of the sources.
 */
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';
import type * as Config from '../lambda/config';
import type * as Handler from '../lambda/handler';
import { localLambdaContext } from './lambda-context';

interface Invocation {
  id: number;
  event: Parameters<Handler.TokenHandler>[0];
}

const load = createRequire(__filename);
const bundle = process.argv[2];
// From the sources, each log record goes to the parent process (before its answer), not to the parent's output; the
// bundle logs as deployed, to this process's stdout.
const handle: Handler.TokenHandler =
  bundle === undefined
    ? (load('../lambda/handler') as typeof Handler).createHandler(
        (load('../lambda/config') as typeof Config).loadConfigAtStart(process.env),
        {
          record: (record) => process.send?.({ record }),
        },
      )
    : (load(bundle) as typeof Handler).handler;

process.on('message', (message: Invocation) => {
  // The handler's own duration, on this process's clock: what Lambda would bill, whatever the parent's load.
  const started = performance.now();
  void handle(message.event, localLambdaContext(`invocation-${message.id}`)).then(
    (result) => {
      const { user, system } = process.cpuUsage();
      process.send?.({ id: message.id, result, ms: performance.now() - started, cpuMs: (user + system) / 1000 });
    },
    (error: unknown) => process.send?.({ id: message.id, rejected: String(error) }),
  );
});
// Pooled keep-alive sockets would keep this process alive once its caller has gone.
process.on('disconnect', () => process.exit(0));
process.send?.({ ready: true });
