// A review found a rejection kept in the table 24 h while a kept token could live days: once the table
// expired the rejection, an older token was served stale again. Now the rejection lives as long as any
// token the item kept (the contract: no instance ever again answers stale with a token received before
// the 401, whatever the table's expiry does).
import { setTimeout as sleep } from 'node:timers/promises';
import { bodyOf, tokenEvent } from '../../support/events';
import { freshInstance, type Instance, testClock } from '../../support/fleet';
import { type SharedTable, startSharedTable } from '../../support/shared-table';
import { json, startTokenServer, type TokenServer } from '../../support/token-server';

const DAY = 24 * 3600 * 1000;
let server: TokenServer;
let table: SharedTable;
const instances: Instance[] = [];

beforeAll(async () => {
  server = await startTokenServer();
  table = await startSharedTable('review-e8');
  Object.assign(process.env, { TOKEN_URL_ALLOWLIST: server.origin, UPSTREAM_TIMEOUT_MS: '3000' });
});
afterAll(async () => {
  for (const i of instances) i.close();
  await table.close();
  await server.close();
});

it('a 3-day token kept by C is never served stale after a 401 on another instance: the rejection outlives it in the table', async () => {
  const clock = testClock();
  const [c, r] = [freshInstance({}, clock.now), freshInstance({}, clock.now)];
  instances.push(c, r);
  await sleep(300);
  const b = { client_id: 'e8', client_secret: 's', access_token_url: `${server.origin}/token` };
  server.answer(json(200, { access_token: 'three-days', token_type: 'Bearer', expires_in: 3 * 24 * 3600 }));
  expect(bodyOf(await c.handle(tokenEvent(b))).access_token).toBe('three-days');

  // R's no-cache request reaches the IdP, which now rejects the key.
  clock.advance(6000);
  server.answer(json(401, { error: 'invalid_client' }));
  const event = tokenEvent(b);
  event.headers['cache-control'] = 'no-cache';
  expect((await r.handle(event)).statusCode).toBe(401);
  const { itemKey } = table.keysOf(b);
  const expires = Number((await table.scan()).find((item) => item.pk?.S === itemKey)?.expires?.N) * 1000;
  const tokenExpires = clock.now() - 6000 + 3 * DAY;

  // 66 h later the token is stale on C (stale from 64.8 h); the item holding the rejection is still there.
  clock.advance(66 * 3600 * 1000);
  expect(expires).toBeGreaterThanOrEqual(tokenExpires);
  server.answer(json(500, { error: 'server_error' }));
  const fromC = await c.handle(tokenEvent(b));

  expect(fromC.statusCode).toBe(502);
});
