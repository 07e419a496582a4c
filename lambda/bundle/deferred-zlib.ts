import type * as Zlib from 'node:zlib';

/**
 * Stands in for `zlib` in the deployed bundle (esbuild alias, see infra/bundling.ts). wreck
 * requires zlib as it loads, for its `gunzip` option alone, which simple-oauth2 never sets, and
 * loading Node's zlib is a few milliseconds of every cold start. Here each property is read from
 * the real module, loaded on first use through the documented `process.getBuiltinModule`.
 */
export = new Proxy({} as typeof Zlib, {
  get: (_target, key) => (process.getBuiltinModule('node:zlib') as Record<string | symbol, unknown>)[key],
});
