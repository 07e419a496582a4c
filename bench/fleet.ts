// The fleet: K function instances, in this process or a process each, before a scripted token server, dynalite and the pepper's stand-in.
import { once } from 'node:events';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { build } from 'esbuild';
import { lambdaBuildOptions } from '../infra/bundling';
import { systemClock } from '../lambda/clock';
import type * as Config from '../lambda/config';
import type * as Handler from '../lambda/handler';
import type * as Observability from '../lambda/observability';
import { tokenEvent } from '../local/api-gateway-event';
import { startHandlerProcess } from '../local/handler-process';
import { startServicesProcess } from '../local/services-process';
import { type Bench, BENCH_TOKEN } from './report';

const ROOT = join(__dirname, '..');
export const [TABLE, PEPPER_SECRET, STORED_KEY] = ['fleet-bench', 'fleet-bench-pepper', 'alias/bench-stored-credential'];
// A real IdP takes tens to hundreds of milliseconds: the window in which a burst of misses piles up.
const HEALTHY_IDP: TokenScript = { delayMs: 50, expiresIn: 3600, failing: false };
export type Instance = Handler.TokenHandler;
/** `ms`: from when the request was due (`at`, performance.now()); `cache`: its answer's `x-token-cache`. */
export type Answer = { ms: number; status: number; cache: string };

