// Regression tests from the security review of 2026-11-27: stored credentials (lambda/credentials/), through the
// real handler, the KMS and Secrets Manager stand-ins and a scripted IdP. What the review found is fixed (G3: a burst
// of refusals re-reads the secret once; G7: the JWKS serves the keys it can); the rest is what was tried and held.
import { createHash, createPublicKey, generateKeyPairSync, randomBytes, sign, verify, type JsonWebKey } from 'node:crypto';
import fc from 'fast-check';
import { callerPattern, verifiedCaller } from '../../lambda/credentials/callers';
import { derToJose } from '../../lambda/credentials/jose';
import { loadConfig } from '../../lambda/config';
import { createHandler } from '../../lambda/handler';
import { destroyAgents } from '../../lambda/upstream/guarded-agents';
import type { LocalKey } from '../../local/kms-local';
import { decodeJws } from '../support/caller-assertions';
import { type CredentialSources, startCredentialSources } from '../support/credential-sources';
import { bodyOf, PAYLOAD_FORMATS, recordingObservability, tokenEvent } from '../support/events';
import { basicCredentials } from '../support/fleet';
import { json, type ReceivedRequest, startTokenServer, type TokenServer } from '../support/token-server';

const ACCOUNT = '123456789012';
const ROLE = `arn:aws:iam::${ACCOUNT}:role/orders-service`;
const SESSION = `arn:aws:sts::${ACCOUNT}:assumed-role/orders-service/i-0abc`;
let server: TokenServer;
let sources: CredentialSources;
let rsa: LocalKey;
let ec: LocalKey;

beforeAll(async () => {
  server = await startTokenServer();
  sources = await startCredentialSources();
  rsa = sources.kms.createKey('RSA_2048');
  ec = sources.kms.createKey('ECC_NIST_P256');
});
beforeEach(() => {
  server.received.length = 0;
  server.answer((request, response) => {
    // A token that names what it was issued for, so a test can tell whose token a caller got.
    const form = Object.fromEntries(request.form);
    const id = basicCredentials(request)?.clientId ?? form.client_id ?? 'assertion';
    void json(200, {
      access_token: `token-${id}-${form.scope ?? '-'}-${randomBytes(4).toString('hex')}`,
      token_type: 'Bearer',
      expires_in: 3600,
    })(request, response);
  });
});
afterAll(async () => {
  destroyAgents();
  await Promise.all([server.close(), sources.close()]);
});

