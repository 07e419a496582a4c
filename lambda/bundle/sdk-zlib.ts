import type * as Zlib from 'node:zlib';

/**
 * Stands in for `node:zlib` in `aws-sdk.js` (infra/bundling.ts). The SDK reads `crc32` from it as it
 * loads, for checksums that no call here computes; this `crc32` loads Node's zlib on its first use,
 * so that loading the SDK does not load zlib in every cold start. esbuild warns should the SDK ever
 * import anything else from zlib.
 */
export function crc32(data: string | NodeJS.ArrayBufferView, value?: number): number {
  return (process.getBuiltinModule('node:zlib') as typeof Zlib).crc32(data, value);
}
