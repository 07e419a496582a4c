import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { build, type Metafile } from 'esbuild';
import { lambdaBuildOptions } from '../infra/bundling';

let outdir: string;
let bundle: string;
let metafile: Metafile;

beforeAll(async () => {
  outdir = mkdtempSync(path.join(tmpdir(), 'token-exchange-bundle-'));
  bundle = path.join(outdir, 'index.js');
  metafile = (await build({ ...lambdaBuildOptions(bundle), metafile: true, logLevel: 'silent' })).metafile;
});

afterAll(() => {
  rmSync(outdir, { recursive: true, force: true });
});

const bundledPackages = () =>
  Object.keys(metafile.inputs)
    .map((input) => /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(input)?.[1])
    .filter((name): name is string => name !== undefined);

// What the bundle is made of. That DEBUG=* cannot make it print a secret is shown on the asset CDK
// synthesizes, in test/infra/lambda-bundle.test.ts.
describe('the deployed bundle', () => {
  it('contains simple-oauth2 but neither joi nor the debug package', () => {
    const packages = new Set(bundledPackages());

    expect(packages.has('simple-oauth2')).toBe(true);
    expect(packages.has('@hapi/wreck')).toBe(true);
    expect(packages.has('joi')).toBe(false);
    expect(packages.has('debug')).toBe(false);
  });

  // Every byte is parsed at each cold start; `npm run bench` reports the size, this holds the budget.
  it('stays within its 250 KiB budget, minified', () => {
    expect(statSync(bundle).size).toBeLessThanOrEqual(250 * 1024);
  });
});
