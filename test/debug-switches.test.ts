import createDebug from 'debug';
import { loadConfig } from '../lambda/config';
import { destroyAgents } from '../lambda/upstream/guarded-agents';
import { createHandler } from '../lambda/handler';
import { recordingObservability, tokenEvent } from './support/events';
import { DEMO_TOKEN, json, startTokenServer, type TokenServer } from './support/token-server';

describe('NODE_DEBUG, which Node reads itself when the process starts', () => {
  it.each([
    ['http', 'http'],
    ['HTTPS', 'https'],
    ['fs,net', 'net'],
    ['tls', 'tls'],
    ['http2', 'http2'],
    ['ht*', 'http, https, http2'],
    ['*', 'http, https, net, tls, http2'],
  ])('refuses to start with NODE_DEBUG=%s, naming the variable and %s', (value, named) => {
    // Act
    const start = () => loadConfig({ NODE_DEBUG: value });

    // Assess
    expect(start).toThrow(
      `Environment variable NODE_DEBUG must not enable ${named}: Node's debug output of those modules prints request headers, client secrets among them`,
    );
  });

  // `.`, `?` and `+` are literal characters to Node, not pattern syntax.
  it.each(['fs', 'module,timer', 'httpx', 'xhttp', '', ' ', 'h.tp', 'ht.tp', 'https?', 'tls+'])(
    'starts with NODE_DEBUG=%j, which enables none of them',
    (value) => {
      expect(loadConfig({ NODE_DEBUG: value }).upstreamTimeoutMs).toBe(5000);
    },
  );
});

describe('DEBUG, which simple-oauth2 logs its request options through', () => {
  const SECRET = 'debug-test-secret-value';
  let server: TokenServer;
  let written: string[];
  let stderrWrite: jest.SpyInstance;

  beforeAll(async () => {
    server = await startTokenServer(json(200, DEMO_TOKEN));
  });

  beforeEach(() => {
    written = [];
    stderrWrite = jest.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    });
  });

  afterEach(() => {
    stderrWrite.mockRestore();
    createDebug.disable();
  });

  afterAll(async () => {
    destroyAgents();
    await server.close();
  });

  it.each(['client_secret_basic', 'client_secret_post'])(
    'prints no line of simple-oauth2 with every namespace enabled (%s)',
    async (method) => {
      // Prepare
      createDebug.enable('*');
      const handle = createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: server.origin }), recordingObservability());

      // Act
      const result = await handle(
        tokenEvent({
          client_id: 'debug-client',
          client_secret: SECRET,
          access_token_url: `${server.origin}/token`,
          token_endpoint_auth_method: method,
        }),
      );
      createDebug('another-package')('still printed');

      // Assess
      expect(result.statusCode).toBe(200);
      expect(written.join('')).not.toMatch(/simple-oauth2|Basic |debug-test-secret/);
      // The capture works, and only simple-oauth2's namespaces are dropped.
      expect(written.join('')).toContain('another-package still printed');
    },
  );

  it('keeps its writer in place: debug.log can be neither assigned nor redefined', () => {
    const original = createDebug.log;

    expect(() => {
      createDebug.log = () => undefined;
    }).toThrow(TypeError);
    expect(() => Object.defineProperty(createDebug, 'log', { value: () => undefined })).toThrow(TypeError);
    expect(createDebug.log).toBe(original);
  });
});

describe('silent-debug.ts, which stands in for the debug package in the deployed bundle', () => {
  // Loaded the way the bundle's alias loads it: as `debug` itself.
  const silentDebug = require('../lambda/bundle/silent-debug') as typeof createDebug;

  it('hands out loggers that are never enabled, and enabling changes nothing', () => {
    // Act
    silentDebug.enable('*');
    const logger = silentDebug('simple-oauth2:client');

    // Assess
    expect([logger.enabled, silentDebug.enabled('simple-oauth2:client'), silentDebug.disable()]).toEqual([false, false, '']);
    expect(logger('Authorization header set to %s', 'Basic c2VjcmV0')).toBeUndefined();
  });

  it('keeps the namespace of extended loggers, as simple-oauth2 may read it', () => {
    expect(silentDebug('simple-oauth2').extend('client').namespace).toBe('simple-oauth2:client');
  });
});
