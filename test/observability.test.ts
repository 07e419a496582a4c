import { systemClock } from '../lambda/clock';
import { loadConfig } from '../lambda/config';
import { destroyAgents } from '../lambda/upstream/guarded-agents';
import { createHandler } from '../lambda/handler';
import { describeError, powertoolsObservability } from '../lambda/observability';
import { localLambdaContext } from '../local/lambda-context';
import { withPermit } from './support/configs';
import { tokenEvent } from './support/events';
import { issuerScript, metadataDocument, wellKnownPaths } from './support/scripted-issuer';
import { DEMO_TOKEN, json, type Script, startTokenServer, type TokenServer } from './support/token-server';

const SECRET = 'observability-test-secret';
let server: TokenServer;

const LAMBDA_ENV = { AWS_LAMBDA_INITIALIZATION_TYPE: 'on-demand', POWERTOOLS_METRICS_NAMESPACE: 'TestNamespace' };
const savedEnv = Object.fromEntries(Object.keys(LAMBDA_ENV).map((name) => [name, process.env[name]]));

beforeAll(async () => {
  server = await startTokenServer();
  // Set as the Lambda runtime and the stack set them; Powertools reads both itself.
  Object.assign(process.env, LAMBDA_ENV);
});

afterAll(async () => {
  for (const [name, value] of Object.entries(savedEnv)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
  destroyAgents();
  await server.close();
});

beforeEach(() => server.answer(json(200, DEMO_TOKEN)));

const tokenBody = (overrides: Record<string, unknown> = {}) => ({
  client_id: 'logged-client',
  client_secret: SECRET,
  access_token_url: `${server.origin}/token`,
  ...overrides,
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

const requestLogs = (lines: string[]) => parse(lines).filter((line) => line.message === 'token request');
const metricNames = (line: Record<string, unknown>) =>
  (line._aws as { CloudWatchMetrics: { Metrics: { Name: string }[] }[] }).CloudWatchMetrics[0]?.Metrics.map((metric) => metric.Name);

describe('the log line of each request', () => {
  it('carries the Lambda context Powertools takes from the invocation, cold start first', async () => {
    // Prepare
    const handle = createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: server.origin }), powertoolsObservability('INFO'));

    // Act
    const lines = await captureOutput(async () => {
      await handle(tokenEvent(tokenBody()), localLambdaContext('req-1', 'token-fn'));
      await handle(tokenEvent(tokenBody()), localLambdaContext('req-2', 'token-fn'));
    });

    // Assess
    expect(requestLogs(lines).map((line) => [line.function_request_id, line.cold_start, line.function_name])).toEqual([
      ['req-1', true, 'token-fn'],
      ['req-2', false, 'token-fn'],
    ]);
  });

  it('says what happened: route, outcome, statuses, IdP host and latencies, at INFO', async () => {
    // Prepare
    const handle = createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: server.origin }), powertoolsObservability('INFO'));

    // Act
    const before = performance.now();
    const lines = await captureOutput(async () => {
      await handle(tokenEvent(tokenBody()));
    });
    const elapsed = performance.now() - before;

    // Assess
    const [log] = requestLogs(lines);
    expect(log).toMatchObject({
      level: 'INFO',
      service: 'token-exchange',
      route: 'POST /v1/oauth/token',
      outcome: 'ok',
      status: 200,
      idp_host: '127.0.0.1',
      idp_status: 200,
    });
    expect(log?.latency_ms).toBeGreaterThanOrEqual(log?.idp_latency_ms as number);
    expect(log?.idp_latency_ms).toBeGreaterThan(0);
    expect(log?.latency_ms).toBeLessThanOrEqual(elapsed + 0.05); // rounded to 0.1 ms
    expect(log).not.toHaveProperty('error_name');
    expect(log).not.toHaveProperty('error_codes');
  });

  it.each([
    ['fails', json(503, { error: 'down' }), 'upstream_error', 503],
    // Never answered: the exchange gives up at UPSTREAM_TIMEOUT_MS.
    ['does not answer in time', () => undefined, 'upstream_timeout', undefined],
    ['asks to wait', json(429, { error: 'slow_down' }), 'upstream_throttled', 429],
  ])('is a WARN when the IdP %s', async (_case, script, outcome, idpStatus) => {
    // Prepare
    const handle = createHandler(
      loadConfig({ TOKEN_URL_ALLOWLIST: server.origin, UPSTREAM_TIMEOUT_MS: '300' }),
      powertoolsObservability('INFO'),
    );
    server.answer(script);

    // Act
    const lines = await captureOutput(async () => {
      await handle(tokenEvent(tokenBody()));
    });

    // Assess
    expect(requestLogs(lines).map((line) => [line.level, line.outcome, line.idp_status])).toEqual([['WARN', outcome, idpStatus]]);
  });

  it('is an ERROR naming the class and error codes of a bug, never its message', async () => {
    // Prepare
    const broken = withPermit(loadConfig({ TOKEN_URL_ALLOWLIST: server.origin }), 'broken', () => {
      throw new RangeError(`bug near ${SECRET}`, { cause: Object.assign(new Error('inner'), { code: 'ERR_INNER' }) });
    });
    const handle = createHandler(broken, powertoolsObservability('INFO'));

    // Act
    const lines = await captureOutput(async () => {
      await handle(tokenEvent(tokenBody()));
    });

    // Assess
    const [log] = requestLogs(lines);
    expect(log).toMatchObject({
      level: 'ERROR',
      outcome: 'internal_error',
      status: 500,
      error_name: 'RangeError',
      error_codes: ['ERR_INNER'],
    });
    expect(lines.join('\n')).not.toContain('bug near');
  });

  it('never holds a secret, a token, an Authorization header or a request body, at any level and outcome', async () => {
    // Prepare: the most verbose level, and every kind of outcome
    const handle = createHandler(
      loadConfig({ TOKEN_URL_ALLOWLIST: server.origin, UPSTREAM_TIMEOUT_MS: '200' }),
      powertoolsObservability('TRACE'),
    );
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
        await handle(tokenEvent(tokenBody()));
      }
      await handle(tokenEvent(tokenBody({ client_secret: `${SECRET}\u00e9` })));
      await handle(tokenEvent(tokenBody({ access_token_url: 'https://127.0.0.1/token' })));
      await handle(tokenEvent(JSON.stringify(tokenBody()).slice(0, -3)));
    });

    // Assess
    expect(requestLogs(lines).map((line) => line.outcome)).toEqual([
      'ok',
      'unauthorized',
      'upstream_error',
      'upstream_timeout',
      'invalid_request',
      'token_url_not_allowed',
      'invalid_request',
    ]);
    const output = lines.join('\n');
    for (const forbidden of [SECRET, DEMO_TOKEN.access_token, 'Basic ', 'authorization', 'client_secret', 'logged-client']) {
      expect(output).not.toContain(forbidden);
    }
  });
});

