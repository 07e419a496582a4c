import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../lambda/config';
import { createHandler } from '../../lambda/handler';
import { destroyAgents } from '../../lambda/upstream/guarded-agents';
import type { LocalKey } from '../../local/kms-local';
import { CALLER, type CredentialSources, startCredentialSources, storedCredentials } from '../support/credential-sources';
import { bodyOf, recordingObservability, tokenEvent } from '../support/events';
import { freshInstance, type Instance, issuingIdp } from '../support/fleet';
import { type SharedTable, startSharedTable } from '../support/shared-table';
import { json, type Script, startTokenServer, type TokenServer } from '../support/token-server';

// A stored credential's tokens go through the token cache like any others, keyed by the credential
// (its name, scope, audience and resource): with TOKEN_CACHE=memory in one instance, and with shared
// across instances through the table (dynalite). A hold it earns covers that credential alone.

const SECRET = `cached-secret-${randomBytes(12).toString('hex')}`;
const SECRET_ID = 'orders/client-secret';
const THROTTLED = json(429, { error: 'slow_down' }, { 'retry-after': '30' });

let server: TokenServer;
let table: SharedTable;
let sources: CredentialSources;
let key: LocalKey;
const instances: Instance[] = [];

beforeAll(async () => {
  server = await startTokenServer();
  table = await startSharedTable('stored-credentials-cache-test');
  sources = await startCredentialSources(table.secrets);
  sources.secrets.set(SECRET_ID, SECRET);
  key = sources.kms.createKey('ECC_NIST_P256');
  process.env.TOKEN_URL_ALLOWLIST = server.origin;
  // Table calls may take up to 1 s each on this shared machine; a slow one would be a miss, not the behaviour here.
  process.env.UPSTREAM_TIMEOUT_MS = '10000';
});

/** An IdP that issues a new, numbered token for the right secret or for any assertion (the scripted server verifies none). */
function issuing(): Script {
  const bySecret = issuingIdp({ secret: () => SECRET });
  let signed = 0;
  return (request, response) => {
    if (!request.form.has('client_assertion')) return bySecret(request, response);
    signed++;
    return json(200, { access_token: `signed-${signed}`, token_type: 'Bearer', expires_in: 3600 })(request, response);
  };
}

beforeEach(() => {
  server.answer(issuing());
  server.received.length = 0;
});

afterEach(() => {
  for (const instance of instances.splice(0)) instance.close();
});

afterAll(async () => {
  destroyAgents();
  await Promise.all([server.close(), sources.close(), table.close()]);
});

/** Two credentials of one client at one token URL, and a keyless one. */
const credentials = () =>
  storedCredentials(
    { name: 'orders', clientId: 'orders-client', tokenUrl: `${server.origin}/token`, method: 'client_secret_basic', secretId: SECRET_ID },
    {
      name: 'orders-copy',
      clientId: 'orders-client',
      tokenUrl: `${server.origin}/token`,
      method: 'client_secret_basic',
      secretId: SECRET_ID,
    },
    { name: 'keyless', clientId: 'keyless-client', tokenUrl: `${server.origin}/token`, method: 'private_key_jwt', keyId: key.keyId },
  );
const ask = (credential: string, extra: Record<string, unknown> = {}) => tokenEvent({ credential, ...extra }, { iamCaller: CALLER });
/** The caller's own request for the credential's client: same client id, secret and token URL. */
const ownRequest = () =>
  tokenEvent({ client_id: 'orders-client', client_secret: SECRET, access_token_url: `${server.origin}/token` }, { iamCaller: CALLER });
const signs = () => sources.kms.calls.filter((call) => call === 'Sign').length;

function memoryInstance() {
  const observed = recordingObservability();
  const config = loadConfig({ ...process.env, TOKEN_CACHE: 'memory', STORED_CREDENTIALS: credentials() });
  return { handle: createHandler(config, observed), records: observed.records };
}

function sharedInstance(): Instance {
  const instance = freshInstance({ STORED_CREDENTIALS: credentials() });
  instances.push(instance);
  return instance;
}

