import { loadConfig } from '../../lambda/config';
import { destroyAgents } from '../../lambda/upstream/guarded-agents';
import { createHandler, type TokenHandler } from '../../lambda/handler';
import { recordingObservability } from './events';
import { DEMO_TOKEN, json, startTokenServer, type TokenServer } from './token-server';

export interface ScriptedIdp {
  /** The scripted token server on 127.0.0.1, one for the test file. */
  server: TokenServer;
  /** A handler whose allowlist names the server; a test may replace it with one configured otherwise. */
  handle: TokenHandler;
  /** What `handle` logged, one record a request. */
  observed: ReturnType<typeof recordingObservability>;
}

/**
 * A test file's scripted IdP, by jest hooks: the server starts before the first test and closes,
 * with the pooled agents, after the last. Before each test it answers DEMO_TOKEN again and forgets
 * what it received, and `handle` is a fresh handler with `settings` over the allowlist.
 */
export function useScriptedIdp(settings: Record<string, string> = {}): ScriptedIdp {
  const idp = {} as ScriptedIdp;
  beforeAll(async () => {
    idp.server = await startTokenServer();
  });
  beforeEach(() => {
    idp.server.answer(json(200, DEMO_TOKEN));
    idp.server.received.length = 0;
    idp.observed = recordingObservability();
    idp.handle = createHandler(loadConfig({ TOKEN_URL_ALLOWLIST: idp.server.origin, ...settings }), idp.observed);
  });
  afterAll(async () => {
    destroyAgents();
    await idp.server.close();
  });
  return idp;
}
