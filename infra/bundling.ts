import * as path from 'node:path';

const ROOT = path.join(__dirname, '..');

/** The function's entry point. */
export const LAMBDA_ENTRY = path.join(ROOT, 'lambda', 'handler.ts');

/** Replaces `debug` in the bundle so no environment variable can make simple-oauth2 print a secret. */
export const SILENT_DEBUG = path.join(ROOT, 'lambda', 'bundle', 'silent-debug.ts');

/** Replaces `zlib` in the bundle so Node's zlib loads on first use, not in every cold start. */
export const DEFERRED_ZLIB = path.join(ROOT, 'lambda', 'bundle', 'deferred-zlib.ts');

/** Syntax level of the bundle: the stack's Lambda runtime (a test holds them together). */
export const BUNDLE_TARGET = 'node24';

/**
 * The esbuild options of the deployed bundle, for building it outside CDK (benchmarks, tests)
 * exactly as NodejsFunction does in the stack.
 */
export function lambdaBuildOptions(outfile: string) {
  return {
    bundle: true,
    platform: 'node' as const,
    format: 'cjs' as const,
    target: BUNDLE_TARGET,
    minify: true,
    logLevel: 'warning' as const,
    entryPoints: [LAMBDA_ENTRY],
    outfile,
    sourcemap: true,
    alias: { debug: SILENT_DEBUG, zlib: DEFERRED_ZLIB },
  };
}
