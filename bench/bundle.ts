import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { type BuildOptions, build } from 'esbuild';
import { lambdaBuildOptions } from '../infra/bundling';

const ROOT = join(__dirname, '..');

export interface BundleFacts {
  readonly path: string;
  readonly bytes: number;
  readonly gzipBytes: number;
  readonly mapBytes: number;
  /** Bytes of minified output per npm package (own code under `lambda/`), largest first. */
  readonly byPackage: ReadonlyArray<readonly [string, number]>;
}

/** The deployed bundle, built with the very options the CDK stack uses. */
export async function buildLambdaBundle(dir: string): Promise<BundleFacts> {
  const path = join(dir, 'lambda', 'index.js');
  const { metafile } = await build({ ...lambdaBuildOptions(path), metafile: true });
  const output = Object.values(metafile.outputs).find((candidate) => candidate.entryPoint !== undefined);
  if (!output) throw new Error('esbuild produced no entry output');
  const byPackage = new Map<string, number>();
  for (const [input, { bytesInOutput }] of Object.entries(output.inputs)) {
    const name = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(input)?.[1] ?? 'lambda/ (own code)';
    byPackage.set(name, (byPackage.get(name) ?? 0) + bytesInOutput);
  }
  const code = readFileSync(path);
  return {
    path,
    bytes: code.length,
    gzipBytes: gzipSync(code, { level: 9 }).length,
    mapBytes: statSync(`${path}.map`).size,
    byPackage: [...byPackage].sort((a, b) => b[1] - a[1]),
  };
}

export interface Workers {
  readonly warm: string;
  readonly cold: string;
  /** Built from lambda/ sources with the deployed options, since it calls the handler's parts. */
  readonly phases: string;
}

/** The measuring processes as plain JavaScript, so they start as `node file.js` with no loader. */
export async function buildWorkers(dir: string): Promise<Workers> {
  const outdir = join(dir, 'workers');
  const source = (name: string): string => join(__dirname, 'workers', `${name}.ts`);
  const phases = join(outdir, 'phases.js');
  await Promise.all([
    build({
      entryPoints: { warm: source('warm'), cold: source('cold') },
      outdir,
      bundle: true,
      platform: 'node',
      format: 'cjs',
      target: 'node20',
      logLevel: 'warning',
    }),
    build({ ...lambdaBuildOptions(phases), entryPoints: [source('phases')], sourcemap: false }),
  ]);
  return { warm: join(outdir, 'warm.js'), cold: join(outdir, 'cold.js'), phases };
}

/**
 * What each part of the bundle costs to load: each built alone with the deployed options. Built-in
 * modules count wherever they are first required, so parts overlap and do not add up to the whole.
 */
const LOAD_PROBES = {
  'node:https (built-in; the floor loads only this)': "require('node:https');",
  '@aws-lambda-powertools/logger + metrics': "require('@aws-lambda-powertools/logger'); require('@aws-lambda-powertools/metrics');",
  'simple-oauth2 client + grant (@hapi/wreck, hoek, boom, bourne)':
    "require('simple-oauth2/lib/client'); require('simple-oauth2/lib/client-credentials-grant-type');",
  'ipaddr.js': "require('ipaddr.js');",
  'node:zlib (built-in; @hapi/wreck requires it)': "require('node:zlib');",
  'node:crypto (built-in; token cache and Powertools require it)': "require('node:crypto');",
} as const;

export async function buildLoadProbes(dir: string): Promise<Record<string, string>> {
  const built = await Promise.all(
    Object.entries(LOAD_PROBES).map(async ([name, contents], index) => {
      const outfile = join(dir, 'probes', `probe-${index}.js`);
      const { entryPoints: _entry, ...options } = lambdaBuildOptions(outfile);
      const probe: BuildOptions = { ...options, sourcemap: false, stdin: { contents, resolveDir: ROOT, loader: 'js' } };
      await build(probe);
      return [name, outfile] as const;
    }),
  );
  return Object.fromEntries(built);
}
