import { once } from 'node:events';
import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { Credentials } from './test-pki';

/** What the scripted token server received for one request. */
export interface ReceivedRequest {
  method: string;
  /** Which TCP connection (1-based, in order of arrival; over HTTPS, of completed handshake) carried the request. */
  connection: number;
  /** When its body had arrived (`performance.now()`). */
  at: number;
  /** Path and query exactly as sent. */
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
  form: URLSearchParams;
  /** The SNI host name the client sent, over HTTPS. */
  servername?: string;
}

/** How the server answers the next request(s): a plain function of the request. */
export type Script = (request: ReceivedRequest, response: ServerResponse) => void | Promise<void>;

export interface TokenServer {
  /** `http://HOST:PORT` (127.0.0.1 unless asked for another loopback address), or `https://localhost:PORT` over TLS. */
  readonly origin: string;
  readonly received: ReceivedRequest[];
  /** TCP connections accepted so far (keep-alive reuse shows as fewer connections than requests). */
  readonly connections: number;
  /** TLS handshakes completed so far, over HTTPS (a resumed session is a handshake too). */
  readonly handshakes: number;
  /** Replace how it answers from now on. */
  answer(script: Script): void;
  close(): Promise<void>;
}

/** Answers a JSON body with the given status. */
export const json =
  (status: number, body: unknown, headers: Record<string, string> = {}): Script =>
  (_request, response) => {
    response.writeHead(status, { 'content-type': 'application/json', ...headers });
    response.end(typeof body === 'string' ? body : JSON.stringify(body));
  };

export const DEMO_TOKEN = { access_token: 'scripted-access-token', token_type: 'Bearer', expires_in: 3600 };

/**
 * A small real HTTP token server on 127.0.0.1:0 (or another loopback host) that records every request (headers, form body,
 * path and query) and answers as scripted: the IdP side of the tests, over real sockets. Given a
 * certificate it serves HTTPS, and its origin names it `localhost`, the name the certificate is for.
 */
export async function startTokenServer(
  script: Script = json(200, DEMO_TOKEN),
  tls?: Credentials,
  host = '127.0.0.1',
): Promise<TokenServer> {
  let current = script;
  const received: ReceivedRequest[] = [];
  const sockets = new Set<Socket>();
  const connectionIds = new WeakMap<Socket, number>();
  let connections = 0;
  let handshakes = 0;
  const serve = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    const request: ReceivedRequest = {
      method: req.method ?? '',
      connection: connectionIds.get(req.socket) ?? 0,
      at: performance.now(),
      url: req.url ?? '',
      headers: req.headers,
      body,
      form: new URLSearchParams(body),
      ...(tls ? { servername: (req.socket as TLSSocket).servername || undefined } : {}),
    };
    received.push(request);
    try {
      await current(request, res);
    } catch {
      res.destroy();
    }
  };
  // serve() settles by itself: a script that throws ends its response.
  const listener: RequestListener = (req, res) => void serve(req, res);
  const server: Server = tls ? createHttpsServer(tls, listener) : createServer(listener);
  // Over HTTPS requests arrive on the TLS socket, not on the TCP socket 'connection' numbered.
  server.on('secureConnection', (socket: TLSSocket) => {
    handshakes += 1;
    connectionIds.set(socket, handshakes);
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    connections += 1;
    connectionIds.set(socket, connections);
    socket.on('close', () => sockets.delete(socket));
  });
  server.listen(0, host);
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    origin: tls ? `https://localhost:${port}` : `http://${host}:${port}`,
    received,
    get connections() {
      return connections;
    },
    get handshakes() {
      return handshakes;
    },
    answer(next) {
      current = next;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}