describe('a stored credential with TOKEN_CACHE=memory', () => {
  it('answers a second request for the credential from memory, without asking the IdP or KMS again', async () => {
    // Prepare
    const { handle } = memoryInstance();
    const signsBefore = signs();

    // Act
    const first = await handle(ask('keyless', { scope: 'read' }));
    const second = await handle(ask('keyless', { scope: 'read' }));

    // Assess
    expect([first.headers?.['x-token-cache'], second.headers?.['x-token-cache']]).toEqual(['miss', 'hit']);
    expect(bodyOf(second).access_token).toBe(bodyOf(first).access_token);
    expect(server.received).toHaveLength(1);
    expect(signs() - signsBefore).toBe(1);
  });

  it('keeps tokens for another scope, audience or resource apart', async () => {
    // Prepare
    const { handle } = memoryInstance();

    // Act
    const answers = [];
    for (const extra of [
      { scope: 'read' },
      { scope: 'write' },
      { audience: 'https://a.example' },
      { resource: 'https://a.example/' },
      {},
    ]) {
      answers.push((await handle(ask('orders', extra))).headers?.['x-token-cache']);
    }

    // Assess
    expect(answers).toEqual(['miss', 'miss', 'miss', 'miss', 'miss']);
    expect(server.received).toHaveLength(5);
  });

  it("never answers a caller's own request for the same client with the credential's token, nor another credential's", async () => {
    // Prepare
    const { handle } = memoryInstance();
    const stored = bodyOf(await handle(ask('orders')));

    // Act
    const own = await handle(ownRequest());
    const copy = await handle(ask('orders-copy'));

    // Assess
    expect([own.headers?.['x-token-cache'], copy.headers?.['x-token-cache']]).toEqual(['miss', 'miss']);
    expect(new Set([stored.access_token, bodyOf(own).access_token, bodyOf(copy).access_token]).size).toBe(3);
  });

  it('holds a credential the IdP asked to wait, and no other credential or caller of the same client', async () => {
    // Prepare
    const { handle, records } = memoryInstance();
    server.answer(THROTTLED);
    expect((await handle(ask('orders'))).statusCode).toBe(503);
    server.answer(issuing());
    server.received.length = 0;

    // Act
    const held = await handle(ask('orders'));
    const heldForAnotherScope = await handle(ask('orders', { scope: 'write' }));
    const other = await handle(ask('orders-copy'));
    const own = await handle(ownRequest());

    // Assess
    expect([held.statusCode, heldForAnotherScope.statusCode]).toEqual([503, 503]);
    expect(Number(held.headers?.['retry-after'])).toBeGreaterThan(28);
    expect(records[2]).toMatchObject({ outcome: 'upstream_throttled', cache_remembered: 'hold', credential: 'orders' });
    expect([other.statusCode, own.statusCode]).toEqual([200, 200]);
    expect(server.received).toHaveLength(2);
  });

  it("is not held by a hold a caller's own request earned for the same client", async () => {
    // Prepare
    const { handle } = memoryInstance();
    server.answer(THROTTLED);
    expect((await handle(ownRequest())).statusCode).toBe(503);
    server.answer(issuing());

    // Act
    const stored = await handle(ask('orders'));

    // Assess
    expect(stored.statusCode).toBe(200);
  });
});

describe('a stored credential with TOKEN_CACHE=shared', () => {
  it('is answered on another instance from the table, which holds nothing readable of it', async () => {
    // Prepare
    const [first, second] = [sharedInstance(), sharedInstance()];
    const signsBefore = signs();

    // Act
    const missed = await first.handle(ask('keyless', { scope: 'read' }));
    const hit = await second.handle(ask('keyless', { scope: 'read' }));

    // Assess
    expect([missed.headers?.['x-token-cache'], hit.headers?.['x-token-cache']]).toEqual(['miss', 'hit']);
    expect(second.records[0]).toMatchObject({ cache: 'shared', credential: 'keyless' });
    expect(server.received).toHaveLength(1);
    expect(signs() - signsBefore).toBe(1);
    const dump = JSON.stringify(await table.scan());
    const token = String(bodyOf(hit).access_token);
    for (const clear of ['keyless', 'keyless-client', token, server.origin, CALLER]) {
      expect(dump).not.toContain(clear);
      expect(dump).not.toContain(Buffer.from(clear).toString('base64'));
    }
  });

  it('seals its items with the pepper: an instance with another pepper cannot read them', async () => {
    // Prepare
    expect((await sharedInstance().handle(ask('orders', { scope: 'pepper-test' }))).headers?.['x-token-cache']).toBe('miss');
    const pepper = `${randomBytes(32).toString('base64url')}`;
    const saved = process.env.TOKEN_CACHE_PEPPER_SECRET;
    table.secrets.set('other-pepper', pepper);

    // Act
    const other = freshInstance({ STORED_CREDENTIALS: credentials(), TOKEN_CACHE_PEPPER_SECRET: 'other-pepper' });
    instances.push(other);
    const answer = await other.handle(ask('orders', { scope: 'pepper-test' }));
    const same = await sharedInstance().handle(ask('orders', { scope: 'pepper-test' }));

    // Assess
    expect(process.env.TOKEN_CACHE_PEPPER_SECRET).toBe(saved);
    expect([answer.headers?.['x-token-cache'], same.headers?.['x-token-cache']]).toEqual(['miss', 'hit']);
  });

  it('holds the credential on every instance once the IdP asked to wait, and no other credential of the same client', async () => {
    // Prepare
    const [first, second] = [sharedInstance(), sharedInstance()];
    server.answer(THROTTLED);
    expect((await first.handle(ask('orders', { scope: 'hold' }))).statusCode).toBe(503);
    server.answer(issuing());
    server.received.length = 0;

    // Act: the same credential for another scope, on another instance, is another key the hold covers.
    const held = await second.handle(ask('orders', { scope: 'held' }));
    const other = await second.handle(ask('orders-copy', { scope: 'hold' }));

    // Assess
    expect(held.statusCode).toBe(503);
    expect(second.records[0]).toMatchObject({ cache_remembered: 'hold' });
    expect(other.statusCode).toBe(200);
    expect(server.received).toHaveLength(1);
  });
});
