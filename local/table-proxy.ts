import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, request as forward } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/**
 * How the proxy treats the next requests: pass them through, pass them late (by `ms`, or by a time drawn
 * evenly between `ms` and `upToMs` for each), never answer, pass them
 * and never answer (the write lands, its answer is lost), cut the connection, or answer a DynamoDB
 * error itself (status and `__type`, as DynamoDB sends them). All but passing and cutting apply to every
 * request, or `only` to one operation, or only to requests whose body holds `matching` (one instance's
 * claim, say). `cut-answer` applies once: the next such request lands and its connection is cut before
 * the answer, as a network fault would; then the proxy passes (the client's retry too). `hold` keeps
 * every request until the test answers it ({@link TableProxy.nextHeld}), with what it likes.
 */
export type ProxyMode =
  | { kind: 'pass' }
  | { kind: 'delay'; ms: number; upToMs?: number; matching?: string }
  | { kind: 'hang'; only?: Operation; matching?: string }
  | { kind: 'lose-answer'; only?: Operation; matching?: string }
  | { kind: 'cut-answer'; only?: Operation; matching?: string }
  | { kind: 'reset' }
  | { kind: 'error'; status: number; type: string; only?: Operation; matching?: string }
  | { kind: 'hold' };

type Operation = 'GetItem' | 'PutItem' | 'DeleteItem';

/** A request the proxy holds: the table never sees it; its caller waits until the test answers. */
export interface HeldCall {
  readonly operation: string;
  readonly body: string;
  answer(status: number, body: string, headers?: Record<string, string>): void;
}

export interface TableProxy {
  /** `http://127.0.0.1:PORT`, for AWS_ENDPOINT_URL_DYNAMODB. */
  readonly endpoint: string;
  /** The operation (`DynamoDB_20120810.GetItem`) and JSON body of every request seen so far. */
  readonly received: { operation: string; body: string }[];
  set(mode: ProxyMode): void;
  /** The oldest request held and not yet taken, once there is one. */
  nextHeld(): Promise<HeldCall>;
  close(): Promise<void>;
}

/**
 * A small HTTP proxy on 127.0.0.1 in front of a DynamoDB-compatible server: the table in trouble, on
 * demand. It also does what DynamoDB does and dynalite does not: a conditional write refused with
 * `ReturnValuesOnConditionCheckFailure: ALL_OLD` comes back with the item that refused it.
 */
export async function startTableProxy(target: string): Promise<TableProxy> {
  let mode: ProxyMode = { kind: 'pass' };
  const received: { operation: string; body: string }[] = [];
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  const held: HeldCall[] = [];
  let arrived: () => void = () => undefined;
  const server = createServer((incoming, outgoing) => {
    const seen = { operation: String(incoming.headers['x-amz-target'] ?? ''), body: '' };
    received.push(seen);
    const chunks: Buffer[] = [];
    incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
    incoming.on('end', () => {
      seen.body = Buffer.concat(chunks).toString('utf8');
      const current = mode;
      const applies =
        (!('only' in current) || current.only === undefined || seen.operation.endsWith(`.${current.only}`)) &&
        (!('matching' in current) || current.matching === undefined || seen.body.includes(current.matching));
      if (current.kind === 'hang' && applies) return;
      if (current.kind === 'hold') {
        held.push({
          ...seen,
          answer: (status, body, headers = {}) => {
            outgoing.writeHead(status, { 'content-type': 'application/x-amz-json-1.0', ...headers });
            outgoing.end(body);
          },
        });
        arrived();
        return;
      }
      if (current.kind === 'cut-answer' && applies && mode === current) mode = { kind: 'pass' };
      if (current.kind === 'reset') {
        incoming.socket.destroy();
        return;
      }
      if (current.kind === 'error' && applies) {
        outgoing.writeHead(current.status, { 'content-type': 'application/x-amz-json-1.0' });
        outgoing.end(JSON.stringify({ __type: `com.amazonaws.dynamodb.v20120810#${current.type}`, message: 'scripted by the test proxy' }));
        return;
      }
      const pass = () => {
        void send(target, incoming.headers, seen.body)
          .then(async (answer) => {
            if (current.kind === 'lose-answer' && applies) return;
            if (current.kind === 'cut-answer' && applies) return void incoming.socket.destroy();
            const body = await withOldItem(target, incoming.headers, seen.body, answer);
            // The whole body is sent at once, with its length, never chunked.
            const { 'transfer-encoding': _chunked, ...headers } = answer.headers;
            outgoing.writeHead(answer.status, { ...headers, 'content-length': String(Buffer.byteLength(body)) });
            outgoing.end(body);
          })
          // The table gone mid-call (its read of the refusing item included, as at shutdown): the caller sees its connection drop.
          .catch(() => outgoing.destroy());
      };
      if (current.kind === 'delay' && applies) {
        const ms = current.ms + Math.random() * Math.max(0, (current.upToMs ?? current.ms) - current.ms);
        const timer = setTimeout(() => {
          timers.delete(timer);
          pass();
        }, ms);
        timers.add(timer);
      } else {
        pass();
      }
    });
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
    async nextHeld() {
      while (held.length === 0) await new Promise<void>((resolve) => (arrived = resolve));
      return held.shift() as HeldCall;
    },
    async close() {
      for (const timer of timers) clearTimeout(timer);
      for (const socket of sockets) socket.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

function send(target: string, headers: IncomingHttpHeaders, body: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const upstream = forward(
      target,
      { method: 'POST', headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) } },
      (answer) => {
        const chunks: Buffer[] = [];
        answer.on('data', (chunk: Buffer) => chunks.push(chunk));
        answer.on('end', () =>
          resolve({ status: answer.statusCode ?? 502, headers: answer.headers, body: Buffer.concat(chunks).toString('utf8') }),
        );
        answer.on('error', reject);
      },
    );
    upstream.on('error', reject);
    upstream.end(body);
  });
}

/** DynamoDB's answer to a refused conditional write that asked for ALL_OLD: the refusal, with the item in it. */
async function withOldItem(target: string, headers: IncomingHttpHeaders, requestBody: string, answer: Answer): Promise<string> {
  if (answer.status !== 400 || !answer.body.includes('ConditionalCheckFailedException')) return answer.body;
  const request = JSON.parse(requestBody) as {
    TableName: string;
    Item: Record<string, unknown>;
    ReturnValuesOnConditionCheckFailure?: string;
  };
  if (request.ReturnValuesOnConditionCheckFailure !== 'ALL_OLD') return answer.body;
  const read = await send(
    target,
    { ...headers, 'x-amz-target': 'DynamoDB_20120810.GetItem' },
    JSON.stringify({ TableName: request.TableName, Key: { pk: request.Item.pk }, ConsistentRead: true }),
  );
  const { Item } = JSON.parse(read.body) as { Item?: unknown };
  return Item === undefined ? answer.body : JSON.stringify({ ...(JSON.parse(answer.body) as object), Item });
}
