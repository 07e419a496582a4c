import { randomBytes, verify, type JsonWebKey } from 'node:crypto';
import { loadConfig } from '../../lambda/config';
import { createHandler, type TokenHandler } from '../../lambda/handler';
import { PREFETCH_LIMIT } from '../../lambda/credentials/stored-credentials';
import { powertoolsObservability } from '../../lambda/observability';
import { destroyAgents } from '../../lambda/upstream/guarded-agents';
import type { LocalKey } from '../../local/kms-local';
import { decodeJws } from '../support/caller-assertions';
import { capturingOutput } from '../support/captured-output';
import { CREDENTIAL_NOT_ALLOWED_DESCRIPTION } from '../support/contract';
import { CALLER, CALLER_ROLE, type CredentialSources, startCredentialSources, storedCredentials } from '../support/credential-sources';
import { bodyOf, formEvent, PAYLOAD_FORMATS, recordingObservability, tokenEvent } from '../support/events';
import { basicCredentials, issuingIdp } from '../support/fleet';
import { DEMO_TOKEN, json, startTokenServer, type TokenServer } from '../support/token-server';

// Stored credentials through the handler, with TOKEN_CACHE off: the caller names a credential and
// is signed in with IAM; the broker reads the secret from Secrets Manager or signs in KMS (loopback
// stand-ins, reached by the real SDK clients) and posts to a scripted token server that records
// what it received.

const SECRET = `stored-secret-${randomBytes(12).toString('hex')}`;
const JWT_BEARER = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
const REFUSED = { code: 'credential_not_allowed', description: CREDENTIAL_NOT_ALLOWED_DESCRIPTION };

let server: TokenServer;
let sources: CredentialSources;
let rsaKey: LocalKey;
let ecKey: LocalKey;

beforeAll(async () => {
  server = await startTokenServer();
  sources = await startCredentialSources();
  rsaKey = sources.kms.createKey('RSA_2048');
  ecKey = sources.kms.createKey('ECC_NIST_P256');
});

beforeEach(() => {
  server.answer(json(200, DEMO_TOKEN));
  server.received.length = 0;
});

afterAll(async () => {
  destroyAgents();
  await Promise.all([server.close(), sources.close()]);
});

const tokenUrl = () => `${server.origin}/token`;
/** A secret in the Secrets Manager stand-in, under a name of its own, so its reads can be counted. */
const secretNamed = (value: string | Uint8Array = SECRET): string => {
  const id = `orders/${randomBytes(4).toString('hex')}`;
  sources.secrets.set(id, value);
  return id;
};
const readsOf = (secretId: string) => sources.secrets.reads.filter((id) => id === secretId).length;
const secretEntry = (overrides: Record<string, unknown> = {}) => ({
  name: 'orders',
  clientId: 'orders-client',
  tokenUrl: tokenUrl(),
  method: 'client_secret_basic',
  secretId: secretNamed(),
  ...overrides,
});
const keyEntry = (key: LocalKey, overrides: Record<string, unknown> = {}) => ({
  name: 'keyless',
  clientId: 'keyless-client',
  tokenUrl: tokenUrl(),
  method: 'private_key_jwt',
  keyId: key.arn,
  ...overrides,
});

