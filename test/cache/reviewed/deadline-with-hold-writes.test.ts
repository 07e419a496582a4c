// A review found answers leaving after the deadline while a client's hold was written to a slow table.
// The contract: everything a request does, table calls and waits included, ends within UPSTREAM_TIMEOUT_MS.
import { setTimeout as sleep } from 'node:timers/promises';
import { startTableProxy, type TableProxy } from '../../../local/table-proxy';
import { assertionClaims, generateCallerKey, signEs256 } from '../../support/caller-assertions';
import { tokenEvent } from '../../support/events';
import { freshInstance, type Instance, testClock } from '../../support/fleet';
import { type SharedTable, startSharedTable } from '../../support/shared-table';
import { json, startTokenServer, type TokenServer } from '../../support/token-server';

const DEADLINE_MS = 10_000; // hedge 400 ms, call limit 1 s
let server: TokenServer;
let table: SharedTable;
let proxy: TableProxy;
const instances: Instance[] = [];

beforeAll(async () => {
  server = await startTokenServer();
  table = await startSharedTable('review-e3');
  proxy = await startTableProxy(table.endpoint);
  Object.assign(process.env, {
    AWS_ENDPOINT_URL_DYNAMODB: proxy.endpoint,
    TOKEN_URL_ALLOWLIST: server.origin,
    UPSTREAM_TIMEOUT_MS: String(DEADLINE_MS),
  });
});
afterEach(() => proxy.set({ kind: 'pass' }));
afterAll(async () => {
  for (const i of instances) i.close();
  await proxy.close();
  await table.close();
  await server.close();
});

/** An IdP that answers 429 just before the deadline (its delay counted from the request's arrival there). */
const lateThrottle =
  (delayMs: number) =>
  (req: Parameters<Parameters<TokenServer['answer']>[0]>[0], res: Parameters<Parameters<TokenServer['answer']>[0]>[1]) => {
    setTimeout(() => void json(429, { error: 'slow_down' }, { 'retry-after': '30' })(req, res), delayMs);
  };

it("a caller's private_key_jwt request whose 429 comes 150 ms before the deadline is answered by the deadline", async () => {
  const member = freshInstance();
  instances.push(member);
  await sleep(300);
  const key = generateCallerKey();
  const tokenUrl = `${server.origin}/token`;
  const b = {
    client_id: 'e3-pkjwt',
    client_assertion: signEs256(key, assertionClaims('e3-pkjwt', tokenUrl)),
    client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
    access_token_url: tokenUrl,
  };
  // Every table call hangs from now on (the call limit ends each after 1 s).
  proxy.set({ kind: 'hang' });
  const started = performance.now();
  server.answer(lateThrottle(DEADLINE_MS - 150 - 400)); // the hold reads took the hedge (400 ms) before the exchange
  const answer = await member.handle(tokenEvent(b));
  const took = Math.round(performance.now() - started);
  expect(answer.statusCode).toBe(503);
  expect(took).toBeLessThanOrEqual(DEADLINE_MS + 50);
});

it("a proven key's refresh whose 429 comes 150 ms before the deadline is answered (stale) by the deadline", async () => {
  const clock = testClock();
  const member = freshInstance({}, clock.now);
  instances.push(member);
  await sleep(300);
  const b = { client_id: 'e3-proven', client_secret: 's', access_token_url: `${server.origin}/token` };
  server.answer(json(200, { access_token: 'kept', token_type: 'Bearer', expires_in: 3600 }));
  expect((await member.handle(tokenEvent(b))).statusCode).toBe(200);
  clock.advance(3_300_000); // stale: the next request asks the IdP
  // The hold item's calls hang (the key's item answers at once).
  proxy.set({ kind: 'hang', matching: table.holdKeysOf(b).itemKey });
  const started = performance.now();
  server.answer(lateThrottle(DEADLINE_MS - 150 - 400)); // the hold read took the hedge before the exchange
  const answer = await member.handle(tokenEvent(b));
  const took = Math.round(performance.now() - started);
  expect(answer.statusCode).toBe(200);
  expect(took).toBeLessThanOrEqual(DEADLINE_MS + 50);
});
