// A review found a hold read from the table honoured 5 s longer than the IdP asked, with clocks in
// step. The contract's Clocks rule: with clocks in step, a hold ends when the IdP said and
// `retry-after` counts down alike on every instance.
import { setTimeout as sleep } from 'node:timers/promises';
import { tokenEvent } from '../../support/events';
import { freshInstance, type Instance, testClock } from '../../support/fleet';
import { type SharedTable, startSharedTable } from '../../support/shared-table';
import { json, startTokenServer, type TokenServer } from '../../support/token-server';

let server: TokenServer;
let table: SharedTable;
const instances: Instance[] = [];

beforeAll(async () => {
  server = await startTokenServer();
  table = await startSharedTable('review-e2');
  Object.assign(process.env, { TOKEN_URL_ALLOWLIST: server.origin, UPSTREAM_TIMEOUT_MS: '3000' });
});
afterAll(async () => {
  for (const i of instances) i.close();
  await table.close();
  await server.close();
});

it('with clocks in step, every instance answers a 20 s hold with the seconds left, and sends again once it is over', async () => {
  // Prepare: two instances on one clock; the owner's key keeps a token (proven), which goes stale
  const clock = testClock();
  const [a, b] = [freshInstance({}, clock.now), freshInstance({}, clock.now)];
  instances.push(a, b);
  let throttled = false;
  server.answer((req, res) => {
    if (throttled) void json(429, { error: 'slow_down' }, { 'retry-after': '20' })(req, res);
    else void json(200, { access_token: `t-${req.form.get('scope')}`, token_type: 'Bearer', expires_in: 3600 })(req, res);
  });
  await sleep(300);
  const body = (scope: string) => ({ client_id: 'e2-client', client_secret: 's', access_token_url: `${server.origin}/token`, scope });
  expect((await a.handle(tokenEvent(body('own')))).statusCode).toBe(200);
  clock.advance(3_300_000);
  throttled = true;
  const earned = await a.handle(tokenEvent(body('own'))); // 429 Retry-After 20: the client id is held 20 s
  throttled = false;
  server.received.length = 0;

  // Act: 1 s later, another key of the client on both instances; then 20.5 s after the 429
  clock.advance(1000);
  const onA = await a.handle(tokenEvent(body('x1')));
  const onB = await b.handle(tokenEvent(body('y1')));
  clock.advance(19_500);
  const afterOnA = await a.handle(tokenEvent(body('x2')));
  const afterOnB = await b.handle(tokenEvent(body('y2')));

  // Assess
  expect(earned.statusCode).toBe(200); // stale
  expect([onA.statusCode, onB.statusCode]).toEqual([503, 503]);
  // With clocks in step, every instance counts the hold down alike: 19 s left of 20.
  expect([onA.headers?.['retry-after'], onB.headers?.['retry-after']]).toEqual(['19', '19']);
  expect([afterOnA.statusCode, afterOnB.statusCode]).toEqual([200, 200]); // the hold is over on every instance
  expect(server.received.map((received) => received.form.get('scope'))).toEqual(['x2', 'y2']);
});
