// A review found that a hold on a client id did not cover that client's stored credential. The
// contract: a hold on a client id covers every request for that client id and token URL, stored
// credentials included.
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { CALLER, type CredentialSources, startCredentialSources, storedCredentials } from '../../support/credential-sources';
import { tokenEvent } from '../../support/events';
import { freshInstance, type Instance, testClock } from '../../support/fleet';
import { type SharedTable, startSharedTable } from '../../support/shared-table';
import { json, startTokenServer, type TokenServer } from '../../support/token-server';

const SECRET = `e6-${randomBytes(8).toString('hex')}`;
const SECRET_ID = 'e6/client-secret';
let server: TokenServer;
let table: SharedTable;
let sources: CredentialSources;
const instances: Instance[] = [];

beforeAll(async () => {
  server = await startTokenServer();
  table = await startSharedTable('review-e6');
  sources = await startCredentialSources(table.secrets);
  sources.secrets.set(SECRET_ID, SECRET);
  Object.assign(process.env, { TOKEN_URL_ALLOWLIST: server.origin, UPSTREAM_TIMEOUT_MS: '5000' });
});
afterAll(async () => {
  for (const i of instances) i.close();
  await Promise.all([server.close(), sources.close(), table.close()]);
});

it.each(['memory', 'shared'])(
  "TOKEN_CACHE=%s: a proven caller's 30 s hold on client X holds the stored credential of X too",
  async (mode) => {
    const clock = testClock();
    const tokenUrl = `${server.origin}/token?e6=${mode}`;
    const env = {
      TOKEN_CACHE: mode,
      STORED_CREDENTIALS: storedCredentials({
        name: 'x-cred',
        clientId: 'client-x',
        tokenUrl,
        method: 'client_secret_basic',
        secretId: SECRET_ID,
      }),
    };
    const member = freshInstance(env, clock.now);
    instances.push(member);
    await sleep(300);
    let throttled = false;
    let issued = 0;
    server.answer((req, res) => {
      if (throttled) void json(429, { error: 'slow_down' }, { 'retry-after': '30' })(req, res);
      else void json(200, { access_token: `t-${++issued}`, token_type: 'Bearer', expires_in: 3600 })(req, res);
    });
    // The caller's own key for client X keeps a token (proven), which goes stale; then the IdP says wait 30 s.
    const own = tokenEvent({ client_id: 'client-x', client_secret: SECRET, access_token_url: tokenUrl }, { iamCaller: CALLER });
    expect((await member.handle(own)).statusCode).toBe(200);
    clock.advance(3_300_000);
    throttled = true;
    const held = await member.handle(own);
    expect(held.headers?.['x-token-cache']).toBe('stale');
    throttled = false;
    server.received.length = 0;

    // Act: 1 s into the hold, the stored credential of the same client id at the same token URL
    clock.advance(1000);
    const stored = await member.handle(tokenEvent({ credential: 'x-cred' }, { iamCaller: CALLER }));

    expect(server.received).toHaveLength(0);
    expect(stored.statusCode).toBe(503);
  },
);
