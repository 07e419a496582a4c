/**
 * Stands in for the `debug` package in the deployed bundle (esbuild alias, see infra/bundling.ts).
 * simple-oauth2 logs its Basic authorization header through `debug`, so `DEBUG=simple-oauth2*` in
 * the function's environment would print client secrets; here no namespace can ever be enabled.
 */
type Debugger = ((...args: unknown[]) => void) & { enabled: boolean; namespace: string; extend: (suffix: string) => Debugger };

function createDebug(namespace: string): Debugger {
  const debug = (() => undefined) as unknown as Debugger;
  debug.enabled = false;
  debug.namespace = namespace;
  debug.extend = (suffix: string) => createDebug(`${namespace}:${suffix}`);
  return debug;
}

createDebug.enable = (): void => undefined;
createDebug.disable = (): string => '';
createDebug.enabled = (): boolean => false;

export = createDebug;