describe('the EMF metrics of each request', () => {
  it('count the request under its outcome with the IdP latency, in the namespace Powertools reads from its variable', async () => {
    // Prepare
    const handle = createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: server.origin }), powertoolsObservability('INFO'));
    server.answer(json(401, { error: 'invalid_client' }));

    // Act
    const lines = await captureOutput(async () => {
      await handle(tokenEvent(tokenBody()));
    });

    // Assess
    const [emf] = parse(lines).filter((line) => '_aws' in line);
    expect(emf).toMatchObject({
      _aws: { CloudWatchMetrics: [{ Namespace: 'TestNamespace', Dimensions: [['service', 'outcome']] }] },
      service: 'token-exchange',
      outcome: 'unauthorized',
      Requests: 1,
      IdpLatency: expect.any(Number),
    });
    expect(metricNames(emf as Record<string, unknown>)).toEqual(['Requests', 'IdpLatency']);
  });

  it('include one ColdStart, on the first request of an instance only', async () => {
    // Prepare
    const handle = createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: server.origin }), powertoolsObservability('INFO'));

    // Act
    const lines = await captureOutput(async () => {
      await handle(tokenEvent(tokenBody()), localLambdaContext('req-1', 'token-fn'));
      await handle(tokenEvent(tokenBody()), localLambdaContext('req-2', 'token-fn'));
    });

    // Assess
    const coldStarts = parse(lines).filter((line) => line.ColdStart !== undefined);
    expect(coldStarts).toEqual([expect.objectContaining({ ColdStart: 1, function_name: 'token-fn', service: 'token-exchange' })]);
  });

  it('add a cache line per request, dimensioned by the tier that answered', async () => {
    // Prepare
    const handle = createHandler(
      loadConfig({ TOKEN_URL_ALLOWLIST: server.origin, TOKEN_CACHE: 'memory' }),
      powertoolsObservability('INFO'),
    );

    // Act
    const lines = await captureOutput(async () => {
      await handle(tokenEvent(tokenBody()));
      await handle(tokenEvent(tokenBody()));
    });

    // Assess
    const cacheLines = parse(lines).filter((line) => line.tier !== undefined);
    expect(cacheLines.map((line) => [line.tier, line.CacheMisses, line.CacheHits])).toEqual([
      ['miss', 1, undefined],
      ['memory', undefined, 1],
    ]);
    expect(requestLogs(lines).map((line) => line.cache)).toEqual(['miss', 'memory']);
  });

  it('add the table latency to the cache line of a request that called the table, and count its table errors apart', async () => {
    // Prepare: a request the shared tier answered after 3.4 ms in table calls, one whose table call
    // failed (it went to the IdP), and one of memory alone.
    const observability = powertoolsObservability('INFO');
    const entry = { route: 'POST /v1/oauth/token', outcome: 'ok', status: 200, latency_ms: 9 } as const;

    // Act
    const lines = await captureOutput(async () => {
      observability.record({ ...entry, cache: 'shared', cache_table_latency_ms: 3.4 });
      observability.record({ ...entry, cache: 'miss', cache_table_latency_ms: 200, cache_error: 'TimeoutError' });
      observability.record({ ...entry, cache: 'memory' });
    });

    // Assess
    const cacheLines = parse(lines).filter((line) => line.tier !== undefined);
    expect(cacheLines.map((line) => [line.tier, line.CacheTableLatency])).toEqual([
      ['shared', 3.4],
      ['miss', 200],
      ['memory', undefined],
    ]);
    expect(parse(lines).filter((line) => line.CacheErrors !== undefined)).toEqual([expect.objectContaining({ CacheErrors: 1 })]);
  });

  it('count stale answers, refreshes ahead, remembered failures and holds, the last three on one undimensioned line', async () => {
    // Prepare: a 100 s token is refreshed ahead from 50 s and goes stale at 70 s
    let now = Date.now();
    const handle = createHandler(
      loadConfig({ TOKEN_URL_ALLOWLIST: server.origin, TOKEN_CACHE: 'memory' }),
      powertoolsObservability('INFO'),
      systemClock(() => now),
    );
    server.answer(json(200, { ...DEMO_TOKEN, expires_in: 100 }));

    // Act: a miss; a refresh ahead that fails; a stale answer from that remembered failure; a hold
    const lines = await captureOutput(async () => {
      await handle(tokenEvent(tokenBody()));
      now += 69_500;
      server.answer(json(500, { error: 'server_error' }));
      await handle(tokenEvent(tokenBody()));
      now += 700;
      await handle(tokenEvent(tokenBody()));
      server.answer(json(429, { error: 'slow_down' }));
      await handle(tokenEvent(tokenBody({ client_id: 'held-client' })));
      await handle(tokenEvent(tokenBody({ client_id: 'held-client' })));
    });

    // Assess
    const tierLines = parse(lines).filter((line) => line.tier !== undefined);
    expect(tierLines.map((line) => [line.tier, metricNames(line)])).toEqual([
      ['miss', ['CacheMisses']],
      ['memory', ['CacheHits']],
      ['stale', ['CacheStale']],
      ['miss', ['CacheMisses']],
      ['miss', ['CacheMisses']],
    ]);
    const events = parse(lines).filter((line) => line.tier === undefined && line.outcome === undefined && line._aws !== undefined);
    expect(events.map((line) => metricNames(line))).toEqual([['CacheRefreshesAhead'], ['CacheRememberedFailures'], ['CacheHolds']]);
    expect(events.every((line) => line.service === 'token-exchange')).toBe(true);
    expect(requestLogs(lines).map((line) => [line.cache, line.cache_refresh, line.cache_remembered])).toEqual([
      ['miss', undefined, undefined],
      ['memory', 'ahead', undefined],
      ['stale', undefined, 'failure'],
      ['miss', undefined, undefined],
      ['miss', undefined, 'hold'],
    ]);
  });
});

