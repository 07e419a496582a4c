// A review found a token too large for one table item never shared, leaving a claim later requests
// waited on. Now an item holds a kept token once, and one too large for it is kept in memory only.
import { setTimeout as sleep } from 'node:timers/promises';
import { bodyOf, tokenEvent } from '../../support/events';
import { freshInstance, type Instance } from '../../support/fleet';
import { type SharedTable, startSharedTable } from '../../support/shared-table';
import { json, startTokenServer, type TokenServer } from '../../support/token-server';

let server: TokenServer;
let table: SharedTable;
const instances: Instance[] = [];

beforeAll(async () => {
  server = await startTokenServer();
  table = await startSharedTable('review-e7');
  Object.assign(process.env, { TOKEN_URL_ALLOWLIST: server.origin, UPSTREAM_TIMEOUT_MS: '3000' });
});
afterAll(async () => {
  for (const i of instances) i.close();
  await table.close();
  await server.close();
});

it.each([
  ['10 KB (control)', 10_000],
  ['250 KB', 250_000],
])('a %s token, once fetched, answers the next requests on other instances from the table', async (_case, size) => {
  let issued = 0;
  server.answer((req, res) =>
    json(200, { access_token: `${++issued}-${'x'.repeat(size)}`, token_type: 'Bearer', expires_in: 3600 })(req, res),
  );
  server.received.length = 0;
  const fleet = [freshInstance(), freshInstance(), freshInstance(), freshInstance()];
  instances.push(...fleet);
  await sleep(300);
  const b = { client_id: `e7-${size}`, client_secret: 's', access_token_url: `${server.origin}/token` };

  const answers: Awaited<ReturnType<Instance['handle']>>[] = [];
  for (const member of fleet) answers.push(await member.handle(tokenEvent(b)));

  // The others have it from the table: no claim left behind to wait out, no second IdP request.
  expect(answers.map((a) => [a.statusCode, a.headers?.['x-token-cache']])).toEqual([
    [200, 'miss'],
    [200, 'hit'],
    [200, 'hit'],
    [200, 'hit'],
  ]);
  expect(new Set(answers.map((a) => bodyOf(a).access_token)).size).toBe(1);
  expect(server.received).toHaveLength(1);
});
