import fc from 'fast-check';
import { loadConfig } from '../lambda/config';
import { destroyAgents } from '../lambda/upstream/guarded-agents';
import { createHandler, type TokenHandler } from '../lambda/handler';
import { CONTRACT_ERROR_STATUS } from './support/contract';
import { bodyOf, recordingObservability, restEventOf, tokenEvent } from './support/events';
import { startTokenServer, type TokenServer } from './support/token-server';

// A direct invoke (the console, the SDK, another function) can send any JSON value as the event.
// Whatever arrives, the handler answers with the contract's JSON: the 404 for what is not a token
// route, a 4xx for a token route API Gateway could never have sent, never a 500 or a rejection.

let server: TokenServer;
let handle: TokenHandler;
const invoke = (event: unknown) => handle(event as Parameters<TokenHandler>[0]);

beforeAll(async () => {
  server = await startTokenServer();
  handle = createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: server.origin, UPSTREAM_TIMEOUT_MS: '300' }), recordingObservability());
});

afterAll(async () => {
  destroyAgents();
  await server.close();
});

// Rows are built before the server starts; their events are refused before any URL is looked at
// (and a loopback port outside the allowlist would be refused by the policy, never connected to).
const validBody = () => ({ client_id: 'direct', client_secret: 's', access_token_url: 'http://127.0.0.1:1/token' });
const NOT_FROM_API_GATEWAY = 'The event is not an API Gateway HTTP API request';

describe('an event that is not a token route', () => {
  it.each([
    ['null', null],
    ['undefined', undefined],
    ['an empty object', {}],
    ['a number', 0],
    ['a string', 'POST /v1/oauth/token'],
    ['an array', [tokenEvent({})]],
  ])('answers 404 Not Found for %s', async (_name, event) => {
    // Act
    const result = await invoke(event);

    // Assess
    expect(result).toMatchObject({ statusCode: 404, body: '{"message":"Not Found"}' });
  });

  it.each([
    ['a routeKey that is not a string', { routeKey: ['POST /v1/oauth/token'] }],
    ['a request context that is a string', { requestContext: 'POST /v1/oauth/token' }],
    ['an http method that is not a string', { requestContext: { http: { method: ['POST'], path: '/v1/oauth/token' } } }],
    ['a path that is not a string', { requestContext: { http: { method: 'POST', path: { toString: 1 } }, stage: 'prod' } }],
    ['a stage that is not a string', { requestContext: { http: { method: 'POST', path: '/prod/v1/oauth/token' }, stage: 7 } }],
  ])('answers 404 for %s', async (_name, event) => {
    expect((await invoke(event)).statusCode).toBe(404);
  });
});

describe('a token route event API Gateway could never have sent', () => {
  const withField = (field: string, value: unknown) => ({ ...tokenEvent(validBody()), [field]: value });
  const withContentType = (value: unknown) => {
    const event = tokenEvent(validBody());
    return { ...event, headers: { ...event.headers, 'content-type': value } };
  };

  it.each([
    ['a body of 0', withField('body', 0), 'body must be a string'],
    ['a body of false', withField('body', false), 'body must be a string'],
    ['a body that is an object', withField('body', validBody()), 'body must be a string'],
    ['a body that is an array', withField('body', []), 'body must be a string'],
    ['a content-type that is a number', withContentType(1), 'headers must be an object of strings'],
    ['a content-type that is an array', withContentType(['application/json']), 'headers must be an object of strings'],
    ['headers that are an array', withField('headers', ['content-type: application/json']), 'headers must be an object of strings'],
    ['no headers', withField('headers', undefined), 'headers must be an object of strings'],
    [
      'no request context',
      { ...withField('requestContext', undefined), routeKey: 'POST /oauth/token' },
      'requestContext must be an object',
    ],
    ['an isBase64Encoded that is a string', withField('isBase64Encoded', 'true'), 'isBase64Encoded must be a boolean'],
  ])('answers 400 invalid_request for %s, naming the field', async (_name, event, problem) => {
    // Act
    const result = await invoke(event);

    // Assess
    expect(result.statusCode).toBe(400);
    expect(bodyOf(result)).toEqual({ code: 'invalid_request', description: `${NOT_FROM_API_GATEWAY}: ${problem}` });
    expect(server.received).toHaveLength(0);
  });

  it('reads an event without isBase64Encoded as one whose body is sent as it is', async () => {
    // Prepare
    const event: Record<string, unknown> = { ...tokenEvent(validBody()) };
    delete event.isBase64Encoded;

    // Act
    const result = await invoke(event);

    // Assess
    expect(result).toEqual(await invoke({ ...tokenEvent(validBody()), isBase64Encoded: false }));
    expect(bodyOf(result).description).not.toBe('isBase64Encoded must be a boolean');
  });

  it('reads a body of null as no body at all', async () => {
    // Act
    const result = await invoke(withField('body', null));

    // Assess
    expect(bodyOf(result)).toEqual({ code: 'invalid_request', description: 'The request body must be a JSON object' });
  });
});

