/**
 * The child side of handler-process.ts: the handler built from this process's own environment, as
 * the deployed function builds it, answering each event sent over IPC.
 */
import { loadConfigAtStart } from '../lambda/config';
import { createHandler, type TokenHandler } from '../lambda/handler';

interface Invocation {
  id: number;
  event: Parameters<TokenHandler>[0];
}

// Each log record goes to the parent process (before its answer), not to the parent's output.
const handle = createHandler(loadConfigAtStart(process.env), { record: (record) => process.send?.({ record }) });

process.on('message', (message: Invocation) => {
  void handle(message.event).then(
    (result) => process.send?.({ id: message.id, result }),
    (error: unknown) => process.send?.({ id: message.id, rejected: String(error) }),
  );
});
// Pooled keep-alive sockets would keep this process alive once its caller has gone.
process.on('disconnect', () => process.exit(0));
process.send?.({ ready: true });
