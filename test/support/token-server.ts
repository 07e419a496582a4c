import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** What the scripted token server received for one request. */
export interface ReceivedRequest {
  method: string;
  /** Which TCP connection (1-based, in order of arrival) carried the request. */
  connection: number;
  /** Path and query exactly as sent. */
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
  form: URLSearchParams;
}

/** How the server answers the next request(s): a plain function of the request. */
export type Script = (request: ReceivedRequest, response: ServerResponse) => void | Promise<void>;

export interface TokenServer {
  /** `http://127.0.0.1:PORT`, or the address it was asked to listen on */
  readonly origin: string;
  readonly received: ReceivedRequest[];
  /** TCP connections accepted so far (keep-alive reuse shows as fewer connections than requests). */
  readonly connections: number;
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
 * A small real HTTP token server on 127.0.0.1:0 (or another loopback address) that records every
 * request (headers, form body, path and query) and answers as scripted: the IdP side of the tests,
 * over real sockets.
 */
export async function startTokenServer(script: Script = json(200, DEMO_TOKEN), host = '127.0.0.1'): Promise<TokenServer> {
  let current = script;
  const received: ReceivedRequest[] = [];
  const sockets = new Set<Socket>();
  const connectionIds = new WeakMap<Socket, number>();
  let connections = 0;
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    const request: ReceivedRequest = {
      method: req.method ?? '',
      connection: connectionIds.get(req.socket) ?? 0,
      url: req.url ?? '',
      headers: req.headers,
      body,
      form: new URLSearchParams(body),
    };
    received.push(request);
    try {
      await current(request, res);
    } catch {
      res.destroy();
    }
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
    origin: `http://${host}:${port}`,
    received,
    get connections() {
      return connections;
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
