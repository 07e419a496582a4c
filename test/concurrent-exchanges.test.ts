import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig } from '../lambda/config';
import { destroyAgents } from '../lambda/upstream/guarded-agents';
import { createHandler } from '../lambda/handler';
import { bodyOf, recordingObservability, tokenEvent } from './support/events';
import { type ReceivedRequest, type Script, startTokenServer, type TokenServer } from './support/token-server';

// Each exchange learns its IdP status from the request its own attempt handed the pooled agent.
// Many exchanges in flight on one handler, with every outcome mixed, show that no attempt ever reads
// another's status or aborts another's request, and that the pool still keeps sockets alive.

// Generous, so that only the late answers miss it on a loaded machine.
const TIMEOUT_MS = 2500;

type Kind = 'ok' | 'unauthorized' | 'unavailable' | 'redirect' | 'slow' | 'late';
const KINDS: readonly Kind[] = ['ok', 'unauthorized', 'unavailable', 'redirect', 'slow', 'late'];

const EXPECTED: Record<Kind, { status: number; code?: string }> = {
  ok: { status: 200 },
  slow: { status: 200 },
  unauthorized: { status: 401, code: 'unauthorized' },
  unavailable: { status: 502, code: 'upstream_error' },
  redirect: { status: 502, code: 'upstream_error' },
  late: { status: 504, code: 'upstream_timeout' },
};

const tokenFor = (clientId: string) => ({ access_token: `token-of-${clientId}`, token_type: 'Bearer', expires_in: 300 });

/** Answers by the kind written into the client id, each with a body that names its own client. */
const byClientId: Script = async (request: ReceivedRequest, response) => {
  const clientId =
    Buffer.from((request.headers.authorization ?? '').replace(/^Basic /, ''), 'base64')
      .toString()
      .split(':')[0] ?? '';
  const kind = clientId.split('-')[0] as Kind;
  const answer = (status: number, headers: Record<string, string> = {}) => {
    response.writeHead(status, { 'content-type': 'application/json', ...headers });
    // Every answer carries a usable-looking token: only the status may tell them apart.
    response.end(JSON.stringify(tokenFor(clientId)));
  };
  if (kind === 'slow') await sleep(50 + Math.random() * 200);
  if (kind === 'late') await sleep(TIMEOUT_MS * 3, undefined, { ref: false });
  if (kind === 'unauthorized') return answer(401);
  if (kind === 'unavailable') return answer(503);
  if (kind === 'redirect') return answer(302, { location: 'https://elsewhere.invalid/token' });
  return answer(200);
};

let server: TokenServer;

beforeAll(async () => {
  server = await startTokenServer(byClientId);
});

afterAll(async () => {
  destroyAgents();
  await server.close();
});

describe('200 concurrent exchanges through one handler', () => {
  it('each get their own right answer, whatever the others get, and the pool keeps its sockets alive', async () => {
    // Prepare
    const observed = recordingObservability();
    const handle = createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: server.origin, UPSTREAM_TIMEOUT_MS: String(TIMEOUT_MS) }), observed);
    const clientIds = Array.from({ length: 200 }, (_, index) => `${KINDS[index % KINDS.length]}-${index}`);
    const call = (clientId: string) =>
      handle(tokenEvent({ client_id: clientId, client_secret: 's', access_token_url: `${server.origin}/token` }));

    // Act
    const results = await Promise.all(clientIds.map(call));

    // Assess
    results.forEach((result, index) => {
      const clientId = clientIds[index] as string;
      const expected = EXPECTED[clientId.split('-')[0] as Kind];
      expect({ clientId, status: result.statusCode }).toEqual({ clientId, status: expected.status });
      expect(bodyOf(result)).toEqual(
        expected.code === undefined ? tokenFor(clientId) : { code: expected.code, description: expect.any(String) },
      );
    });
    const idpStatuses = observed.records.map((record) => record.idp_status);
    expect(idpStatuses.filter((status) => status === 401)).toHaveLength(clientIds.filter((id) => id.startsWith('unauthorized')).length);
    expect(idpStatuses.filter((status) => status === 302)).toHaveLength(clientIds.filter((id) => id.startsWith('redirect')).length);

    // A burst opens one connection per request in flight; calls after it reuse them.
    const connectionsAfterBurst = server.connections;
    for (const clientId of ['ok-after-1', 'ok-after-2', 'ok-after-3']) {
      expect((await call(clientId)).statusCode).toBe(200);
    }
    expect(server.connections).toBe(connectionsAfterBurst);
  });
});