const secretNamed = (value: string): string => {
  const id = `review/${randomBytes(4).toString('hex')}`;
  sources.secrets.set(id, value);
  return id;
};
function handlerFor(entries: Record<string, unknown>[], env: Record<string, string> = {}) {
  const observed = recordingObservability();
  const credentials = JSON.stringify(entries.map((entry) => ({ callers: [ROLE], ...entry })));
  const handle = createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: server.origin, STORED_CREDENTIALS: credentials, ...env }), observed);
  return { handle, records: observed.records };
}
const ask = (body: Record<string, unknown>, iamCaller: string | undefined = SESSION, headers: Record<string, string> = {}) => {
  const event = tokenEvent(body, iamCaller === undefined ? {} : { iamCaller });
  Object.assign(event.headers ?? {}, headers);
  return event;
};
const until = async (done: () => boolean) => {
  for (let waited = 0; !done(); waited += 10) {
    if (waited > 5000) throw new Error('never held');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
};

describe('G3: a burst of refused exchanges re-reads an unchanged secret once, not once per refused request', () => {
  it('10 concurrent requests the IdP refuses with the same, unchanged secret make one more GetSecretValue call between them', async () => {
    // Prepare: the IdP refuses the secret (it was revoked, or the credential asks a scope the IdP refuses).
    const secretId = secretNamed('unchanged-secret');
    const { handle } = handlerFor([
      { name: 'orders', clientId: 'orders-client', tokenUrl: `${server.origin}/token`, method: 'client_secret_basic', secretId },
    ]);
    await until(() => sources.secrets.reads.includes(secretId)); // the read at the instance's start
    server.answer(json(401, { error: 'invalid_client' }));
    const reads = () => sources.secrets.reads.filter((id) => id === secretId).length;

    // Act
    const answers = await Promise.all(Array.from({ length: 10 }, () => handle(ask({ credential: 'orders' }))));

    // Assess
    expect(answers.every((a) => a.statusCode === 401)).toBe(true);
    // lambda/credentials/secrets.ts says "read again, once for all the requests refused with it".
    expect(reads()).toBeLessThanOrEqual(2);
    expect(server.received).toHaveLength(10);
  });

  it('with the cache on, each new scope the IdP refuses in turn costs one more GetSecretValue (no scopes list on the credential)', async () => {
    const secretId = secretNamed('unchanged-secret-2');
    const { handle } = handlerFor(
      [{ name: 'orders', clientId: 'orders-client', tokenUrl: `${server.origin}/token`, method: 'client_secret_basic', secretId }],
      { TOKEN_CACHE: 'memory' },
    );
    await until(() => sources.secrets.reads.includes(secretId));
    server.answer(json(400, { error: 'invalid_scope' }));
    for (let i = 0; i < 5; i++) expect((await handle(ask({ credential: 'orders', scope: `bogus${i}` }))).statusCode).toBe(401);
    const reads = sources.secrets.reads.filter((id) => id === secretId).length;
    expect(reads).toBe(6);
  });
});

describe.each(PAYLOAD_FORMATS)(
  'callers through the $name: who gets credential "orders" (callers: [role/orders-service, role/billing-*])',
  ({ as }) => {
    const asked = (...args: Parameters<typeof ask>) => as(ask(...args));
    const entries = () => [
      {
        name: 'orders',
        clientId: 'orders-client',
        tokenUrl: `${server.origin}/token`,
        method: 'client_secret_basic',
        secretId: secretNamed('s1'),
        callers: [ROLE, `arn:aws:iam::${ACCOUNT}:role/billing-*`],
      },
    ];
    const allowed = [
      SESSION,
      ROLE,
      `arn:aws:sts::${ACCOUNT}:assumed-role/billing-x/s`,
      `arn:aws:sts::${ACCOUNT}:assumed-role/billing-/s`,
      `arn:aws:sts::${ACCOUNT}:assumed-role/orders-service/user@example.com`,
    ];
    const refused = [
      `arn:aws:sts::${ACCOUNT}:assumed-role/Orders-Service/s`, // case
      `arn:aws:sts::${ACCOUNT}:assumed-role/ORDERS-SERVICE/s`,
      `arn:aws:sts::${ACCOUNT}:assumed-role/orders-service-admin/s`, // a longer name
      `arn:aws:sts::${ACCOUNT}:assumed-role/xorders-service/s`,
      `arn:aws:sts::210987654321:assumed-role/orders-service/s`, // another account
      `arn:aws-cn:sts::${ACCOUNT}:assumed-role/orders-service/s`, // another partition
      `arn:aws-us-gov:sts::${ACCOUNT}:assumed-role/orders-service/s`,
      `arn:aws:sts::${ACCOUNT}:assumed-role/orders-service/a/b`, // a session with a slash (STS allows none)
      `arn:aws:sts::${ACCOUNT}:assumed-role/x/orders-service`, // the role's name as a session name
      `arn:aws:sts::${ACCOUNT}:assumed-role/orders-service/`, // no session
      `arn:aws:sts::${ACCOUNT}:assumed-role//orders-service`,
      `arn:aws:sts::${ACCOUNT}:assumed-role/billing/s`,
      `arn:aws:sts::${ACCOUNT}:assumed-role/billingx/s`,
      `arn:aws:iam::${ACCOUNT}:user/orders-service`,
      `arn:aws:iam::${ACCOUNT}:role/path/orders-service`,
      `arn:aws:iam::${ACCOUNT}:role/orders-service/x`,
      `arn:aws:sts::${ACCOUNT}:federated-user/orders-service`,
      `arn:aws:iam::${ACCOUNT}:root`,
      `${ROLE} `,
      `${ROLE}\n`,
      ` ${ROLE}`,
      `${ROLE}\u0000`,
      `arn:aws:iam::${ACCOUNT}:role/orders-servicé`,
      'arn:aws:iam::123456789012:role/orders-service'.toUpperCase(),
    ];
    it.each(allowed)('allows %s', async (caller) => {
      const { handle } = handlerFor(entries());
      expect((await handle(asked({ credential: 'orders' }, caller))).statusCode).toBe(200);
    });
    it.each(refused)('refuses %j, sending nothing', async (caller) => {
      const { handle } = handlerFor(entries());
      const answer = await handle(asked({ credential: 'orders' }, caller));
      expect(answer.statusCode).toBe(403);
      expect(server.received).toHaveLength(0);
    });
    it('refuses a caller who is not in authorizer.iam (a JWT or Lambda authorizer, or a forged header), sending nothing', async () => {
      const { handle } = handlerFor(entries());
      const shapes = [
        { jwt: { claims: { sub: SESSION } } },
        { lambda: { userArn: SESSION } },
        { iam: { userArn: [SESSION] } },
        { iam: { principalId: SESSION } },
      ];
      for (const authorizer of shapes) {
        const event = ask({ credential: 'orders' }, undefined, { 'x-amz-user-arn': SESSION, 'x-local-iam-caller': SESSION });
        (event.requestContext as unknown as Record<string, unknown>).authorizer = authorizer;
        expect((await handle(as(event))).statusCode).toBe(403);
      }
      expect(server.received).toHaveLength(0);
    });
    it('matches * as a plain wildcard: 2000 random patterns and principals agree with an escaped regular expression', () => {
      const chars = fc.constantFrom('a', 'b', ':', '/', '*', '.', '-', '?', '+', '(');
      fc.assert(
        fc.property(fc.string({ unit: chars, maxLength: 12 }), fc.string({ unit: chars, maxLength: 14 }), (tail, principalTail) => {
          const pattern = `arn:aws:iam::1:${tail}`;
          if (/:role\/.*\//.test(pattern) || pattern.includes(':assumed-role/')) return;
          const principal = `arn:aws:iam::1:${principalTail.replaceAll('*', 'x')}`;
          const reference = new RegExp(
            `^${pattern
              .split('*')
              .map((part) => part.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&'))
              .join('.*')}$`,
            's',
          );
          expect(callerPattern(pattern).matches(principal)).toBe(reference.test(principal));
        }),
        { numRuns: 2000 },
      );
    });
    it('reads the caller only from requestContext.authorizer.iam.userArn, and a session as its role', () => {
      expect(verifiedCaller({ requestContext: { authorizer: { iam: { userArn: SESSION } } } })).toEqual({ arn: SESSION, principal: ROLE });
      expect(verifiedCaller({ requestContext: {}, authorizer: { iam: { userArn: SESSION } } })).toBeUndefined();
    });
  },
);

describe('scopes, audience, resource: a caller cannot widen what the credential allows', () => {
  const entry = () => ({
    name: 'orders',
    clientId: 'orders-client',
    tokenUrl: `${server.origin}/token`,
    method: 'client_secret_post',
    secretId: secretNamed('s2'),
    scopes: ['orders.read'],
    audience: 'https://api.example.com',
    resource: 'https://api.example.com/orders',
  });
  it.each([
    [{ scope: 'orders.read orders.write' }],
    [{ scope: 'orders.write' }],
    [{ scope: ['orders.read', 'admin'] }],
    [{ scope: 'orders.read\torders.write' }],
    [{ scope: 'orders.read  orders.write' }],
    [{ scope: 'ORDERS.READ' }],
    [{ scope: 'orders.read%20admin' }],
    [{ audience: 'https://api.example.com/' }],
    [{ audience: 'https://other.example.com' }],
    [{ resource: 'https://api.example.com/orders/..' }],
    [{ resource: ['https://api.example.com/orders', 'https://api.example.com/admin'] }],
    [{ resource: [] }],
    [{ scope: '' }],
    [{ audience: '' }],
    [{ grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange' }],
    [{ client_id: 'other' }],
    [{ token_endpoint_auth_method: 'none' }],
    [{ basic_credentials_encoding: 'raw' }],
    [{ credential: 'ORDERS' }],
    [{ credential: 'orders ' }],
    [{ credential: ['orders'] }],
  ])('refuses %j (403 or 400), sending nothing', async (extra) => {
    const { handle } = handlerFor([entry()]);
    const answer = await handle(ask({ credential: 'orders', ...extra }));
    expect([400, 403]).toContain(answer.statusCode);
    expect(server.received).toHaveLength(0);
  });
  it('fills in what the caller leaves out: every field of the credential is sent, nothing else', async () => {
    const { handle } = handlerFor([entry()]);
    expect((await handle(ask({ credential: 'orders' }))).statusCode).toBe(200);
    expect(server.received[0]?.form.getAll('resource')).toEqual(['https://api.example.com/orders']);
    expect(Object.fromEntries(server.received[0]?.form ?? [])).toMatchObject({ scope: 'orders.read', audience: 'https://api.example.com' });
  });
  it('a form body cannot add a second scope, audience or credential by repeating a field', async () => {
    const { handle } = handlerFor([entry()]);
    for (const body of [
      'credential=orders&scope=orders.read&scope=admin',
      'credential=orders&credential=other',
      'credential=orders&audience=x&audience=https%3A%2F%2Fapi.example.com',
    ]) {
      const event = tokenEvent(body, { contentType: 'application/x-www-form-urlencoded', iamCaller: SESSION });
      expect((await handle(event)).statusCode).toBeGreaterThanOrEqual(400);
    }
    expect(server.received).toHaveLength(0);
  });
});

describe('cache: a token of credential X never answers a caller of Y, nor a caller who sends the client id and a secret', () => {
  it.each(['memory'])(
    'TOKEN_CACHE=%s: two credentials of one client at one token URL, and a direct-secret caller of that client',
    async (mode) => {
      const secretId = secretNamed('shared-client-secret');
      const base = { clientId: 'one-client', tokenUrl: `${server.origin}/token`, method: 'client_secret_post', secretId };
      const other = `arn:aws:iam::${ACCOUNT}:role/other-service`;
      const { handle } = handlerFor(
        [
          { name: 'x', ...base },
          { name: 'y', ...base, callers: [other] },
        ],
        { TOKEN_CACHE: mode },
      );

      const x = bodyOf(await handle(ask({ credential: 'x', scope: 'read' }))) as { access_token: string };
      const y = bodyOf(await handle(ask({ credential: 'y', scope: 'read' }, `arn:aws:sts::${ACCOUNT}:assumed-role/other-service/s`))) as {
        access_token: string;
      };
      const yAsX = await handle(ask({ credential: 'y', scope: 'read' })); // X's caller asking for Y
      const direct = await handle(
        ask({
          client_id: 'one-client',
          client_secret: 'guess',
          access_token_url: `${server.origin}/token`,
          scope: 'read',
          token_endpoint_auth_method: 'client_secret_post',
        }),
      );
      const directRight = bodyOf(
        await handle(
          ask({
            client_id: 'one-client',
            client_secret: 'shared-client-secret',
            access_token_url: `${server.origin}/token`,
            scope: 'read',
            token_endpoint_auth_method: 'client_secret_post',
          }),
        ),
      ) as { access_token: string };

      expect(x.access_token).not.toBe(y.access_token);
      expect(yAsX.statusCode).toBe(403);
      expect((bodyOf(direct) as { access_token?: string }).access_token).not.toBe(x.access_token);
      // Even the right secret sent directly is another key: it never gets the stored credential's kept token.
      expect(directRight.access_token).not.toBe(x.access_token);
      expect(server.received).toHaveLength(4);
    },
  );
});

describe('keyless: the assertion, the JWKS and the DER->JOSE conversion', () => {
  const keyEntry = (key: LocalKey, name: string) => ({
    name,
    clientId: `${name}-client`,
    tokenUrl: `${server.origin}/token`,
    method: 'private_key_jwt',
    keyId: key.arn,
  });
  const assertionOf = (request: ReceivedRequest | undefined) => String(request?.form.get('client_assertion'));

  it.each([
    ['RS256', () => rsa],
    ['ES256', () => ec],
  ])(
    '%s: claims iss = sub = client, aud = the token URL, exp - iat = 60, fresh jti; kid = RFC 7638 thumbprint; verifies with the JWKS key',
    async (alg, key) => {
      const { handle } = handlerFor([keyEntry(key(), 'k')]);
      const jwks = bodyOf(await handle(tokenEvent(undefined, { method: 'GET', path: '/.well-known/jwks.json', contentType: null }))) as {
        keys: JsonWebKey[];
      };
      for (let i = 0; i < 2; i++) expect((await handle(ask({ credential: 'k', scope: `s${i}` }))).statusCode).toBe(200);
      const [first, second] = server.received.map(assertionOf);
      const { header, claims } = decodeJws(first as string);
      expect(header).toEqual({ alg, typ: 'JWT', kid: expect.any(String) });
      expect(claims).toEqual({
        iss: 'k-client',
        sub: 'k-client',
        aud: `${server.origin}/token`,
        jti: expect.any(String),
        iat: expect.any(Number),
        exp: (claims.iat as number) + 60,
      });
      expect(decodeJws(second as string).claims.jti).not.toBe(claims.jti);
      expect(server.received[0]?.form.get('client_assertion_type')).toBe('urn:ietf:params:oauth:client-assertion-type:jwt-bearer');
      const [jwk] = jwks.keys;
      const required = jwk?.kty === 'RSA' ? { e: jwk.e, kty: 'RSA', n: jwk.n } : { crv: jwk?.crv, kty: 'EC', x: jwk?.x, y: jwk?.y };
      expect(header.kid).toBe(createHash('sha256').update(JSON.stringify(required)).digest('base64url'));
      expect(Object.keys(jwk ?? {}).sort()).toEqual(
        alg === 'RS256' ? ['alg', 'e', 'kid', 'kty', 'n', 'use'] : ['alg', 'crv', 'kid', 'kty', 'use', 'x', 'y'],
      );
      const [h, c, s] = (first as string).split('.');
      const ok = verify(
        'sha256',
        Buffer.from(`${h}.${c}`),
        { key: createPublicKey({ key: jwk as JsonWebKey, format: 'jwk' }), dsaEncoding: 'ieee-p1363' },
        Buffer.from(String(s), 'base64url'),
      );
      expect(ok).toBe(true);
    },
  );

  it('JWKS: 200, public, max-age 300, one key per KMS key, nothing private; absent without a key', async () => {
    const { handle } = handlerFor([keyEntry(rsa, 'a'), keyEntry(rsa, 'b'), keyEntry(ec, 'c')]);
    const answer = await handle(tokenEvent(undefined, { method: 'GET', path: '/.well-known/jwks.json', contentType: null }));
    expect(answer.statusCode).toBe(200);
    expect(answer.headers).toMatchObject({ 'content-type': 'application/json', 'cache-control': 'public, max-age=300' });
    const { keys } = bodyOf(answer) as { keys: Record<string, unknown>[] };
    expect(keys).toHaveLength(2);
    for (const key of keys) for (const name of ['d', 'p', 'q', 'dp', 'dq', 'qi', 'k']) expect(key).not.toHaveProperty(name);
    const secretOnly = handlerFor([
      { name: 's', clientId: 'c', tokenUrl: `${server.origin}/token`, method: 'client_secret_basic', secretId: secretNamed('x') },
    ]);
    expect(
      (await secretOnly.handle(tokenEvent(undefined, { method: 'GET', path: '/.well-known/jwks.json', contentType: null }))).statusCode,
    ).toBe(404);
  });

  it('G7: a key KMS cannot find (a typo, or an ARN of another region) is left out of the JWKS, named by its credential, the others served', async () => {
    // Prepare: no call is made for a key of another region, whose ARN the log line never shows.
    const missing = { ...keyEntry(rsa, 'gone'), keyId: 'arn:aws:kms:ap-south-1:000000000000:key/00000000-0000-0000-0000-000000000000' };
    const { handle, records } = handlerFor([keyEntry(ec, 'fine'), missing]);
    const calls = sources.kms.calls.length;

    // Act
    const answer = await handle(tokenEvent(undefined, { method: 'GET', path: '/.well-known/jwks.json', contentType: null }));

    // Assess: kept 30 s, not 5 minutes, so the key is published soon after KMS gives it.
    expect(answer.statusCode).toBe(200);
    expect((bodyOf(answer) as { keys: JsonWebKey[] }).keys.map((key) => key.kty)).toEqual(['EC']);
    expect(answer.headers['cache-control']).toBe('public, max-age=30');
    expect(records[0]).toMatchObject({ outcome: 'ok', credential_error: 'gone: KeyInAnotherRegion' });
    expect(JSON.stringify(records)).not.toContain('ap-south-1:000000000000');
    expect(sources.kms.calls.slice(calls)).not.toContain('Sign');
  });

  it('derToJose agrees with node:crypto on 20,000 P-256 signatures (r or s of 31 or fewer octets included) and on built short integers', () => {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    let short = 0;
    for (let i = 0; i < 20000; i++) {
      const message = Buffer.from(`m${i}`);
      const der = sign('sha256', message, { key: privateKey, dsaEncoding: 'der' });
      const rLength = der[3] as number;
      const sLength = der[5 + rLength] as number;
      if (rLength < 32 || sLength < 32) short++;
      const jose = derToJose(der);
      expect(jose).toHaveLength(64);
      expect(verify('sha256', message, { key: publicKey, dsaEncoding: 'ieee-p1363' }, jose)).toBe(true);
    }
    expect(short).toBeGreaterThan(50);
    // r = 1 (one octet), s = 2^255 (33 octets with its sign octet): padded and trimmed.
    const r = Buffer.from([0x01]);
    const s = Buffer.concat([Buffer.from([0x00, 0x80]), Buffer.alloc(31)]);
    const der = Buffer.concat([Buffer.from([0x30, 2 + r.length + 2 + s.length, 0x02, r.length]), r, Buffer.from([0x02, s.length]), s]);
    expect(derToJose(der).toString('hex')).toBe(`${'00'.repeat(31)}01` + `80${'00'.repeat(31)}`);
    expect(() => derToJose(Buffer.concat([der, Buffer.from([0])]))).toThrow();
    expect(() => derToJose(Buffer.from([0x30, 0x06, 0x02, 0x01, 0x01, 0x02, 0x21, 0x01]))).toThrow();
  });
});

describe('design (not a code defect): the function trusts requestContext.authorizer.iam from any invoker', () => {
  it("a direct lambda:Invoke with a forged userArn gets the credential's token: lambda:InvokeFunction on the function = every stored credential", async () => {
    const { handle } = handlerFor([
      {
        name: 'orders',
        clientId: 'orders-client',
        tokenUrl: `${server.origin}/token`,
        method: 'client_secret_basic',
        secretId: secretNamed('s3'),
      },
    ]);
    const forged = ask({ credential: 'orders' }, SESSION); // what anyone allowed to invoke the function can send
    expect((await handle(forged)).statusCode).toBe(200);
  });
});
