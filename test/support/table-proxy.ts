import { once } from 'node:events';
import { createServer, request as forward } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/**
 * How the proxy treats the next requests: pass them through, pass them late, never answer, cut the
 * connection, or answer a DynamoDB error itself (status and `__type`, as DynamoDB sends them). Never
 * answering and the errors apply to every request, or `only` to one operation.
 */
export type ProxyMode =
  | { kind: 'pass' }
  | { kind: 'delay'; ms: number }
  | { kind: 'hang'; only?: Operation }
  | { kind: 'reset' }
  | { kind: 'error'; status: number; type: string; only?: Operation };

type Operation = 'GetItem' | 'PutItem' | 'DeleteItem';

export interface TableProxy {
  /** `http://127.0.0.1:PORT`, for AWS_ENDPOINT_URL_DYNAMODB. */
  readonly endpoint: string;
  /** The operation (`DynamoDB_20120810.GetItem`) and JSON body of every request seen so far. */
  readonly received: { operation: string; body: string }[];
  set(mode: ProxyMode): void;
  close(): Promise<void>;
}

/** A small HTTP proxy on 127.0.0.1 in front of a DynamoDB-compatible server: the table in trouble, on demand. */
export async function startTableProxy(target: string): Promise<TableProxy> {
  let mode: ProxyMode = { kind: 'pass' };
  const received: { operation: string; body: string }[] = [];
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  const server = createServer((incoming, outgoing) => {
    const seen = { operation: String(incoming.headers['x-amz-target'] ?? ''), body: '' };
    received.push(seen);
    incoming.on('data', (chunk: Buffer) => {
      seen.body += chunk.toString('utf8');
    });
    const current = mode;
    const applies = !('only' in current) || current.only === undefined || seen.operation.endsWith(`.${current.only}`);
    if (current.kind === 'hang' && applies) return;
    if (current.kind === 'reset') {
      incoming.socket.destroy();
      return;
    }
    if (current.kind === 'error' && applies) {
      incoming.resume();
      outgoing.writeHead(current.status, { 'content-type': 'application/x-amz-json-1.0' });
      outgoing.end(JSON.stringify({ __type: `com.amazonaws.dynamodb.v20120810#${current.type}`, message: 'scripted by the test proxy' }));
      return;
    }
    const pass = () => {
      const upstream = forward(`${target}${incoming.url ?? '/'}`, { method: incoming.method, headers: incoming.headers }, (answer) => {
        outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(outgoing);
      });
      upstream.on('error', () => outgoing.destroy());
      incoming.pipe(upstream);
    };
    if (current.kind === 'delay') {
      incoming.pause();
      const timer = setTimeout(() => {
        timers.delete(timer);
        pass();
      }, current.ms);
      timers.add(timer);
    } else {
      pass();
    }
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    set(next) {
      mode = next;
    },
    async close() {
      for (const timer of timers) clearTimeout(timer);
      for (const socket of sockets) socket.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}
