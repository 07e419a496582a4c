import * as zlib from 'node:zlib';
import { crc32 } from '../lambda/bundle/sdk-zlib';

// lambda/bundle/sdk-zlib.ts stands in for node:zlib in aws-sdk.js (infra/bundling.ts); that loading
// that file leaves node:zlib unloaded is tested in test/infra/lambda-bundle.test.ts.
describe("sdk-zlib.ts, which stands in for node:zlib in the SDK's file", () => {
  it("computes node:zlib's CRC-32, continued from a previous value as the SDK's checksum does", () => {
    const [head, tail] = [Buffer.from('{"Item":'), Buffer.from('{"k":{"S":"v"}}}')];

    expect(crc32(head)).toBe(zlib.crc32(head));
    expect(crc32(tail, crc32(head))).toBe(zlib.crc32(Buffer.concat([head, tail])));
    // The control: a different input gives a different checksum.
    expect(crc32(tail)).not.toBe(crc32(head));
  });
});
