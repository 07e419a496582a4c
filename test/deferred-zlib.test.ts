import * as zlib from 'node:zlib';
import deferredZlib = require('../lambda/bundle/deferred-zlib');

// lambda/bundle/deferred-zlib.ts stands in for `zlib` in the deployed bundle (infra/bundling.ts); that the
// bundle holds it and leaves node:zlib unloaded is tested in test/infra/lambda-bundle.test.ts.
describe('deferred-zlib.ts, which stands in for zlib in the deployed bundle', () => {
  it("hands out node:zlib's own functions and constants", () => {
    expect(deferredZlib.createGunzip).toBe(zlib.createGunzip);
    expect(deferredZlib.constants).toBe(zlib.constants);
  });

  it('gunzips what node:zlib gzipped, as wreck does with its gunzip option', async () => {
    const gunzip = deferredZlib.createGunzip();
    const chunks: Buffer[] = [];
    gunzip.on('data', (chunk: Buffer) => chunks.push(chunk));
    gunzip.end(zlib.gzipSync('{"access_token":"x"}'));
    await new Promise((resolve) => gunzip.on('end', resolve));

    expect(Buffer.concat(chunks).toString()).toBe('{"access_token":"x"}');
  });
});
