import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import * as http from 'node:http';
import * as https from 'node:https';
import { isIP, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { AddressPermit } from '../policy/token-url-policy';

/** A connection was refused because an address its host resolved or connected to is not permitted. */
export class AddressNotAllowedError extends Error {
  override readonly name = 'AddressNotAllowedError';
  readonly code = 'ERR_ADDRESS_NOT_ALLOWED';
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;
type Lookup = (hostname: string, options: LookupOptions, callback: LookupCallback) => void;
type ConnectionCallback = (err: Error | null, stream: Duplex) => void;

/**
 * Wrap DNS resolution so every address a host resolves to must pass the permit: one refused
 * address refuses the host, so a record set mixing a public and an internal address cannot win a
 * race. Node connects only to addresses this lookup returned.
 */
function permittedLookup(permit: AddressPermit, lookup: Lookup): Lookup {
  return (hostname, options, callback) => {
    lookup(hostname, options, (err, address, family) => {
      if (err) return callback(err, address, family);
      const addresses = Array.isArray(address) ? address.map((entry) => entry.address) : [address];
      if (addresses.length === 0 || !addresses.every((candidate) => permit.allows(candidate))) {
        return callback(new AddressNotAllowedError(`${hostname} resolves to an address that is not allowed`), address, family);
      }
      return callback(null, address, family);
    });
  };
}

/**
 * The connect-time half of the token URL policy, shared by both agent classes: an IP-literal host
 * never goes through DNS, so it is checked here before a socket exists; a name goes through the
 * permitted lookup; and the address actually connected to is checked once more before TLS or HTTP
 * bytes are exchanged on it.
 */
function guardedConnect(
  permit: AddressPermit,
  options: http.ClientRequestArgs,
  callback: ConnectionCallback | undefined,
  connect: (options: http.ClientRequestArgs) => Duplex | null | undefined,
): Duplex | undefined {
  // Node's http always sets it (its default is 'localhost').
  const host = options.host as string;
  if (isIP(host) !== 0 && !permit.allows(host)) {
    const refusal = new AddressNotAllowedError(`${host} is not an allowed address`);
    // The agent hands this callback's error to the request as its 'error' event.
    if (callback) {
      callback(refusal, undefined as unknown as Duplex);
      return undefined;
    }
    throw refusal;
  }
  const socket = connect({
    ...options,
    lookup: permittedLookup(permit, (options.lookup as Lookup) ?? dnsLookup),
  } as http.ClientRequestArgs) as Socket;
  // First in line: tls.connect has already queued its handshake on 'connect', and a refused peer
  // must not receive even a ClientHello.
  socket.prependOnceListener('connect', () => {
    // An unknown peer reads as 'undefined', which no permit allows.
    const remote = String(socket.remoteAddress);
    if (!permit.allows(remote)) {
      socket.destroy(new AddressNotAllowedError(`connected to ${remote}, which is not allowed`));
    }
  });
  return socket;
}

// Keep-alive across warm invocations saves a TCP and TLS handshake per request. Idle sockets are
// dropped after 15 s idle (the `timeout` below), well before IdPs and load balancers close theirs (60 s and
// more), so a reused socket is rarely a dead one; exchange.ts retries the rare one that is.
const AGENT_OPTIONS = { keepAlive: true, timeout: 15_000, maxFreeSockets: 16, scheduling: 'lifo' } as const;

class GuardedHttpsAgent extends https.Agent {
  constructor(private readonly permit: AddressPermit) {
    super(AGENT_OPTIONS);
  }

  override createConnection(options: http.ClientRequestArgs, callback?: ConnectionCallback): Duplex | undefined {
    return guardedConnect(this.permit, options, callback, (opts) => super.createConnection(opts));
  }
}

class GuardedHttpAgent extends http.Agent {
  constructor(private readonly permit: AddressPermit) {
    super(AGENT_OPTIONS);
  }

  override createConnection(options: http.ClientRequestArgs, callback?: ConnectionCallback): Duplex | undefined {
    return guardedConnect(this.permit, options, callback, (opts) => super.createConnection(opts));
  }
}

const agents = new Map<string, http.Agent>();

/**
 * The pooled agent for a protocol and permit. Agents live at module scope so warm invocations
 * reuse their connections; each only ever connects where its permit allows.
 */
export function agentFor(protocol: string, permit: AddressPermit): http.Agent {
  const key = `${protocol}|${permit.key}`;
  const pooled = agents.get(key);
  if (pooled) return pooled;
  const agent = protocol === 'https:' ? new GuardedHttpsAgent(permit) : new GuardedHttpAgent(permit);
  agents.set(key, agent);
  return agent;
}

/** Close every pooled connection (local server shutdown, tests). */
export function destroyAgents(): void {
  for (const agent of agents.values()) agent.destroy();
  agents.clear();
}
