import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import { lambdaBuildOptions } from '../../infra/bundling';
import { CONFIG_DEFAULTS } from '../../lambda/config';
import { localAwsEnvironment, startLocalDynamoDb } from '../../local/dynamodb-local';
import { startLocalSecretsManager } from '../../local/secrets-manager-local';
import { startTokenServer, type TokenServer } from '../support/token-server';
import { synthesize } from './stack-fixture';

const run = promisify(execFile);

const CLIENT_ID = 'bundle-test-client';
const CLIENT_SECRET = 'bundle-test-secret-1f3c';
const BASIC_CREDENTIALS = Buffer.from(`${CLIENT_ID}:${CLIENT_SECRET}`).toString('base64');

let assemblyDir: string;
let assetDir: string;
let scratch: string;
let server: TokenServer;

beforeAll(async () => {
  const { app } = synthesize({}, { bundle: true });
  const assembly = app.synth();
  assemblyDir = assembly.directory;
  const assets = readdirSync(assembly.directory).filter((name) => name.startsWith('asset.'));
  expect(assets).toHaveLength(1);
  assetDir = path.join(assembly.directory, assets[0] as string);
  scratch = mkdtempSync(path.join(tmpdir(), 'bundle-test-'));
  server = await startTokenServer();
}, 60_000);

afterAll(async () => {
  await server?.close();
  for (const dir of [scratch, assemblyDir]) if (dir) rmSync(dir, { recursive: true, force: true });
});

const readAsset = (name: string): string => readFileSync(path.join(assetDir, name), 'utf8');
const sourcesOf = (map: string): string[] => (JSON.parse(map) as { sources: string[] }).sources;
/** The npm packages the bundle is made of, read from its source map. */
const bundledPackages = (): Set<string> =>
  new Set(
    sourcesOf(readAsset('index.js.map'))
      .map((source) => /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(source)?.[1])
      .filter((name): name is string => name !== undefined),
  );
// The deployed bundle's size budget (docs/DESIGN.md).
const BUNDLE_BUDGET_BYTES = 250 * 1024;

/**
 * Loads a bundle in a fresh Node.js process with `DEBUG=*` (and `env`), as the Lambda runtime would with
 * those variables set, and sends one token request to the local token server through its handler. The
 * process lives on `lingerMs` after the answer, as an instance does: work the answer did not wait for
 * (a table write slower than the hedge) ends within the request's deadline.
 */
async function exchangeThroughBundle(
  bundle: string,
  env: Record<string, string> = {},
  lingerMs = 0,
): Promise<{ output: string; statusCode: number; cache?: string }> {
  const event = {
    version: '2.0',
    routeKey: 'POST /v1/oauth/token',
    rawPath: '/v1/oauth/token',
    rawQueryString: '',
    headers: { 'content-type': 'application/json' },
    requestContext: { requestId: 'bundle-test', http: { method: 'POST', path: '/v1/oauth/token' } },
    isBase64Encoded: false,
    body: JSON.stringify({ client_id: CLIENT_ID, client_secret: CLIENT_SECRET, access_token_url: `${server.origin}/token` }),
  };
  const driver = `require(${JSON.stringify(bundle)}).handler(${JSON.stringify(event)}, { awsRequestId: 'bundle-test' })
    .then((result) => { process.stdout.write('\\nSTATUS ' + result.statusCode + ' ' + result.headers['x-token-cache'] + '\\n');
      setTimeout(() => process.exit(0), ${lingerMs}); });`;
  const { stdout, stderr } = await run(process.execPath, ['-e', driver], {
    env: { PATH: process.env.PATH, DEBUG: '*', LOG_LEVEL: 'DEBUG', TOKEN_URL_ALLOWLIST: server.origin, ...env },
    timeout: 20_000,
  });
  const status = /\nSTATUS (\d+) (\S+)\n/.exec(stdout);
  return { output: stdout + stderr, statusCode: Number(status?.[1]), cache: status?.[2] };
}

