// A review found the pepper read once per instance: a rotation split the fleet for hours. Now every
// instance reads it again within a minute (the contract's pepper rule), so a 401 or a hold on one side
// of a rotation reaches the other, and items sealed with the old pepper (a restored backup) are ignored.
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { bodyOf, tokenEvent } from '../../support/events';
import { freshInstance, type Instance, testClock } from '../../support/fleet';
import { itemStates, PEPPER_SECRET, type SharedTable, startSharedTable } from '../../support/shared-table';
import { type Entry, ownEntry } from '../../../lambda/cache/core/lifetime';
import { epochMs } from '../../../lambda/clock';
import { json, startTokenServer, type TokenServer } from '../../support/token-server';

let server: TokenServer;
let table: SharedTable;
const instances: Instance[] = [];
const answerOf = (r: { statusCode?: number; headers?: Record<string, unknown>; body?: string }) => [
  r.statusCode,
  r.headers?.['x-token-cache'] ?? bodyOf(r).code,
  bodyOf(r).access_token,
];

beforeAll(async () => {
  server = await startTokenServer();
  table = await startSharedTable('review-e4');
  Object.assign(process.env, { TOKEN_URL_ALLOWLIST: server.origin, UPSTREAM_TIMEOUT_MS: '3000' });
});
afterAll(async () => {
  for (const i of instances) i.close();
  await table.close();
  await server.close();
});

/** OLD started before the pepper was rotated, NEW after; both on one clock. */
async function rotatedFleet() {
  // Each test starts from the pepper the table helper derives keys with (an earlier test rotated it).
  table.secrets.set(PEPPER_SECRET, table.pepper.toString('utf8'));
  const clock = testClock();
  const old = freshInstance({}, clock.now);
  instances.push(old);
  await sleep(300);
  const tokens = { issued: 0 };
  server.answer((req, res) => json(200, { access_token: `issued-${++tokens.issued}`, token_type: 'Bearer', expires_in: 3600 })(req, res));
  return {
    clock,
    old,
    async rotate() {
      table.secrets.set(PEPPER_SECRET, randomBytes(32).toString('base64url'));
      const fresh = freshInstance({}, clock.now);
      instances.push(fresh);
      await sleep(300);
      return fresh;
    },
  };
}

it('a 401 on an instance started after the rotation ends stale-if-error on one started before it', async () => {
  const { clock, old, rotate } = await rotatedFleet();
  const b = { client_id: 'e4a', client_secret: 's', access_token_url: `${server.origin}/token` };
  const first = await old.handle(tokenEvent(b));
  expect(answerOf(first)).toEqual([200, 'miss', 'issued-1']);
  const fresh = await rotate();
  clock.advance(3_300_000); // OLD's token is stale (300 s left)
  server.answer(json(401, { error: 'invalid_client' })); // the IdP rejects the key
  const rejected = await fresh.handle(tokenEvent(b));
  clock.advance(6000); // past the remembered 5 s
  server.answer(json(500, { error: 'server_error' }));
  const fromOld = await old.handle(tokenEvent(b));
  expect(answerOf(rejected)[0]).toBe(401);
  expect(answerOf(fromOld)).toEqual([502, 'upstream_error', undefined]); // never the pre-401 token, stale
});

it('a hold earned on an instance started after the rotation holds an instance started before it', async () => {
  const { clock, old, rotate } = await rotatedFleet();
  const fresh = await rotate();
  const b = (scope: string) => ({ client_id: 'e4b', client_secret: 's', access_token_url: `${server.origin}/token`, scope });
  expect((await fresh.handle(tokenEvent(b('own')))).statusCode).toBe(200); // NEW's key is proven
  clock.advance(3_300_000);
  server.answer(json(429, { error: 'slow_down' }, { 'retry-after': '30' }));
  const held = await fresh.handle(tokenEvent(b('own'))); // the client id is held 30 s, fleet-wide
  expect(answerOf(held)[1]).toBe('stale');
  server.answer(json(200, { access_token: 'sent-during-the-hold', token_type: 'Bearer', expires_in: 3600 }));
  server.received.length = 0;
  clock.advance(2000);
  const fromOld = await old.handle(tokenEvent(b('other')));
  expect(server.received).toHaveLength(0);
  expect(fromOld.statusCode).toBe(503);
});

it('items of the table as restored from a backup no longer answer an instance that was warm when the pepper was rotated, a minute on', async () => {
  const { clock, old, rotate } = await rotatedFleet();
  const b = { client_id: 'e4c', client_secret: 's', access_token_url: `${server.origin}/token` };
  // The backup holds a token that the IdP has since revoked; it is restored, then the pepper rotated.
  const token = { access_token: 'revoked-from-backup', token_type: 'Bearer', expires_in: 3600 };
  const revoked: Entry = { ...ownEntry(token, epochMs(Date.now() - 60_000), 'backup'), copy: true };
  await table.plant(table.keysOf(b), itemStates(Date.now).kept(revoked));
  await rotate();
  // Within a minute of the rotation every instance reads the pepper again.
  clock.advance(61_000);
  const fromOld = await old.handle(tokenEvent(b));
  expect(bodyOf(fromOld).access_token).not.toBe('revoked-from-backup');
});
