import createDebug from 'debug';

/**
 * simple-oauth2 writes its Basic authorization header, and a form body carrying a
 * client_secret_post secret, through `debug`, which `DEBUG=simple-oauth2*` or `DEBUG=*` turns on at
 * start and anything in the process can turn on later with `debug.enable()`. Its loggers have no
 * log function of their own and write through `createDebug.log`, which is pinned here to drop every
 * line of a simple-oauth2 namespace, whatever is enabled and however the code is run (tsx, jest,
 * another bundler). Other packages' debug output is left alone. The deployed bundle goes further
 * and replaces `debug` with silent-debug.ts.
 */
const write = createDebug.log;

function log(this: createDebug.Debugger, ...args: unknown[]): void {
  if (this.namespace.startsWith('simple-oauth2')) return;
  write.apply(this, args);
}

// Neither assignable nor redefinable, so nothing later in the process can put the old writer back.
Object.defineProperty(createDebug, 'log', { value: log, writable: false, configurable: false });