/** Resolves once `done` holds, checking every 10 ms; fails the test after 5 s. */
async function until(done: () => boolean): Promise<void> {
  for (let waited = 0; !done(); waited += 10) {
    if (waited > 5000) throw new Error('the condition never held');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

function handlerFor(entries: Record<string, unknown>[], env: Record<string, string> = {}) {
  const observed = recordingObservability();
  const handle = createHandler(
    loadConfig({ TOKEN_URL_ALLOWLIST: server.origin, STORED_CREDENTIALS: storedCredentials(...entries), ...env }),
    observed,
  );
  return { handle, records: observed.records };
}

/** A request as API Gateway hands it over after IAM authorization: `null` for one without a verified caller. */
const ask = (body: Record<string, unknown>, iamCaller: string | null = CALLER) => tokenEvent(body, iamCaller === null ? {} : { iamCaller });
const jwksEvent = (path = '/.well-known/jwks.json') => tokenEvent(undefined, { method: 'GET', path, contentType: null });

async function jwksOf(handle: TokenHandler): Promise<JsonWebKey[]> {
  return (bodyOf(await handle(jwksEvent())) as { keys: JsonWebKey[] }).keys;
}

/** Whether a compact JWS verifies under a key of the JWK Set its header's kid names (RS256 or ES256). */
function verifiesWith(jws: string, keys: JsonWebKey[]): boolean {
  const [header = '', claims = '', signature = ''] = jws.split('.');
  const { kid, alg } = decodeJws(jws).header;
  const key = keys.find((candidate) => (candidate as { kid?: string }).kid === kid);
  if (!key) return false;
  const dsaEncoding = alg === 'ES256' ? 'ieee-p1363' : undefined;
  return verify('sha256', Buffer.from(`${header}.${claims}`), { key, format: 'jwk', dsaEncoding }, Buffer.from(signature, 'base64url'));
}

describe('a stored credential whose secret is in Secrets Manager', () => {
  it('gets a token with client_secret_basic and the secret the broker read, the caller sending none', async () => {
    // Prepare
    const { handle, records } = handlerFor([secretEntry()]);

    // Act
    const result = await handle(ask({ credential: 'orders', scope: 'read' }));

    // Assess
    expect(result.statusCode).toBe(200);
    expect(bodyOf(result)).toEqual(DEMO_TOKEN);
    const [received] = server.received;
    expect(basicCredentials(received as never)).toEqual({ clientId: 'orders-client', clientSecret: SECRET });
    expect(Object.fromEntries(received?.form ?? [])).toEqual({ grant_type: 'client_credentials', scope: 'read' });
    expect(records).toMatchObject([{ outcome: 'ok', credential: 'orders', caller: CALLER, idp_status: 200 }]);
  });

  it('posts the id and the secret in the form body with client_secret_post', async () => {
    // Prepare
    const { handle } = handlerFor([secretEntry({ method: 'client_secret_post' })]);

    // Act
    const result = await handle(ask({ credential: 'orders' }));

    // Assess
    expect(result.statusCode).toBe(200);
    expect(server.received[0]?.headers.authorization).toBeUndefined();
    expect(Object.fromEntries(server.received[0]?.form ?? [])).toEqual({
      grant_type: 'client_credentials',
      client_id: 'orders-client',
      client_secret: SECRET,
    });
  });

  it('reads the secret once per instance, as the instance starts', async () => {
    // Prepare
    const entry = secretEntry();
    const { handle } = handlerFor([entry]);
    await until(() => readsOf(entry.secretId) === 1);

    // Act
    for (let i = 0; i < 3; i++) expect((await handle(ask({ credential: 'orders' }))).statusCode).toBe(200);

    // Assess
    expect(server.received).toHaveLength(3);
    expect(readsOf(entry.secretId)).toBe(1);
  });

  it('after a rotation, costs the IdP one refused exchange and the caller nothing', async () => {
    // Prepare: the instance has read the old secret; then the secret and the IdP move to a new one.
    let accepted = SECRET;
    server.answer(issuingIdp({ secret: () => accepted }));
    const entry = secretEntry();
    const { handle, records } = handlerFor([entry]);
    expect((await handle(ask({ credential: 'orders' }))).statusCode).toBe(200);
    accepted = `rotated-${randomBytes(8).toString('hex')}`;
    sources.secrets.set(entry.secretId, accepted);

    // Act
    const afterRotation = await handle(ask({ credential: 'orders' }));
    const next = await handle(ask({ credential: 'orders' }));

    // Assess
    expect([afterRotation.statusCode, next.statusCode]).toEqual([200, 200]);
    expect(server.received.map((request) => basicCredentials(request)?.clientSecret)).toEqual([SECRET, SECRET, accepted, accepted]);
    expect(readsOf(entry.secretId)).toBe(2);
    expect(records.map((record) => record.outcome)).toEqual(['ok', 'ok', 'ok']);
  });

  it('reads a rotated secret once for all the requests the IdP refused at the same time', async () => {
    // Prepare
    let accepted = SECRET;
    server.answer(issuingIdp({ secret: () => accepted }));
    const entry = secretEntry();
    const { handle } = handlerFor([entry]);
    expect((await handle(ask({ credential: 'orders' }))).statusCode).toBe(200);
    accepted = `rotated-${randomBytes(8).toString('hex')}`;
    sources.secrets.set(entry.secretId, accepted);

    // Act
    const answers = await Promise.all([1, 2, 3].map(() => handle(ask({ credential: 'orders' }))));

    // Assess
    expect(answers.map((answer) => answer.statusCode)).toEqual([200, 200, 200]);
    expect(readsOf(entry.secretId)).toBe(2);
    expect(server.received.filter((request) => basicCredentials(request)?.clientSecret === accepted)).toHaveLength(3);
  });

  it('sends a secret of 1024 characters, the longest a client secret may be', async () => {
    // Prepare
    const { handle } = handlerFor([secretEntry({ method: 'client_secret_post', secretId: secretNamed('s'.repeat(1024)) })]);

    // Act
    const result = await handle(ask({ credential: 'orders' }));

    // Assess
    expect(result.statusCode).toBe(200);
    expect(server.received[0]?.form.get('client_secret')).toHaveLength(1024);
  });

  it('answers 504 when the IdP has not answered within what the deadline left after reading the secret', async () => {
    // Prepare
    server.answer((request, response) => {
      setTimeout(() => void json(200, DEMO_TOKEN)(request, response), 1500);
    });
    const { handle, records } = handlerFor([secretEntry()], { UPSTREAM_TIMEOUT_MS: '300' });

    // Act
    const result = await handle(ask({ credential: 'orders' }));

    // Assess
    expect(result.statusCode).toBe(504);
    expect(records[0]).toMatchObject({ outcome: 'upstream_timeout', credential: 'orders' });
    expect(records[0]?.credential_error).toBeUndefined();
  });

  it('answers 401 when the IdP refuses a secret that has not changed, having read it once more', async () => {
    // Prepare
    server.answer(json(401, { error: 'invalid_client' }));
    const entry = secretEntry();
    const { handle } = handlerFor([entry]);

    // Act
    const result = await handle(ask({ credential: 'orders' }));

    // Assess
    expect(result.statusCode).toBe(401);
    expect(server.received).toHaveLength(1);
    expect(readsOf(entry.secretId)).toBe(2);
  });

  it('asks Secrets Manager twice at most for a read it throttles, then answers 502', async () => {
    // Prepare
    const secretId = secretNamed();
    sources.secrets.failWith(secretId, 'ThrottlingException');
    const { handle } = handlerFor([secretEntry({ secretId })]);

    // Act
    const result = await handle(ask({ credential: 'orders' }));
    sources.secrets.failWith(secretId, undefined);

    // Assess
    expect(result.statusCode).toBe(502);
    expect(readsOf(secretId)).toBe(2);
  });

  it.each([
    ['that does not exist', () => 'orders/missing', 'ResourceNotFoundException'],
    ['whose value ends with a line break', () => secretNamed(`${SECRET}\n`), 'SecretUnusable'],
    ['whose value is empty', () => secretNamed(''), 'SecretUnusable'],
    ['of 1025 characters', () => secretNamed('s'.repeat(1025)), 'SecretUnusable'],
    ['that holds bytes, not a string', () => secretNamed(Buffer.from(SECRET)), 'SecretUnusable'],
  ])('answers 502 for a secret %s, naming why in the log line and sending nothing', async (_case, secretId, failure) => {
    // Prepare
    const { handle, records } = handlerFor([secretEntry({ secretId: secretId() })]);

    // Act
    const result = await handle(ask({ credential: 'orders' }));

    // Assess
    expect(result.statusCode).toBe(502);
    expect(bodyOf(result).code).toBe('upstream_error');
    expect(server.received).toEqual([]);
    expect(records).toMatchObject([{ outcome: 'upstream_error', credential: 'orders', credential_error: failure }]);
  });
});

describe('a stored credential whose key is in KMS (private_key_jwt)', () => {
  it.each([
    ['an RSA key, RS256', () => rsaKey, 'RS256', 'RSA'],
    ['a P-256 key, ES256', () => ecKey, 'ES256', 'EC'],
  ])('sends an assertion signed with %s, verifiable with the published JWKS, and no secret', async (_case, key, alg, kty) => {
    // Prepare
    const { handle } = handlerFor([keyEntry(key())]);
    const started = Math.floor(Date.now() / 1000);

    // Act
    const result = await handle(ask({ credential: 'keyless', scope: 'read' }));

    // Assess
    expect(result.statusCode).toBe(200);
    const [received] = server.received;
    expect(received?.headers.authorization).toBeUndefined();
    const form = Object.fromEntries(received?.form ?? []);
    expect(Object.keys(form).sort()).toEqual(['client_assertion', 'client_assertion_type', 'client_id', 'grant_type', 'scope']);
    expect(form).toMatchObject({ client_id: 'keyless-client', client_assertion_type: JWT_BEARER, grant_type: 'client_credentials' });
    const assertion = String(form.client_assertion);
    const keys = await jwksOf(handle);
    expect(keys).toEqual([expect.objectContaining({ kty, alg, use: 'sig' })]);
    expect(verifiesWith(assertion, keys)).toBe(true);
    const { header, claims } = decodeJws(assertion);
    expect(header).toEqual({ alg, typ: 'JWT', kid: (keys[0] as { kid: string }).kid });
    expect(claims).toMatchObject({ iss: 'keyless-client', sub: 'keyless-client', aud: tokenUrl(), jti: expect.any(String) });
    expect(claims.iat).toBeGreaterThanOrEqual(started);
    expect(Number(claims.exp) - Number(claims.iat)).toBe(60);
  });

  it('reads the public key of each key as the instance starts, before any request', async () => {
    // Prepare
    const key = sources.kms.createKey('RSA_2048');
    const readsBefore = sources.kms.calls.filter((call) => call === 'GetPublicKey').length;

    // Act
    handlerFor([keyEntry(key)]);

    // Assess
    await until(() => sources.kms.calls.filter((call) => call === 'GetPublicKey').length === readsBefore + 1);
  });

  it('signs a fresh assertion, with a new jti, for every exchange', async () => {
    // Prepare
    const { handle } = handlerFor([keyEntry(ecKey)]);
    const signsBefore = sources.kms.calls.filter((call) => call === 'Sign').length;

    // Act
    for (let i = 0; i < 3; i++) expect((await handle(ask({ credential: 'keyless' }))).statusCode).toBe(200);

    // Assess
    const assertions = server.received.map((request) => request.form.get('client_assertion') as string);
    expect(new Set(assertions.map((assertion) => decodeJws(assertion).claims.jti)).size).toBe(3);
    expect(sources.kms.calls.filter((call) => call === 'Sign').length - signsBefore).toBe(3);
  });

  it('answers 502 when KMS will not sign, naming its error in the log line and sending nothing', async () => {
    // Prepare
    const { handle, records } = handlerFor([keyEntry(rsaKey)]);
    sources.kms.behave('Sign', { errorType: 'KMSInternalException' });

    // Act
    const result = await handle(ask({ credential: 'keyless' })).finally(() => sources.kms.behave('Sign', {}));

    // Assess
    expect(result.statusCode).toBe(502);
    expect(server.received).toEqual([]);
    expect(records).toMatchObject([{ outcome: 'upstream_error', credential_error: 'KMSInternalException' }]);
  });

  it('answers 504 when KMS has not signed within UPSTREAM_TIMEOUT_MS', async () => {
    // Prepare
    const { handle, records } = handlerFor([keyEntry(rsaKey)], { UPSTREAM_TIMEOUT_MS: '300' });
    expect((await handle(jwksEvent())).statusCode).toBe(200);
    sources.kms.behave('Sign', { delayMs: 1500 });

    // Act
    const result = await handle(ask({ credential: 'keyless' })).finally(() => sources.kms.behave('Sign', {}));

    // Assess
    expect(result.statusCode).toBe(504);
    expect(server.received).toEqual([]);
    expect(records.at(-1)).toMatchObject({ outcome: 'upstream_timeout', credential_error: 'Timeout' });
  });

  it.each([
    ['a secp256k1 key', () => sources.kms.createKey('ECC_SECG_P256K1')],
    ['an RSA key made for encryption', () => sources.kms.createKey('RSA_2048', undefined, 'ENCRYPT_DECRYPT')],
  ])('refuses to sign or publish with %s, which no JWS algorithm of the service fits', async (_case, key) => {
    // Prepare
    const { handle, records } = handlerFor([keyEntry(key())]);

    // Act
    const token = await handle(ask({ credential: 'keyless' }));
    const jwks = await handle(jwksEvent());

    // Assess
    expect([token.statusCode, jwks.statusCode]).toEqual([502, 502]);
    expect(server.received).toEqual([]);
    // The JWKS route's line names the credential whose key it left out.
    expect(records.map((record) => record.credential_error)).toEqual(['KeyNotForSigning', 'keyless: KeyNotForSigning']);
  });

  it('asks KMS twice at most for a read it throttles, then answers 502', async () => {
    // Prepare
    sources.kms.behave('GetPublicKey', { errorType: 'ThrottlingException' });
    const before = sources.kms.calls.length;
    const { handle } = handlerFor([keyEntry(rsaKey)]);

    // Act
    const result = await handle(jwksEvent());
    sources.kms.behave('GetPublicKey', {});

    // Assess
    expect(result.statusCode).toBe(502);
    expect(sources.kms.calls.slice(before)).toEqual(['GetPublicKey', 'GetPublicKey']);
  });

  it('publishes the key once KMS gives it, after failing while it would not', async () => {
    // Prepare: the read as the instance starts fails, and is not kept.
    sources.kms.behave('GetPublicKey', { errorType: 'KMSInternalException' });
    const { handle } = handlerFor([keyEntry(rsaKey)]);
    const failed = await handle(jwksEvent());
    sources.kms.behave('GetPublicKey', {});

    // Act
    const published = await handle(jwksEvent());

    // Assess
    expect([failed.statusCode, published.statusCode]).toEqual([502, 200]);
    expect((bodyOf(published).keys as unknown[]).length).toBe(1);
  });
});

describe('a stored credential whose key KMS cannot give', () => {
  it('publishes the keys it can, kept 30 s instead of 5 minutes, and names the credential whose key it left out, never the key', async () => {
    // Prepare
    const { handle, records } = handlerFor([keyEntry(rsaKey), keyEntry(ecKey, { name: 'typo', keyId: 'alias/no-such-key' })]);

    // Act
    const result = await handle(jwksEvent());

    // Assess
    expect(result.statusCode).toBe(200);
    expect(result.headers['cache-control']).toBe('public, max-age=30');
    expect((bodyOf(result).keys as { kty: string }[]).map((key) => key.kty)).toEqual(['RSA']);
    expect(records[0]).toMatchObject({ outcome: 'ok', status: 200, credential_error: 'typo: NotFoundException' });
    expect(JSON.stringify(records)).not.toContain('alias/no-such-key');
  });

  it('answers 504 when no key came within UPSTREAM_TIMEOUT_MS', async () => {
    // Prepare
    sources.kms.behave('GetPublicKey', { delayMs: 1500 });
    const { handle, records } = handlerFor([keyEntry(rsaKey)], { UPSTREAM_TIMEOUT_MS: '200' });

    // Act
    const result = await handle(jwksEvent());
    sources.kms.behave('GetPublicKey', {});

    // Assess
    expect(result.statusCode).toBe(504);
    expect(records[0]).toMatchObject({ outcome: 'upstream_timeout', credential_error: 'keyless: Timeout' });
  });

  it('answers 502 without asking KMS for a key whose ARN names another region, which KMS in this one never finds', async () => {
    // Prepare
    const { handle, records } = handlerFor([keyEntry(rsaKey, { keyId: rsaKey.arn.replace(':us-east-1:', ':eu-west-1:') })]);
    const calls = sources.kms.calls.length;

    // Act
    const token = await handle(ask({ credential: 'keyless' }));
    const jwks = await handle(jwksEvent());

    // Assess
    expect([token.statusCode, jwks.statusCode]).toEqual([502, 502]);
    expect(records.map((record) => record.credential_error)).toEqual(['KeyInAnotherRegion', 'keyless: KeyInAnotherRegion']);
    expect(sources.kms.calls.length).toBe(calls);
    expect(server.received).toEqual([]);
  });
});

describe('reading secrets and keys as the instance starts', () => {
  const entries = (count: number) =>
    Array.from({ length: count }, (_, i) => (i === 0 ? keyEntry(rsaKey, { name: 'key-0' }) : secretEntry({ name: `secret-${i}` })));
  const readsOfAll = (credentials: Record<string, unknown>[]) =>
    credentials.filter(({ secretId }) => typeof secretId === 'string' && readsOf(secretId) > 0).length;

  it(`reads every one of ${PREFETCH_LIMIT} secrets and keys before any request`, async () => {
    // Prepare
    const credentials = entries(PREFETCH_LIMIT);
    const calls = sources.kms.calls.length;

    // Act
    handlerFor(credentials);

    // Assess
    await until(() => readsOfAll(credentials) === PREFETCH_LIMIT - 1 && sources.kms.calls.length > calls);
  });

  it(`reads none of ${PREFETCH_LIMIT + 1} before a request needs it: each one as it is first needed`, async () => {
    // Prepare
    const credentials = entries(PREFETCH_LIMIT + 1);
    const calls = sources.kms.calls.length;
    const { handle } = handlerFor(credentials);

    // Act: by the time this answer comes, reads sent as the instance started would have arrived.
    expect((await handle(ask({ credential: 'secret-1' }))).statusCode).toBe(200);

    // Assess
    expect(readsOfAll(credentials)).toBe(1);
    expect(sources.kms.calls.length).toBe(calls);
  });
});

describe.each(PAYLOAD_FORMATS)('the access policy of a stored credential, through the $name', ({ as }) => {
  const asked = (...args: Parameters<typeof ask>) => as(ask(...args));
  const restricted = () =>
    secretEntry({ scopes: ['read', 'write'], audience: 'https://orders.example.com', resource: 'https://orders.example.com/api' });

  it.each<[string, Record<string, unknown>, string | null]>([
    ['an unknown name', { credential: 'billing' }, CALLER],
    ['no IAM caller', { credential: 'orders' }, null],
    ['a caller no pattern admits', { credential: 'orders' }, 'arn:aws:sts::123456789012:assumed-role/billing-service/s'],
    ['the same role name in another account', { credential: 'orders' }, 'arn:aws:sts::999999999999:assumed-role/orders-service/s'],
    ['a user named like the role', { credential: 'orders' }, 'arn:aws:iam::123456789012:user/orders-service'],
    ['a scope outside its scopes', { credential: 'orders', scope: 'read admin' }, CALLER],
    ['another audience', { credential: 'orders', audience: 'https://billing.example.com' }, CALLER],
    ['another resource', { credential: 'orders', resource: ['https://orders.example.com/api', 'https://billing.example.com/'] }, CALLER],
  ])('refuses %s with the one 403, sending the IdP nothing', async (_case, body, caller) => {
    // Prepare
    const { handle, records } = handlerFor([restricted(), keyEntry(rsaKey)]);
    const signsBefore = sources.kms.calls.filter((call) => call === 'Sign').length;

    // Act
    const result = await handle(asked(body, caller));

    // Assess
    expect(result.statusCode).toBe(403);
    expect(bodyOf(result)).toStrictEqual(REFUSED);
    expect(server.received).toEqual([]);
    expect(sources.kms.calls.filter((call) => call === 'Sign').length).toBe(signsBefore);
    expect(records).toMatchObject([{ outcome: 'credential_not_allowed', credential: body.credential }]);
    expect(records[0]?.caller).toBe(caller ?? undefined);
  });

  it.each<[string, Record<string, unknown>, Record<string, string | string[]>]>([
    [
      'fills in its scopes, audience and resource for a caller that names none',
      { credential: 'orders' },
      { scope: 'read write', audience: 'https://orders.example.com', resource: ['https://orders.example.com/api'] },
    ],
    [
      'sends the scopes, audience and resource the caller names within them',
      { credential: 'orders', scope: ['write'], audience: 'https://orders.example.com', resource: 'https://orders.example.com/api' },
      { scope: 'write', audience: 'https://orders.example.com', resource: ['https://orders.example.com/api'] },
    ],
  ])('%s', async (_case, body, sent) => {
    // Prepare
    const { handle } = handlerFor([restricted()]);

    // Act
    const result = await handle(asked(body));

    // Assess
    expect(result.statusCode).toBe(200);
    const form = server.received[0]?.form;
    expect({ scope: form?.get('scope'), audience: form?.get('audience'), resource: form?.getAll('resource') }).toEqual(sent);
  });

  it('lets a caller name any scope, audience and resource where the credential sets none', async () => {
    // Prepare
    const { handle } = handlerFor([secretEntry()]);

    // Act
    const result = await handle(
      asked({ credential: 'orders', scope: 'admin', audience: 'https://x.example', resource: ['urn:a', 'urn:b'] }),
    );

    // Assess
    expect(result.statusCode).toBe(200);
    expect(server.received[0]?.form.toString()).toBe(
      'grant_type=client_credentials&scope=admin&audience=https%3A%2F%2Fx.example&resource=urn%3Aa&resource=urn%3Ab',
    );
  });

  it.each([
    ['an IAM user by its exact ARN', 'arn:aws:iam::123456789012:user/ops/alice', 'arn:aws:iam::123456789012:user/ops/alice'],
    [
      'any session of roles matching a pattern',
      'arn:aws:sts::123456789012:assumed-role/orders-batch/job-7',
      'arn:aws:iam::123456789012:role/orders-*',
    ],
  ])('admits %s', async (_case, caller, pattern) => {
    // Prepare
    const { handle } = handlerFor([secretEntry({ callers: [CALLER_ROLE, pattern] })]);

    // Act & Assess
    expect((await handle(asked({ credential: 'orders' }, caller))).statusCode).toBe(200);
  });

  it.each([
    ['client_id', { client_id: 'orders-client' }, 'client_id must not be sent with credential'],
    [
      'client_secret and issuer',
      { client_secret: 'x', issuer: 'https://i.example' },
      'client_secret, issuer must not be sent with credential',
    ],
    ['access_token_url', { access_token_url: 'https://evil.example/t' }, 'access_token_url must not be sent with credential'],
    ['client_assertion', { client_assertion: 'a.b.c' }, 'client_assertion, client_assertion_type must not be sent with credential'],
    [
      'token_endpoint_auth_method',
      { token_endpoint_auth_method: 'private_key_jwt' },
      'token_endpoint_auth_method must not be sent with credential',
    ],
    ['basic_credentials_encoding', { basic_credentials_encoding: 'raw' }, 'basic_credentials_encoding must not be sent with credential'],
    ['another grant type', { grant_type: 'password' }, 'grant_type must be client_credentials with credential (or left out)'],
    [
      'a malformed name',
      { credential: 'orders api' },
      'credential must be 1 to 64 letters, digits, . _ or -, starting with a letter or digit',
    ],
    ['a name that is no string', { credential: ['orders'] }, 'credential must be a string'],
  ])('answers 400 for a request by credential with %s, naming it', async (field, extra, description) => {
    // Prepare
    const { handle } = handlerFor([secretEntry()]);
    const body = { credential: 'orders', ...(field === 'client_assertion' ? { client_assertion_type: JWT_BEARER } : {}), ...extra };

    // Act
    const result = await handle(asked(body));

    // Assess
    expect(result.statusCode).toBe(400);
    expect(String(bodyOf(result).description)).toContain(description);
    expect(server.received).toEqual([]);
  });

  it('takes a form body on the unversioned route, scope included', async () => {
    // Prepare
    const { handle } = handlerFor([secretEntry()]);

    // Act
    const result = await handle(as(formEvent({ credential: 'orders', scope: 'read' }, { path: '/oauth/token', iamCaller: CALLER })));

    // Assess
    expect(result.statusCode).toBe(200);
    expect(server.received[0]?.form.get('scope')).toBe('read');
  });

  it('accepts grant_type client_credentials sent as it is meant', async () => {
    const { handle } = handlerFor([secretEntry()]);
    expect((await handle(asked({ credential: 'orders', grant_type: 'client_credentials' }))).statusCode).toBe(200);
  });
});

describe('the JWKS route', () => {
  it('publishes every key a credential signs with, once each, with its public members only, cacheable for 5 minutes', async () => {
    // Prepare: two credentials share the RSA key.
    const { handle, records } = handlerFor([
      keyEntry(rsaKey),
      keyEntry(rsaKey, { name: 'keyless-2' }),
      keyEntry(ecKey, { name: 'keyless-3' }),
    ]);

    // Act
    const result = await handle(jwksEvent());

    // Assess
    expect(result.statusCode).toBe(200);
    expect(result.headers).toEqual({ 'content-type': 'application/json', 'cache-control': 'public, max-age=300' });
    const { keys } = bodyOf(result) as { keys: Record<string, string>[] };
    expect(keys.map((key) => Object.keys(key).sort())).toEqual([
      ['alg', 'e', 'kid', 'kty', 'n', 'use'],
      ['alg', 'crv', 'kid', 'kty', 'use', 'x', 'y'],
    ]);
    expect(records).toMatchObject([{ route: 'GET /.well-known/jwks.json', outcome: 'ok', status: 200 }]);
  });

  it('is served under a named stage too, as API Gateway routes it', async () => {
    // Prepare
    const { handle } = handlerFor([keyEntry(rsaKey)]);
    const event = jwksEvent('/prod/.well-known/jwks.json');
    Object.assign(event, { routeKey: '$default' });
    event.requestContext.stage = 'prod';

    // Act & Assess
    expect((await handle(event)).statusCode).toBe(200);
  });

  it.each([
    ['no credential signs with a key', () => handlerFor([secretEntry()]), jwksEvent()],
    ['the method is POST', () => handlerFor([keyEntry(rsaKey)]), tokenEvent({}, { path: '/.well-known/jwks.json' })],
  ])("is API Gateway's own 404 when %s", async (_case, make, event) => {
    const result = await make().handle(event);
    expect(result.statusCode).toBe(404);
    expect(bodyOf(result)).toEqual({ message: 'Not Found' });
  });
});

describe('what a stored credential leaves in the logs', () => {
  it('names the credential and the caller, never the secret or the assertion, and counts requests by credential', async () => {
    // Prepare
    const config = loadConfig({
      TOKEN_URL_ALLOWLIST: server.origin,
      LOG_LEVEL: 'DEBUG',
      STORED_CREDENTIALS: storedCredentials(secretEntry(), keyEntry(rsaKey)),
    });

    // Act
    const { output } = await capturingOutput(async () => {
      const handle = createHandler(config, powertoolsObservability('DEBUG'));
      await handle(ask({ credential: 'orders' }));
      await handle(ask({ credential: 'keyless' }));
      await handle(ask({ credential: `unknown-${randomBytes(4).toString('hex')}` }));
    });

    // Assess
    const assertion = server.received[1]?.form.get('client_assertion') as string;
    expect(assertion.length).toBeGreaterThan(100);
    for (const leak of [SECRET, assertion, ...assertion.split('.')]) expect(output).not.toContain(leak);
    const lines = output
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const logged = lines.filter((line) => line.message === 'token request');
    expect(logged.map((line) => [line.credential, line.caller, line.outcome])).toEqual([
      ['orders', CALLER, 'ok'],
      ['keyless', CALLER, 'ok'],
      [expect.stringMatching(/^unknown-/), CALLER, 'credential_not_allowed'],
    ]);
    // A name the policy refused never becomes a metric dimension: callers cannot mint metrics.
    const byCredential = lines.filter((line) => 'CredentialRequests' in line);
    expect(byCredential.map((line) => [line.credential, line.outcome])).toEqual([
      ['orders', 'ok'],
      ['keyless', 'ok'],
    ]);
  });
});
