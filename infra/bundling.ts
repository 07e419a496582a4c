import * as path from 'node:path';

const ROOT = path.join(__dirname, '..');

/** The function's entry point. */
export const LAMBDA_ENTRY = path.join(ROOT, 'lambda', 'handler.ts');

/** Replaces `debug` in the bundle so no environment variable can make simple-oauth2 print a secret. */
export const SILENT_DEBUG = path.join(ROOT, 'lambda', 'bundle', 'silent-debug.ts');

/** Replaces `zlib` in the bundles so Node's zlib loads on first use, not in every cold start. */
export const DEFERRED_ZLIB = path.join(ROOT, 'lambda', 'bundle', 'deferred-zlib.ts');

/** The file beside the function's bundle that its SDK imports lead to. */
export const AWS_SDK_FILE = 'aws-sdk.js';

/** Which clients `aws-sdk.js` holds: KMS's only for a deployment whose stored credentials sign in KMS. */
export type SdkClients = { readonly kms: boolean };
const awsSdkEntry = ({ kms }: SdkClients) => path.join(ROOT, 'lambda', 'bundle', kms ? 'aws-sdk-kms.ts' : 'aws-sdk.ts');

/** Replaces `node:zlib` in the SDK's file, whose loading reads only `crc32` from it. */
export const SDK_ZLIB = path.join(ROOT, 'lambda', 'bundle', 'sdk-zlib.ts');

/** Replaces the SDK's default credential chain in its bundle: Lambda gives credentials in the environment. */
export const ENV_CREDENTIALS = path.join(ROOT, 'lambda', 'bundle', 'env-credentials.ts');

/** Syntax level of the bundle: the stack's Lambda runtime (a test holds them together). */
export const BUNDLE_TARGET = 'node24';

/** What both files share: one minified CommonJS file for the runtime's Node.js. */
const MINIFIED_FOR_THE_RUNTIME = {
  bundle: true,
  platform: 'node' as const,
  format: 'cjs' as const,
  target: BUNDLE_TARGET,
  minify: true,
  logLevel: 'warning' as const,
};

/**
 * The esbuild options of the deployed bundle, for building it outside CDK (benchmarks, tests)
 * exactly as NodejsFunction does in the stack.
 */
export function lambdaBuildOptions(outfile: string) {
  const sdk = `./${AWS_SDK_FILE}`;
  return {
    ...MINIFIED_FOR_THE_RUNTIME,
    entryPoints: [LAMBDA_ENTRY],
    outfile,
    sourcemap: true,
    // The SDK clients come from the file beside the bundle, loaded only by the shared tier and stored credentials.
    alias: {
      debug: SILENT_DEBUG,
      zlib: DEFERRED_ZLIB,
      '@aws-sdk/client-dynamodb': sdk,
      '@aws-sdk/client-kms': sdk,
      '@aws-sdk/client-secrets-manager': sdk,
    },
    external: [sdk],
  };
}

/**
 * The esbuild options of `aws-sdk.js`: the SDK's clients minified, from their ES modules so that what
 * the shared tier never calls is shaken out, with dynamic `import()` turned into `require` (the SDK
 * imports `node:http` that way, and the ES module loader it would start costs tens of milliseconds).
 */
export function awsSdkBuildOptions(outfile: string, clients: SdkClients) {
  return {
    ...MINIFIED_FOR_THE_RUNTIME,
    entryPoints: [awsSdkEntry(clients)],
    outfile,
    mainFields: ['module', 'main'],
    supported: { 'dynamic-import': false },
    alias: { zlib: DEFERRED_ZLIB, 'node:zlib': SDK_ZLIB, '@aws-sdk/credential-provider-node': ENV_CREDENTIALS },
  };
}

/** The same build as an esbuild command line, for NodejsFunction's after-bundling hook. */
export function awsSdkBuildCommand(outputDir: string, clients: SdkClients): string {
  const options = awsSdkBuildOptions(path.join(outputDir, AWS_SDK_FILE), clients);
  const args = [
    path.join(ROOT, 'node_modules', '.bin', 'esbuild'),
    ...options.entryPoints,
    '--bundle',
    `--outfile=${options.outfile}`,
    `--platform=${options.platform}`,
    `--format=${options.format}`,
    `--target=${options.target}`,
    '--minify',
    `--main-fields=${options.mainFields.join(',')}`,
    ...Object.entries(options.supported).map(([feature, on]) => `--supported:${feature}=${on}`),
    ...Object.entries(options.alias).map(([name, target]) => `--alias:${name}=${target}`),
    `--log-level=${options.logLevel}`,
  ];
  return args.map((arg) => `'${arg.replaceAll("'", `'\\''`)}'`).join(' ');
}
