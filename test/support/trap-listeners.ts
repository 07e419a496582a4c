import * as diagnosticsChannel from 'node:diagnostics_channel';
import dns from 'node:dns';
import { once } from 'node:events';
import * as net from 'node:net';

/**
 * Loopback addresses a trap listens on, all on one port, so every encoding of "this machine" in a
 * payload lands on a trap whatever address family it ends up as.
 */
export const TRAP_HOSTS = ['127.0.0.1', '::1'] as const;

/** One connection a trap accepted. */
export interface AcceptedConnection {
  /** The trap address it arrived on. */
  readonly localAddress: string;
  /** Bytes the client sent before the connection closed (only counted when the trap holds connections). */
  bytes: number;
  readonly closed: Promise<void>;
}

export interface TrapListeners {
  readonly port: number;
  readonly hosts: readonly string[];
  /** Every connection accepted on any of the trap addresses, in order. */
  readonly accepted: AcceptedConnection[];
  /** Resolves once every accepted connection has closed, so `bytes` are final. */
  settled(): Promise<void>;
  close(): Promise<void>;
}

export interface TrapOptions {
  /** Addresses to listen on; all share one port. */
  hosts?: readonly string[];
  /**
   * Keep connections open and count what the client sends (to prove no byte was written), instead
   * of destroying each one as soon as it is accepted.
   */
  hold?: boolean;
}

/**
 * TCP listeners on loopback addresses that count every connection and never answer: a connection
 * that should not have happened shows up in `accepted`, and the client sees it die at once.
 */
export async function startTrapListeners(options: TrapOptions = {}): Promise<TrapListeners> {
  const hosts = options.hosts ?? TRAP_HOSTS;
  const accepted: AcceptedConnection[] = [];
  const open = new Set<net.Socket>();

  const onConnection = (socket: net.Socket): void => {
    const connection: AcceptedConnection = {
      localAddress: socket.localAddress ?? '',
      bytes: 0,
      closed: once(socket, 'close').then(() => undefined),
    };
    accepted.push(connection);
    socket.on('error', () => undefined);
    if (!options.hold) {
      socket.destroy();
      return;
    }
    open.add(socket);
    socket.on('data', (chunk: Buffer) => {
      connection.bytes += chunk.length;
    });
    socket.on('close', () => open.delete(socket));
  };

  const { servers, port } = await listenOnOnePort(hosts, onConnection);
  return {
    port,
    hosts,
    accepted,
    async settled() {
      await Promise.all(accepted.map((connection) => connection.closed));
    },
    async close() {
      for (const socket of open) socket.destroy();
      await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
    },
  };
}

// Port 0 on the first address, then the same port on the others; another process may hold that
// port on a later address, so start over with a new one a few times.
async function listenOnOnePort(
  hosts: readonly string[],
  onConnection: (socket: net.Socket) => void,
): Promise<{ servers: net.Server[]; port: number }> {
  for (let attempt = 0; attempt < 10; attempt++) {
    const servers: net.Server[] = [];
    let port = 0;
    try {
      for (const host of hosts) {
        const server = net.createServer(onConnection);
        servers.push(server);
        server.listen({ host, port, exclusive: true });
        await Promise.race([once(server, 'listening'), once(server, 'error').then(([error]) => Promise.reject(error))]);
        port = (server.address() as net.AddressInfo).port;
      }
      return { servers, port };
    } catch (error) {
      await Promise.all(servers.filter((server) => server.listening).map((server) => new Promise((resolve) => server.close(resolve))));
      if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error;
    }
  }
  throw new Error('no free port shared by every trap address');
}

/** A connection attempt the jail saw: where to, and whether it let it through. */
export interface ConnectAttempt {
  readonly host: string;
  readonly port: unknown;
  readonly allowed: boolean;
}

/**
 * The test process's network, locked to loopback. Non-loopback connections are refused before
 * the real `connect` runs (no SYN leaves, even if the guard under test is broken), names resolve
 * nowhere (a DNS query would leave the machine), and everything tried is recorded.
 */
export interface NetworkJail {
  /** Every `net.Socket#connect` call, loopback or not. */
  readonly attempts: ConnectAttempt[];
  /** Addresses the jail refused to connect to: anything that reached here got past the guard. */
  readonly refused: ConnectAttempt[];
  /** Names handed to `dns.lookup`; every one was answered ENOTFOUND without a query (IP literals are answered as themselves). */
  readonly lookups: string[];
  /** Client sockets `net.connect` created ('net.client.socket' channel). */
  socketsCreated(): number;
  /** Forget what was recorded (between cases). */
  reset(): void;
  release(): void;
}