describe('the function bundle NodejsFunction builds', () => {
  it('is one minified file beside its source map', () => {
    const files = readdirSync(assetDir).sort();
    const code = readAsset('index.js');

    expect(files).toEqual(['index.js', 'index.js.map']);
    expect(code.trimEnd().endsWith('//# sourceMappingURL=index.js.map')).toBe(true);
    expect(code.split('\n').length).toBeLessThan(100);
  });

  it('is byte for byte what lambdaBuildOptions builds (the bundle benchmarks and tests use)', async () => {
    const outfile = path.join(scratch, 'reference', 'index.js');
    await build(lambdaBuildOptions(outfile));

    expect(readAsset('index.js')).toBe(readFileSync(outfile, 'utf8'));
  });

  it('holds no AWS SDK, and loads no file but itself, even with the shared cache', async () => {
    const bundle = path.join(assetDir, 'index.js');
    const driver = `require(${JSON.stringify(bundle)}); process.stdout.write(JSON.stringify(Object.keys(require.cache)));`;
    const shared = {
      TOKEN_CACHE: 'shared',
      TOKEN_CACHE_TABLE: 'token-cache',
      TOKEN_CACHE_PEPPER_SECRET: 'pepper',
      AWS_REGION: 'us-east-1',
      // The start refuses the shared cache without credentials; these reach nothing (the endpoint is port 9).
      AWS_ACCESS_KEY_ID: 'local',
      AWS_SECRET_ACCESS_KEY: 'local',
    };
    const { stdout } = await run(process.execPath, ['-e', driver], {
      env: { PATH: process.env.PATH, ...shared, AWS_ENDPOINT_URL: 'http://127.0.0.1:9' },
      timeout: 20_000,
    });

    expect([...bundledPackages()].filter((name) => name.startsWith('@aws-sdk/') || name.startsWith('@smithy/'))).toEqual([]);
    expect((JSON.parse(stdout) as string[]).map((file) => path.basename(file))).toEqual(['index.js']);
  });

  it('serves the shared cache through its own AWS calls: a second instance answers from the table', async () => {
    // Prepare: the table and the pepper on loopback, reached through the standard variables
    const table = await startLocalDynamoDb({ tableName: 'bundle-test-cache' });
    const secrets = await startLocalSecretsManager({ 'bundle-test-pepper': 'p'.repeat(64) });
    const env = {
      ...localAwsEnvironment({ dynamoDb: table.endpoint, secretsManager: secrets.endpoint }),
      TOKEN_CACHE: 'shared',
      TOKEN_CACHE_TABLE: 'bundle-test-cache',
      TOKEN_CACHE_PEPPER_SECRET: 'bundle-test-pepper',
    };
    const before = server.received.length;

    // Act: two instances, one after the other, each a fresh process
    const first = await exchangeThroughBundle(path.join(assetDir, 'index.js'), env, CONFIG_DEFAULTS.upstreamTimeoutMs);
    const second = await exchangeThroughBundle(path.join(assetDir, 'index.js'), env);
    await Promise.all([table.close(), secrets.close()]);

    // Assess
    expect([first.statusCode, first.cache, second.statusCode, second.cache]).toEqual([200, 'miss', 200, 'hit']);
    expect(server.received.length - before).toBe(1);
    expect(second.output).not.toContain('cache_error');
  });

  it('stays within its 250 KiB budget', () => {
    expect(statSync(path.join(assetDir, 'index.js')).size).toBeLessThanOrEqual(BUNDLE_BUDGET_BYTES);
  });

  it('holds simple-oauth2 and wreck, and not joi, whose schema check the exchange skips', () => {
    const packages = bundledPackages();

    expect(['simple-oauth2', '@hapi/wreck', 'joi'].map((name) => [name, packages.has(name)])).toEqual([
      ['simple-oauth2', true],
      ['@hapi/wreck', true],
      ['joi', false],
    ]);
  });

  it('holds lambda/bundle/silent-debug.ts in place of the debug package', () => {
    const sources = sourcesOf(readAsset('index.js.map'));

    expect(sources.filter((source) => /(^|\/)node_modules\/debug\//.test(source))).toEqual([]);
    expect(sources).toContainEqual(expect.stringMatching(/(^|\/)lambda\/bundle\/silent-debug\.ts$/));
  });

  it('holds lambda/bundle/deferred-zlib.ts in place of zlib, so loading it leaves node:zlib unloaded', async () => {
    const bundle = path.join(assetDir, 'index.js');
    const driver = `require('node:https'); const before = process.moduleLoadList.length;
      require(${JSON.stringify(bundle)}); process.stdout.write(JSON.stringify(process.moduleLoadList.slice(before)));`;
    const { stdout } = await run(process.execPath, ['-e', driver], { env: { PATH: process.env.PATH }, timeout: 20_000 });
    const loaded = JSON.parse(stdout) as string[];

    expect(sourcesOf(readAsset('index.js.map'))).toContainEqual(expect.stringMatching(/(^|\/)lambda\/bundle\/deferred-zlib\.ts$/));
    // The control: the bundle's other built-ins show up in the list.
    expect(loaded).toContain('NativeModule http');
    expect(loaded.filter((name) => /\bzlib\b/.test(name))).toEqual([]);
  });

  it('answers a token request without printing the client secret, even with DEBUG=* set', async () => {
    const { output, statusCode } = await exchangeThroughBundle(path.join(assetDir, 'index.js'));

    expect(statusCode).toBe(200);
    expect(output).toContain('"message":"token request"');
    expect(server.received.at(-1)?.headers.authorization).toBe(`Basic ${BASIC_CREDENTIALS}`);
    expect(output).not.toContain(BASIC_CREDENTIALS);
    expect(output).not.toContain(CLIENT_SECRET);
  });

  it('prints no Basic header under DEBUG=* even when bundled without the alias (lambda/ silences simple-oauth2 itself)', async () => {
    const outfile = path.join(scratch, 'unaliased', 'index.js');
    await build({ ...lambdaBuildOptions(outfile), alias: {} });

    const { output, statusCode } = await exchangeThroughBundle(outfile);

    expect(statusCode).toBe(200);
    expect(output).toContain('"message":"token request"');
    expect(output).not.toContain(BASIC_CREDENTIALS);
    expect(output).not.toContain(CLIENT_SECRET);
  });
});