describe('fuzzing the shape of the event', () => {
  const CONTRACT_STATUSES = new Set<number>([...Object.values(CONTRACT_ERROR_STATUS), 404].filter((status) => status !== 500));

  /** A token event with any of its fields replaced by any JSON-like value, or removed. */
  const oddEvent = fc
    .record(
      {
        routeKey: fc.oneof(fc.constant('POST /v1/oauth/token'), fc.anything()),
        headers: fc.oneof(fc.dictionary(fc.string(), fc.oneof(fc.string(), fc.anything())), fc.anything()),
        body: fc.oneof(fc.string(), fc.json(), fc.anything()),
        isBase64Encoded: fc.anything(),
        requestContext: fc.oneof(
          fc.record({ http: fc.record({ method: fc.anything(), path: fc.anything() }), stage: fc.anything() }),
          fc.anything(),
        ),
        rawPath: fc.anything(),
      },
      { requiredKeys: [] },
    )
    .map((fields) => ({ ...tokenEvent(validBody()), ...fields }));

  it('answers every shape with a contract status and a JSON body, and never throws', async () => {
    await fc.assert(
      fc.asyncProperty(oddEvent, async (event) => {
        // Act
        const result = await invoke(event);

        // Assess
        expect(CONTRACT_STATUSES.has(result.statusCode as number)).toBe(true);
        const body = bodyOf(result);
        expect(result.statusCode === 404 ? body : Object.keys(body)).toEqual(
          result.statusCode === 404 ? { message: 'Not Found' } : ['code', 'description'],
        );
      }),
      { numRuns: 400 },
    );
  });

  /** A REST API event (payload 1.0) with any of its fields replaced by any JSON-like value, or removed. */
  const oddRestEvent = fc
    .record(
      {
        httpMethod: fc.oneof(fc.constant('POST'), fc.anything()),
        resource: fc.oneof(fc.constant('/v1/oauth/token'), fc.anything()),
        path: fc.anything(),
        headers: fc.oneof(fc.dictionary(fc.string(), fc.oneof(fc.string(), fc.anything())), fc.anything()),
        multiValueHeaders: fc.oneof(fc.dictionary(fc.string(), fc.oneof(fc.array(fc.string()), fc.anything())), fc.anything()),
        body: fc.oneof(fc.string(), fc.json(), fc.anything()),
        isBase64Encoded: fc.anything(),
        requestContext: fc.oneof(fc.record({ identity: fc.oneof(fc.record({ userArn: fc.anything() }), fc.anything()) }), fc.anything()),
      },
      { requiredKeys: [] },
    )
    .map((fields) => ({ ...restEventOf(tokenEvent(validBody())), ...fields }));

  it("answers every shape of a REST API event with a contract status or the REST API's own 403, and never throws", async () => {
    await fc.assert(
      fc.asyncProperty(oddRestEvent, async (event) => {
        // Act
        const result = await invoke(event);

        // Assess
        // API Gateway's own answer for no route: the REST API's, or the HTTP API's where the event is no longer 1.0-shaped.
        const noRoute = [
          [403, '{"message":"Missing Authentication Token"}'],
          [404, '{"message":"Not Found"}'],
        ].some(([status, body]) => result.statusCode === status && result.body === body);
        expect(noRoute || (CONTRACT_STATUSES.has(result.statusCode) && Object.keys(bodyOf(result)).join() === 'code,description')).toBe(
          true,
        );
      }),
      { numRuns: 400 },
    );
  });
});
