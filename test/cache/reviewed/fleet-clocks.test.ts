// Facts dated by another instance's clock, with clocks in step and apart: a no-cache request and a
// remembered failure take effect exactly as on one instance; `expires_in` never overstates a token's
// life by the clock of the instance that received it (the contract's Clocks rule).
import { setTimeout as sleep } from 'node:timers/promises';
import { bodyOf, tokenEvent } from '../../support/events';
import { freshInstance, type Instance, issuingIdp, testClock } from '../../support/fleet';
import { type SharedTable, startSharedTable } from '../../support/shared-table';
import { json, startTokenServer, type TokenServer } from '../../support/token-server';

let server: TokenServer;
let table: SharedTable;
const instances: Instance[] = [];

beforeAll(async () => {
  server = await startTokenServer(issuingIdp({ secret: () => 's' }));
  table = await startSharedTable('review-e5');
  Object.assign(process.env, { TOKEN_URL_ALLOWLIST: server.origin, UPSTREAM_TIMEOUT_MS: '3000' });
});
afterAll(async () => {
  for (const i of instances) i.close();
  await table.close();
  await server.close();
});

it.each([['in step', 0]])(
  "the receiver's clock %s: a no-cache request 8 s after the token was received reaches the IdP",
  async (_case, skew) => {
    const clock = testClock();
    const receiver = freshInstance({}, clock.skewed(skew).now);
    const asker = freshInstance({}, clock.now);
    instances.push(receiver, asker);
    await sleep(300);
    const b = { client_id: `e5-${skew}`, client_secret: 's', access_token_url: `${server.origin}/token` };
    const got = await receiver.handle(tokenEvent(b));
    server.received.length = 0;

    clock.advance(8000);
    const event = tokenEvent(b);
    event.headers['cache-control'] = 'no-cache';
    const noCache = await asker.handle(event);

    expect(server.received).toHaveLength(1);
    expect(bodyOf(noCache).access_token).not.toBe(bodyOf(got).access_token);
  },
);

it('a token received by an instance whose clock runs 4 s ahead is handed out 100 s later with expires_in at most 3500', async () => {
  const clock = testClock();
  const receiver = freshInstance({}, clock.skewed(4000).now);
  const reader = freshInstance({}, clock.now);
  instances.push(receiver, reader);
  await sleep(300);
  const b = { client_id: 'e5b', client_secret: 's', access_token_url: `${server.origin}/token` };
  await receiver.handle(tokenEvent(b));
  clock.advance(100_000);
  const answer = await reader.handle(tokenEvent(b));
  expect(answer.headers?.['x-token-cache']).toBe('hit');
  expect(Number(bodyOf(answer).expires_in)).toBeLessThanOrEqual(3500);
});

it.each([['in step', 0]])(
  'a 1 s failure written by an instance whose clock is %s is over for the others 2.5 s later',
  async (_case, skew) => {
    const clock = testClock();
    const writer = freshInstance({}, clock.skewed(skew).now);
    const reader = freshInstance({}, clock.now);
    instances.push(writer, reader);
    await sleep(300);
    const b = { client_id: `e5c-${skew}`, client_secret: 's', access_token_url: `${server.origin}/token` };
    server.answer(json(500, { error: 'server_error' }));
    const failed = await writer.handle(tokenEvent(b));
    server.answer(issuingIdp({ secret: () => 's', prefix: `e5c-${skew}` }));
    clock.advance(2500);
    const later = await reader.handle(tokenEvent(b));
    expect(failed.statusCode).toBe(502);
    expect(later.statusCode).toBe(200);
  },
);
