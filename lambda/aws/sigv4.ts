import { createHash, createHmac } from 'node:crypto';

/** The role's credentials, as Lambda puts them in the function's environment. */
export interface AwsCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  /** Present for temporary credentials (a role's always are). */
  readonly sessionToken: string | undefined;
}

/** What a JSON-protocol call signs: a POST to `/` of `host` with these headers (names in lower case) and this body. */
export interface SignedPost {
  readonly host: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

const sha256Hex = (data: string): string => createHash('sha256').update(data, 'utf8').digest('hex');
const hmac = (key: string | Buffer, data: string): Buffer => createHmac('sha256', key).update(data, 'utf8').digest();

/**
 * Signature Version 4 of a POST to `/` with no query (every call here is one), for `service` in
 * `region` at `now` (epoch ms): the headers to send, `authorization` and `x-amz-date` added, and
 * `x-amz-security-token` for temporary credentials. Every header given is signed, with `host`.
 */
export function signPost(
  post: SignedPost,
  credentials: AwsCredentials,
  service: string,
  region: string,
  now: number,
): Record<string, string> {
  const amzDate = new Date(now).toISOString().replace(/[-:]|\.\d{3}/g, '');
  const day = amzDate.slice(0, 8);
  const headers: Record<string, string> = { ...post.headers, host: post.host, 'x-amz-date': amzDate };
  if (credentials.sessionToken !== undefined) headers['x-amz-security-token'] = credentials.sessionToken;
  const names = Object.keys(headers).sort();
  const canonicalHeaders = names.map((name) => `${name}:${String(headers[name]).trim().replace(/\s+/g, ' ')}\n`).join('');
  const signedHeaders = names.join(';');
  const canonicalRequest = ['POST', '/', '', canonicalHeaders, signedHeaders, sha256Hex(post.body)].join('\n');
  const scope = `${day}/${region}/${service}/aws4_request`;
  const stringToSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256Hex(canonicalRequest)].join('\n');
  const key = hmac(hmac(hmac(hmac(`AWS4${credentials.secretAccessKey}`, day), region), service), 'aws4_request');
  const signature = createHmac('sha256', key).update(stringToSign, 'utf8').digest('hex');
  headers.authorization = `AWS4-HMAC-SHA256 Credential=${credentials.accessKeyId}/${scope}, SignedHeaders=${signedHeaders}, Signature=${signature}`;
  return headers;
}