describe('the metadata step of a request by issuer, in the EMF line of its request', () => {
  const ISSUER_PATH = '/realms/observed';
  const byIssuer = () => tokenBody({ access_token_url: undefined, issuer: `${server.origin}${ISSUER_PATH}` });
  const publish = (document: Script) => server.answer(issuerScript({ [wellKnownPaths(ISSUER_PATH).oidc]: document }));
  const emfLines = (lines: string[]) => parse(lines).filter((line) => '_aws' in line && line.ColdStart === undefined);

  it('adds MetadataLatency when the metadata came from the network, and not when the kept copy answered', async () => {
    // Prepare
    const handle = createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: server.origin }), powertoolsObservability('INFO'));
    const issuer = `${server.origin}${ISSUER_PATH}`;
    publish(json(200, metadataDocument(issuer, `${issuer}/token`)));

    // Act
    const lines = await captureOutput(async () => {
      await handle(tokenEvent(byIssuer()));
      await handle(tokenEvent(byIssuer()));
    });

    // Assess
    const [fetched, kept] = emfLines(lines);
    expect(metricNames(fetched as Record<string, unknown>)).toEqual(['Requests', 'IdpLatency', 'MetadataLatency']);
    expect(fetched).toMatchObject({ outcome: 'ok', MetadataLatency: expect.any(Number) });
    expect(metricNames(kept as Record<string, unknown>)).toEqual(['Requests', 'IdpLatency']);
    const [log] = requestLogs(lines);
    expect(log).toMatchObject({ metadata_status: 200, metadata_latency_ms: fetched?.MetadataLatency });
  });

  it('adds MetadataFailures when the metadata step gave no endpoint, and logs why at WARN', async () => {
    // Prepare
    const handle = createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: server.origin }), powertoolsObservability('INFO'));
    publish(json(500, { error: 'down' }));

    // Act
    const lines = await captureOutput(async () => {
      await handle(tokenEvent(byIssuer()));
    });

    // Assess
    const [emf] = emfLines(lines);
    expect(metricNames(emf as Record<string, unknown>)).toEqual(['Requests', 'MetadataLatency', 'MetadataFailures']);
    expect(emf).toMatchObject({ outcome: 'upstream_error', Requests: 1, MetadataFailures: 1 });
    expect(requestLogs(lines)[0]).toMatchObject({
      level: 'WARN',
      idp_host: '127.0.0.1',
      metadata_status: 500,
      metadata_error: 'http_error',
    });
  });
});

describe('describeError', () => {
  it('names the class and the codes along the cause chain, through cause and a Boom-style data', () => {
    // Prepare
    const socketError = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
    const boom = Object.assign(new Error('Client request error'), { isBoom: true, data: socketError, code: 'ERR_BOOM' });
    const error = new TypeError('outer', { cause: boom });

    // Act
    const described = describeError(error);

    // Assess
    expect(described).toEqual({ error_name: 'TypeError', error_codes: ['ERR_BOOM', 'ECONNRESET'] });
  });

  it('stops after five links, so a long or endless chain costs nothing', () => {
    // Prepare: seven errors deep, each with its own code
    let error: Error = Object.assign(new Error('innermost'), { code: 'E7' });
    for (let depth = 6; depth >= 1; depth -= 1) error = Object.assign(new Error(`depth ${depth}`, { cause: error }), { code: `E${depth}` });

    // Act
    const described = describeError(error);

    // Assess
    expect(described.error_codes).toEqual(['E1', 'E2', 'E3', 'E4', 'E5']);
  });

  it('gives only the type of a thrown value that is not an Error', () => {
    expect(describeError('a string')).toEqual({ error_name: 'string' });
  });
});
