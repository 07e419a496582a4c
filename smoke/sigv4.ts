import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto';
import { defaultProvider } from '@aws-sdk/credential-provider-node';
import { SignatureV4 } from '@smithy/signature-v4';

type SourceData = string | ArrayBuffer | ArrayBufferView;

const bytes = (data: SourceData): Buffer =>
  typeof data === 'string'
    ? Buffer.from(data, 'utf8')
    : ArrayBuffer.isView(data)
      ? Buffer.from(data.buffer, data.byteOffset, data.byteLength)
      : Buffer.from(data);

/** SHA-256, or HMAC-SHA-256 given a secret, from node:crypto, in the shape SignatureV4 asks for. */
export class NodeSha256 {
  private hash: Hash | Hmac;

  constructor(private readonly secret?: SourceData) {
    this.hash = this.fresh();
  }

  update(data: SourceData): void {
    this.hash.update(bytes(data));
  }

  digest(): Promise<Uint8Array> {
    return Promise.resolve(new Uint8Array(this.hash.digest()));
  }

  reset(): void {
    this.hash = this.fresh();
  }

  private fresh(): Hash | Hmac {
    return this.secret === undefined ? createHash('sha256') : createHmac('sha256', bytes(this.secret));
  }
}

/** What is signed: the request as it will be sent. */
export interface RequestToSign {
  readonly method: string;
  readonly url: URL;
  readonly headers: Record<string, string>;
  readonly body: string;
}

/** Adds the SigV4 headers (`authorization`, `x-amz-date`, and `x-amz-security-token` for temporary credentials). */
export type Signer = (request: RequestToSign) => Promise<Record<string, string>>;

/**
 * SigV4 for API Gateway (`execute-api`) with credentials from the AWS SDK's default chain: the
 * environment, the shared config and credentials files (profiles, SSO), a container or instance role.
 */
export function sigV4Signer(region: string): Signer {
  const signer = new SignatureV4({ service: 'execute-api', region, credentials: defaultProvider(), sha256: NodeSha256 });
  return async ({ method, url, headers, body }) => {
    const signed = await signer.sign({
      method,
      protocol: url.protocol,
      hostname: url.hostname,
      port: url.port === '' ? undefined : Number(url.port),
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      // `host` is signed as the request will carry it: with the port when it is not the scheme's default.
      headers: { ...headers, host: url.host },
      body,
    });
    return signed.headers;
  };
}

/**
 * The region to sign for: read from an `execute-api` host name
 * (`{api-id}.execute-api.{region}.amazonaws.com`), else the one given (AWS_REGION), else none.
 */
export function signingRegion(url: URL, configured: string | undefined): string | undefined {
  return /^[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$/.exec(url.hostname)?.[1] ?? configured;
}