// Independent of lambda/policy/address-ranges.ts on purpose: the jail must hold even if that is wrong.
const LOOPBACK = new net.BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');
LOOPBACK.addSubnet('::ffff:127.0.0.0', 104, 'ipv6');

/** True only for 127.0.0.0/8, ::1 and ::ffff:127.0.0.0/104: the only places a test may connect to. */
export function isJailLoopback(address: string): boolean {
  const family = net.isIP(address);
  if (family === 0) return false;
  return LOOPBACK.check(address, family === 6 ? 'ipv6' : 'ipv4');
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address?: string | dns.LookupAddress[], family?: number) => void;
type LookupFunction = (hostname: string, options: unknown, callback: LookupCallback) => void;

const jailError = (message: string): NodeJS.ErrnoException => Object.assign(new Error(message), { code: 'ENETUNREACH' });

/**
 * Lock the network: spies on `net.Socket.prototype.connect` (which `net.connect` and `tls.connect`
 * both go through) and on `dns.lookup`. Call `release()` when done.
 */
export function lockNetwork(): NetworkJail {
  const attempts: ConnectAttempt[] = [];
  const refused: ConnectAttempt[] = [];
  const lookups: string[] = [];
  let sockets = 0;
  const countSocket = (): void => {
    sockets++;
  };
  diagnosticsChannel.subscribe('net.client.socket', countSocket);

  const lookupSpy = jest.spyOn(dns, 'lookup').mockImplementation(((hostname: string, options: unknown, callback?: LookupCallback) => {
    const done = (typeof options === 'function' ? options : callback) as LookupCallback;
    // An IP literal needs no query (net.Server#listen asks for one): answer it as getaddrinfo would.
    const family = net.isIP(hostname);
    if (family !== 0) {
      const all = typeof options === 'object' && options !== null && (options as { all?: boolean }).all === true;
      process.nextTick(() => (all ? done(null, [{ address: hostname, family }]) : done(null, hostname, family)));
      return;
    }
    lookups.push(hostname);
    const error = Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND', syscall: 'getaddrinfo', hostname });
    process.nextTick(done, error);
  }) as unknown as typeof dns.lookup);

  // Whatever a custom lookup answers, only loopback answers reach the real connect.
  const jailedLookup =
    (inner: LookupFunction, port: unknown): LookupFunction =>
    (hostname, options, callback) =>
      inner(hostname, options, (err, address, family) => {
        if (err) return callback(err, address, family);
        const answers = Array.isArray(address) ? address.map((entry) => entry.address) : [String(address)];
        const outside = answers.filter((answer) => !isJailLoopback(answer));
        if (outside.length > 0) {
          for (const host of outside) refused.push({ host, port, allowed: false });
          return callback(jailError(`network jail: ${hostname} resolved outside loopback`));
        }
        return callback(null, address, family);
      });

  const realConnect = net.Socket.prototype.connect;
  const connectSpy = jest.spyOn(net.Socket.prototype, 'connect').mockImplementation(function (this: net.Socket, ...args: unknown[]) {
    const first = args[0];
    // net.connect passes its normalised [options, callback] array; tls.connect passes options.
    const holder: unknown[] = Array.isArray(first) ? first : args;
    const options: Record<string, unknown> =
      typeof holder[0] === 'object' && holder[0] !== null
        ? (holder[0] as Record<string, unknown>)
        : { port: holder[0], host: typeof holder[1] === 'string' ? holder[1] : 'localhost' };
    if (typeof options.path === 'string') return realConnect.apply(this, args as never);
    const host = typeof options.host === 'string' && options.host !== '' ? options.host : 'localhost';
    if (net.isIP(host) !== 0) {
      const attempt = { host, port: options.port, allowed: isJailLoopback(host) };
      attempts.push(attempt);
      if (!attempt.allowed) {
        refused.push(attempt);
        process.nextTick(() => this.destroy(jailError(`network jail: refused a connection to ${host}`)));
        return this;
      }
      return realConnect.apply(this, args as never);
    }
    attempts.push({ host, port: options.port, allowed: true });
    if (typeof holder[0] === 'object' && holder[0] !== null) {
      const lookup = (typeof options.lookup === 'function' ? options.lookup : dns.lookup) as LookupFunction;
      holder[0] = { ...options, lookup: jailedLookup(lookup, options.port) };
    }
    return realConnect.apply(this, args as never);
  });

  return {
    attempts,
    refused,
    lookups,
    socketsCreated: () => sockets,
    reset() {
      attempts.length = 0;
      refused.length = 0;
      lookups.length = 0;
      sockets = 0;
    },
    release() {
      connectSpy.mockRestore();
      lookupSpy.mockRestore();
      diagnosticsChannel.unsubscribe('net.client.socket', countSocket);
    },
  };
}
