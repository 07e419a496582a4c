import { loadConfig } from '../lambda/config';
import { destroyAgents } from '../lambda/guarded-agents';
import { createHandler } from '../lambda/handler';
import { powertoolsObservability } from '../lambda/observability';
import { withPermit } from './support/configs';
import { tokenEvent } from './support/events';
import { DEMO_TOKEN, json, startTokenServer, type TokenServer } from './support/token-server';

const SECRET = 'observability-test-secret';
let server: TokenServer;

beforeAll(async () => {
  server = await startTokenServer();
});

afterAll(async () => {
  destroyAgents();
  await server.close();
});

/** Run `act` while capturing everything written to stdout and stderr. */
async function captureOutput(act: () => Promise<void>): Promise<string[]> {
  const lines: string[] = [];
  const capture = (chunk: unknown): boolean => {
    lines.push(...String(chunk).split('\n').filter(Boolean));
    return true;
  };
  const stdout = jest.spyOn(process.stdout, 'write').mockImplementation(capture);
  const stderr = jest.spyOn(process.stderr, 'write').mockImplementation(capture);
  try {
    await act();
  } finally {
    stdout.mockRestore();
    stderr.mockRestore();
  }
  return lines;
}

const parse = (lines: string[]) => lines.map((line) => JSON.parse(line) as Record<string, unknown>);

describe('structured logs and EMF metrics', () => {
  it('writes one JSON log line per request with its id, route, outcome, statuses, IdP host and latency', async () => {
    // Prepare
    const handle = createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: server.origin }), powertoolsObservability('INFO', 'TestNamespace'));
    server.answer(json(200, DEMO_TOKEN));

    // Act
    const lines = await captureOutput(async () => {
      await handle(tokenEvent({ client_id: 'a', client_secret: SECRET, access_token_url: `${server.origin}/token` }), {
        awsRequestId: 'req-123',
      });
    });

    // Assess
    const logs = parse(lines).filter((line) => line.message === 'token request');
    expect(logs).toHaveLength(1);
    expect(logs[0]).toMatchObject({
      level: 'INFO',
      service: 'token-exchange',
      request_id: 'req-123',
      route: 'POST /v1/oauth/token',
      outcome: 'ok',
      status: 200,
      idp_host: '127.0.0.1',
      idp_status: 200,
    });
    expect(typeof logs[0]?.latency_ms).toBe('number');
    expect(typeof logs[0]?.idp_latency_ms).toBe('number');
  });

  it('emits an EMF count per outcome and the IdP latency in the configured namespace', async () => {
    const handle = createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: server.origin }), powertoolsObservability('INFO', 'TestNamespace'));
    server.answer(json(401, { error: 'invalid_client' }));

    const lines = await captureOutput(async () => {
      await handle(tokenEvent({ client_id: 'a', client_secret: SECRET, access_token_url: `${server.origin}/token` }));
    });

    const emf = parse(lines).find((line) => '_aws' in line) as Record<string, unknown> & {
      _aws: { CloudWatchMetrics: { Namespace: string; Dimensions: string[][]; Metrics: { Name: string; Unit: string }[] }[] };
    };
    expect(emf).toBeDefined();
    const directive = emf._aws.CloudWatchMetrics[0];
    expect(directive?.Namespace).toBe('TestNamespace');
    expect(directive?.Dimensions[0]).toEqual(expect.arrayContaining(['service', 'outcome']));
    expect(directive?.Metrics.map((metric) => metric.Name).sort()).toEqual(['IdpLatency', 'Requests']);
    expect(emf).toMatchObject({ outcome: 'unauthorized', Requests: 1 });
  });

  it('logs a 5xx from the IdP at WARN, a bug at ERROR with its class name, and counts cache hits', async () => {
    // Prepare
    const config = loadConfig({ TOKEN_URL_ALLOWLIST: server.origin, TOKEN_CACHE: 'on' });
    const body = { client_id: 'a', client_secret: SECRET, access_token_url: `${server.origin}/token` };
    const broken = withPermit(config, 'broken', () => {
      throw Object.assign(new RangeError(`bug near ${SECRET}`), { code: 'ERR_BUG' });
    });

    // Act
    const lines = await captureOutput(async () => {
      const handle = createHandler(config, powertoolsObservability('INFO'));
      server.answer(json(503, { error: 'down' }));
      await handle(tokenEvent(body));
      server.answer(json(200, DEMO_TOKEN));
      await handle(tokenEvent(body));
      await handle(tokenEvent(body));
      await createHandler(broken, powertoolsObservability('INFO'))(tokenEvent(body));
    });

    // Assess
    const logs = parse(lines).filter((line) => line.message === 'token request');
    expect(logs.map((line) => [line.level, line.outcome, line.cache])).toEqual([
      ['WARN', 'upstream_error', 'miss'],
      ['INFO', 'ok', 'miss'],
      ['INFO', 'ok', 'memory'],
      ['ERROR', 'internal_error', undefined],
    ]);
    expect(logs[3]).toMatchObject({ error_name: 'RangeError', error_codes: ['ERR_BUG'] });
    const hits = parse(lines).filter((line) => line.CacheHits === 1);
    expect(hits).toHaveLength(1);
    expect(hits[0]).toMatchObject({ tier: 'memory' });
    expect(lines.join('\n')).not.toContain(SECRET);
  });

  it('never writes a secret, a token, an Authorization header or a request body at any level', async () => {
    // Prepare: the most verbose level, and every kind of outcome
    const handle = createHandler(
      loadConfig({ TOKEN_URL_ALLOWLIST: server.origin, UPSTREAM_TIMEOUT_MS: '200' }),
      powertoolsObservability('TRACE'),
    );
    const body = { client_id: 'logged-client', client_secret: SECRET, access_token_url: `${server.origin}/token` };
    const answers = [
      json(200, DEMO_TOKEN),
      json(400, { error: 'invalid_client', error_description: `bad ${SECRET}` }),
      json(500, `<html>${SECRET}</html>`),
      () => undefined,
    ];

    // Act
    const lines = await captureOutput(async () => {
      for (const answer of answers) {
        server.answer(answer);
        await handle(tokenEvent(body));
      }
      await handle(tokenEvent({ ...body, client_secret: `${SECRET}\u00e9` }));
      await handle(tokenEvent({ ...body, access_token_url: 'https://127.0.0.1/token' }));
      await handle(tokenEvent(JSON.stringify(body).slice(0, -3)));
    });

    // Assess
    const output = lines.join('\n');
    expect(parse(lines).filter((line) => line.message === 'token request')).toHaveLength(7);
    for (const forbidden of [SECRET, DEMO_TOKEN.access_token, 'Basic ', 'authorization', 'client_secret', 'logged-client']) {
      expect(output).not.toContain(forbidden);
    }
  });
});
