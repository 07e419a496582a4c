import type { ServerResponse } from 'node:http';
import { systemClock } from '../../lambda/clock';
import type * as Config from '../../lambda/config';
import type * as GuardedAgents from '../../lambda/upstream/guarded-agents';
import type * as Handler from '../../lambda/handler';
import type { TokenHandler } from '../../lambda/handler';
import type { RequestRecord } from '../../lambda/observability';
import { recordingObservability } from './events';
import type { ReceivedRequest, Script } from './token-server';

/** One function instance: its own module instances (memory tier, agents, SDK client), and what it logged. */
export interface Instance {
  readonly handle: TokenHandler;
  readonly records: RequestRecord[];
  /** Close its keep-alive sockets. */
  close(): void;
}

/** Wall-clock time that stands still until a test moves it: an instance's clock, or a skewed one. */
export interface TestClock {
  readonly now: () => number;
  /** Move this clock by `ms` (and every clock made from it with {@link skewed}). */
  advance(ms: number): void;
  /** A clock that reads `ms` ahead of this one (behind, when negative), and moves with it. */
  skewed(ms: number): TestClock;
}

/** A clock stopped at the present moment (or `base`'s, `offset` ahead), moved only by `advance`. */
export function testClock(offset = 0, base?: TestClock): TestClock {
  let at = Date.now();
  const clock: TestClock = {
    now: () => (base ? base.now() : at) + offset,
    advance: (ms) => {
      if (base) base.advance(ms);
      else at += ms;
    },
    skewed: (ms) => testClock(ms, clock),
  };
  return clock;
}

/**
 * A fresh function instance as Lambda starts one: every module of the handler loaded anew
 * (jest.isolateModules), configured from process.env (and `env`) by the deployed code's own loadConfig. Two
 * instances share nothing but what lies outside the process: the IdP and the table. `clock` is its wall clock.
 */
export function freshInstance(env: Record<string, string> = {}, clock: () => number = Date.now): Instance {
  let instance: Instance | undefined;
  jest.isolateModules(() => {
    const { createHandler } = require('../../lambda/handler') as typeof Handler;
    const { loadConfig } = require('../../lambda/config') as typeof Config;
    const { destroyAgents } = require('../../lambda/upstream/guarded-agents') as typeof GuardedAgents;
    const observability = recordingObservability();
    instance = {
      handle: createHandler(loadConfig({ ...process.env, ...env }), observability, systemClock(clock)),
      records: observability.records,
      close: destroyAgents,
    };
  });
  if (!instance) throw new Error('the handler module did not load');
  return instance;
}

/** The client id and secret of a Basic authorization header (RFC 6749 2.3.1: form-encoded, then joined by a colon). */
export function basicCredentials(request: ReceivedRequest): { clientId: string; clientSecret: string } | undefined {
  const match = /^Basic (.+)$/.exec(request.headers.authorization ?? '');
  if (!match?.[1]) return undefined;
  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  const decode = (part: string) => decodeURIComponent(part.replace(/\+/g, ' '));
  return { clientId: decode(decoded.slice(0, colon)), clientSecret: decode(decoded.slice(colon + 1)) };
}

export interface IssuingOptions {
  /** The secret the IdP accepts right now (a function, so a test can rotate it). */
  readonly secret: () => string;
  /** `expires_in` of each token (default 3600); null to leave it out. */
  readonly expiresIn?: number | string | null;
  /** Answer this much later, as a real IdP takes its time. */
  readonly delayMs?: number;
  readonly prefix?: string;
}

/**
 * An IdP that checks the client secret (401 `invalid_client` otherwise) and issues a new, numbered
 * access token for every request, so a test can tell which request's token a caller got.
 */
export function issuingIdp({
  secret,
  expiresIn = 3600,
  delayMs = 0,
  prefix = 'issued',
}: IssuingOptions): Script & { issued: () => number } {
  let issued = 0;
  const script = (request: ReceivedRequest, response: ServerResponse): void => {
    const answer = () => {
      if (basicCredentials(request)?.clientSecret !== secret()) {
        response.writeHead(401, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ error: 'invalid_client' }));
        return;
      }
      issued++;
      const token = { access_token: `${prefix}-${issued}`, token_type: 'Bearer', ...(expiresIn === null ? {} : { expires_in: expiresIn }) };
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify(token));
    };
    if (delayMs > 0) setTimeout(answer, delayMs);
    else answer();
  };
  return Object.assign(script, { issued: () => issued });
}