/** What a scenario drives; `state.shift`: how far the instances' clock runs ahead of the real one, to age the kept tokens. */
export type Fleet = ReturnType<typeof fleetOf>;
function fleetOf(bench: Bench, idp: Awaited<ReturnType<typeof startTokenServer>>, code: string, env: Record<string, string>) {
  const state = { records: [] as Observability.RequestRecord[], shift: 0 };
  // The fleet's wall clock, moved by `state.shift`; its timers and deadlines are the system's.
  const clock = systemClock(() => Date.now() + state.shift);
  const reset = (script: Partial<TokenScript> = {}): void => {
    Object.assign(idp.script, HEALTHY_IDP, script);
    idp.requests.clear();
    state.records = [];
  };
  /** New function instances, the code loaded anew for each, configured from process.env as the stack configures it. */
  const instances = (size: number, mode: Config.TokenCacheMode): Instance[] =>
    Array.from({ length: size }, () => {
      delete require.cache[code];
      const lambda = require(code) as typeof Handler & typeof Config & typeof Observability;
      const config = lambda.loadConfig({ ...process.env, TOKEN_CACHE: mode });
      const logs = lambda.powertoolsObservability(config.logLevel);
      const record: Observability.Observability['record'] = (entry, context) => (state.records.push(entry), logs.record(entry, context));
      return lambda.createHandler(config, { record }, clock);
    });
  /** Instances in processes of their own, as Lambda runs them, from the sources; their log records join `state.records`. */
  const processes = async (size: number, mode: Config.TokenCacheMode) => {
    const started = await Promise.all(Array.from({ length: size }, () => startHandlerProcess({ ...process.env, TOKEN_CACHE: mode })));
    const take = (one: (typeof started)[number]) => state.records.push(...one.records.splice(0));
    const pool = started.map((one) => (event: Parameters<Instance>[0]) => one.invoke(event).finally(() => take(one)));
    return { pool, stop: () => Promise.all(started.map((one) => one.stop())) };
  };
  /** One request. With `expect`, a count or a latency is worthless unless it got a token (from that cache, unless `*`). */
  const ask = async (instance: Instance, key: string, expect?: string, at = performance.now()): Promise<Answer> => {
    const event = tokenEvent({ client_id: key, client_secret: 's', access_token_url: `${idp.origin}/token`, scope: 'read' });
    const { statusCode: status = 0, headers } = await instance(event);
    const answer = { ms: performance.now() - at, status, cache: String(headers?.['x-token-cache'] ?? '') };
    if (expect && (status !== 200 || (expect !== '*' && answer.cache !== expect))) throw new Error(`${key}: ${status} ${answer.cache}`);
    return answer;
  };
  const idpRequests = (keys: string[]): number[] => keys.map((key) => idp.requests.get(key)?.length ?? 0);
  // Callers every `everyMs` for the keys in turn, each taken by the instance idle longest or waiting for one, as API Gateway
  // waits for a function; a latency counts from when a caller was due, so a stall of this loop counts against its callers.
  const arrivals = async (pool: Instance[], keys: string[], everyMs: number, forMs: number, expect?: string): Promise<Answer[]> => {
    const [idle, waiting, calls] = [[...pool], [] as ((instance: Instance) => void)[], [] as Promise<Answer>[]];
    const call = async (key: string, at: number): Promise<Answer> => {
      const instance = idle.shift() ?? (await new Promise<Instance>((resolve) => waiting.push(resolve)));
      const answer = await ask(instance, key, expect, at);
      (waiting.shift() ?? ((done) => idle.push(done)))(instance);
      return answer;
    };
    for (let start = performance.now(), at = start; at < start + forMs; at += everyMs) {
      if (at > performance.now()) await sleep(at - performance.now());
      calls.push(call(keys[calls.length % keys.length] as string, at));
    }
    return Promise.all(calls);
  };
  return { bench, idp, env, state, reset, instances, processes, ask, idpRequests, arrivals };
}
// The instances run the deployed bundle's sources, built with its options from an entry that also exports `createHandler`
// (to give each instance its clock), in process.env as the stack sets it.
export async function withFleet<T>(bench: Bench, use: (fleet: Fleet) => Promise<T>): Promise<T> {
  const { entryPoints: _, ...options } = lambdaBuildOptions(join(bench.dir, 'fleet', 'index.js'));
  const contents = ['handler', 'config', 'observability'].map((name) => `export * from './lambda/${name}';`).join('\n');
  await build({ ...options, stdin: { contents, resolveDir: ROOT, loader: 'ts' } });
  const { environment } = await startServicesProcess(TABLE, PEPPER_SECRET, STORED_KEY);
  const [write, idp] = [[process.stdout.write, process.stderr.write], await startTokenServer({ ...HEALTHY_IDP })] as const;
  const fleet = fleetOf(bench, idp, options.outfile, environment);
  try {
    for (const name of ['AWS_PROFILE', 'AWS_SESSION_TOKEN', 'AWS_ENDPOINT_URL', 'LOG_LEVEL', 'NODE_DEBUG']) delete process.env[name];
    Object.assign(process.env, environment, { POWERTOOLS_METRICS_NAMESPACE: 'TokenExchange', TOKEN_URL_ALLOWLIST: idp.origin });
    // The instances' log lines (Lambda takes them from stdout and stderr) are written, but not to the terminal.
    process.stdout.write = process.stderr.write = () => true;
    return await use(fleet);
  } finally {
    [process.stdout.write, process.stderr.write] = write;
  }
}
/** What the token server answers, read at each request: after `delayMs`, a token of `expiresIn` seconds, or a 500 while `failing`. */
export type TokenScript = { delayMs: number; expiresIn: number; failing: boolean };
// The IdP, also the workers' (HTTPS with `tls`): in this process, so no measured one pays for it. Requests count by client id.
export async function startTokenServer(script: TokenScript, tls?: { cert: Buffer; key: Buffer }) {
  const [requests, headers] = [new Map<string, number[]>(), { 'content-type': 'application/json', 'cache-control': 'no-store' }];
  const serve = (request: IncomingMessage, response: ServerResponse) => {
    const [key = ''] = atob(request.headers.authorization?.slice('Basic '.length) ?? '').split(':');
    (requests.get(key) ?? requests.set(key, []).get(key))?.push(performance.now());
    const token = { access_token: BENCH_TOKEN, token_type: 'Bearer', expires_in: script.expiresIn, scope: 'read' };
    const [status, body] = script.failing ? [500, { error: 'server_error' }] : [200, token];
    const answer = () => response.writeHead(status, headers).end(JSON.stringify(body));
    request.resume().on('end', () => (script.delayMs > 0 ? setTimeout(answer, script.delayMs) : answer()));
  };
  let connections = 0;
  const server = tls ? createHttpsServer(tls, serve) : createHttpServer(serve);
  await once(server.on(tls ? 'secureConnection' : 'connection', () => connections++).listen(0, '127.0.0.1'), 'listening');
  const origin = `${tls ? 'https' : 'http'}://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { script, origin, requests, connections: () => connections };
}
