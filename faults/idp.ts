// The campaign's IdP: a node:http token server on 127.0.0.1 that answers each client id as the running scenario's script says
// at that moment, and names every token it issues so that an answer can be judged from outside: whose it is, when it was
// issued, and for how long.
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** What the IdP answers one request, after `delayMs`: a token of `expiresIn` s, a 429 with `retryAfter` s, or another error. */
export type IdpAnswer =
  | { readonly delayMs: number; readonly status: 200; readonly expiresIn: number }
  | { readonly delayMs: number; readonly status: 429; readonly retryAfter: number }
  | { readonly delayMs: number; readonly status: 401 | 502 };

/** The answer for key number `key` of the running scenario, `atMs` after it started. */
export type IdpScript = (key: number, atMs: number) => IdpAnswer;

/** One request the IdP received: when (epoch ms, at its arrival) and what it answered. */
export interface IdpVisit {
  readonly at: number;
  readonly status: number;
}

/** A token the IdP issued, read back from its name. */
export interface IssuedToken {
  readonly clientId: string;
  /** Epoch ms when the IdP sent it. */
  readonly issuedAt: number;
  readonly expiresIn: number;
}

export interface ScriptedIdp {
  readonly origin: string;
  readonly tokenUrl: string;
  /** Every request, by client id. */
  readonly visits: Map<string, IdpVisit[]>;
  /** From now on answer by `script`, its time counted from `startedAt` (epoch ms); a client id of no scenario gets a token. */
  play(script: IdpScript, startedAt: number): void;
  close(): Promise<void>;
}

/** The key number a scenario's client id ends with (`…-k3`), or undefined for any other client id. */
export const keyNumber = (clientId: string): number | undefined => {
  const match = /-k(\d+)$/.exec(clientId);
  return match ? Number(match[1]) : undefined;
};

const SEPARATOR = '~';

/** The client id, issue time and lifetime a token's name carries; undefined for a token this IdP did not issue. */
export function readToken(accessToken: unknown): IssuedToken | undefined {
  if (typeof accessToken !== 'string') return undefined;
  const [clientId, issuedAt, expiresIn] = accessToken.split(SEPARATOR);
  if (clientId === undefined || issuedAt === undefined || expiresIn === undefined) return undefined;
  return { clientId, issuedAt: Number(issuedAt), expiresIn: Number(expiresIn) };
}

const HEALTHY: IdpAnswer = { delayMs: 0, status: 200, expiresIn: 3600 };

export async function startScriptedIdp(): Promise<ScriptedIdp> {
  const visits = new Map<string, IdpVisit[]>();
  let current: { script: IdpScript; startedAt: number } = { script: () => HEALTHY, startedAt: Date.now() };
  const serve = (request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const at = Date.now();
      const clientId = clientIdOf(request, Buffer.concat(chunks).toString('utf8'));
      const key = keyNumber(clientId);
      const answer = key === undefined ? HEALTHY : current.script(key, at - current.startedAt);
      (visits.get(clientId) ?? visits.set(clientId, []).get(clientId))?.push({ at, status: answer.status });
      const send = () => {
        const headers: Record<string, string> = { 'content-type': 'application/json', 'cache-control': 'no-store' };
        if (answer.status === 429) headers['retry-after'] = String(answer.retryAfter);
        const body =
          answer.status === 200
            ? { access_token: [clientId, Date.now(), answer.expiresIn].join(SEPARATOR), token_type: 'Bearer', expires_in: answer.expiresIn }
            : { error: answer.status === 401 ? 'invalid_client' : answer.status === 429 ? 'slow_down' : 'server_error' };
        // The caller may have given up (its deadline, or a killed instance): nothing to answer then.
        if (!response.destroyed) response.writeHead(answer.status, headers).end(JSON.stringify(body));
      };
      if (answer.delayMs > 0) setTimeout(send, answer.delayMs);
      else send();
    });
  };
  const server = createServer(serve);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    origin,
    tokenUrl: `${origin}/token`,
    visits,
    play(script, startedAt) {
      current = { script, startedAt };
    },
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

/** The client id of a token request: from Basic authentication (RFC 6749 2.3.1, form-encoded), or from the body. */
function clientIdOf(request: IncomingMessage, body: string): string {
  const basic = /^Basic (.+)$/i.exec(request.headers.authorization ?? '');
  if (basic?.[1]) {
    const [user = ''] = Buffer.from(basic[1], 'base64').toString('utf8').split(':');
    return decodeURIComponent(user.replace(/\+/g, ' '));
  }
  return new URLSearchParams(body).get('client_id') ?? '';
}
