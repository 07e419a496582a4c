import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { build, type Metafile } from 'esbuild';
import { lambdaBuildOptions } from '../infra/bundling';
import { tokenEvent } from './support/events';
import { DEMO_TOKEN, json, startTokenServer, type TokenServer } from './support/token-server';

const run = promisify(execFile);
const SECRET = 'bundle-test-secret';
let outdir: string;
let bundle: string;
let metafile: Metafile;
let server: TokenServer;

beforeAll(async () => {
  outdir = mkdtempSync(path.join(tmpdir(), 'token-exchange-bundle-'));
  bundle = path.join(outdir, 'index.js');
  metafile = (await build({ ...lambdaBuildOptions(bundle), metafile: true, logLevel: 'silent' })).metafile;
  server = await startTokenServer(json(200, DEMO_TOKEN));
});

afterAll(async () => {
  await server.close();
  rmSync(outdir, { recursive: true, force: true });
});

const bundledPackages = () =>
  Object.keys(metafile.inputs)
    .map((input) => /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(input)?.[1])
    .filter((name): name is string => name !== undefined);

describe('the deployed bundle', () => {
  it('contains simple-oauth2 but neither joi nor the debug package', () => {
    const packages = new Set(bundledPackages());

    expect(packages.has('simple-oauth2')).toBe(true);
    expect(packages.has('@hapi/wreck')).toBe(true);
    expect(packages.has('joi')).toBe(false);
    expect(packages.has('debug')).toBe(false);
  });

  it('prints no secret and no Basic header even with DEBUG=* in its environment', async () => {
    // Prepare: invoke the bundle's handler in a fresh process, as the Lambda runtime would
    const event = tokenEvent({ client_id: 'bundle-client', client_secret: SECRET, access_token_url: `${server.origin}/token` });
    const script = `require(${JSON.stringify(bundle)}).handler(${JSON.stringify(event)}, { awsRequestId: 'r1' })
      .then((result) => process.stdout.write('RESULT ' + JSON.stringify(result) + '\\n'))`;

    // Act
    const { stdout, stderr } = await run(process.execPath, ['-e', script], {
      env: { PATH: process.env.PATH, DEBUG: '*', NODE_DEBUG: '', TOKEN_URL_ALLOWLIST: server.origin, LOG_LEVEL: 'TRACE' },
      timeout: 20_000,
    });

    // Assess: it really exchanged, and nothing secret came out
    const result = JSON.parse(
      stdout
        .split('\n')
        .find((line) => line.startsWith('RESULT '))
        ?.slice(7) ?? '{}',
    ) as { statusCode?: number };
    expect(result.statusCode).toBe(200);
    expect(server.received.at(-1)?.headers.authorization).toMatch(/^Basic /);
    const output = stdout.replace(/^RESULT .*$/m, '') + stderr;
    expect(output).toContain('"outcome":"ok"');
    expect(output).not.toContain(SECRET);
    expect(output).not.toContain('Basic ');
    expect(output).not.toContain(Buffer.from(`bundle-client:${SECRET}`).toString('base64'));
  });
});
