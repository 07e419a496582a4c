import { once } from 'node:events';
import { createServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { LocalCert } from './tls-cert';

/** The fixed answer: what a typical IdP returns for a client-credentials grant. */
export const BENCH_TOKEN = { access_token: 'bench-access-token', token_type: 'Bearer', expires_in: 3600, scope: 'read' };
export const TOKEN_PATH = '/oauth2/token';

export interface BenchTokenServer {
  /** `https://127.0.0.1:PORT` */
  readonly origin: string;
  readonly tokenUrl: string;
  /** Requests answered so far, to check every measured call reached the server. */
  readonly answered: () => number;
  /** TLS connections accepted so far: a kept-alive client should need one. */
  readonly connections: () => number;
  close(): Promise<void>;
}

/**
 * The IdP side of the bench: HTTPS on 127.0.0.1:0 that reads each request body and answers the same
 * token JSON. It runs in the bench's own process, so the measured clients never pay for it.
 */
export async function startTokenServer(tls: LocalCert): Promise<BenchTokenServer> {
  const answer = JSON.stringify(BENCH_TOKEN);
  let answered = 0;
  let connections = 0;
  const sockets = new Set<Socket>();
  const server = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    req.resume();
    req.on('end', () => {
      answered++;
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store', 'content-length': Buffer.byteLength(answer) });
      res.end(answer);
    });
  });
  server.on('secureConnection', () => {
    connections++;
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const origin = `https://127.0.0.1:${port}`;
  return {
    origin,
    tokenUrl: `${origin}${TOKEN_PATH}`,
    answered: () => answered,
    connections: () => connections,
    async close() {
      for (const socket of sockets) socket.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}
