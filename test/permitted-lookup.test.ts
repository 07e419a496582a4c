import { once } from 'node:events';
import { request as httpRequest, type RequestOptions } from 'node:http';
import { AddressNotAllowedError, agentFor, destroyAgents } from '../lambda/upstream/guarded-agents';
import { type AddressPermit, parseAllowlist } from '../lambda/policy/token-url-policy';
import { startTokenServer, type TokenServer } from './support/token-server';

// Node hands the agent's lookup one address or a list, depending on whether the connection races
// address families (autoSelectFamily, on by default since Node 20). Both forms are checked.

let server: TokenServer;
let loopback: AddressPermit;

beforeAll(async () => {
  server = await startTokenServer();
  loopback = (parseAllowlist(`http://localhost:${new URL(server.origin).port}`)[0] as { permit: AddressPermit }).permit;
});

afterAll(async () => {
  destroyAgents();
  await server.close();
});

/** A GET to `localhost` through a guarded agent, resolving to the status or the connection error. */
async function getLocalhost(permit: AddressPermit, autoSelectFamily: boolean): Promise<number | Error> {
  // Passed through the agent to net.connect, which declares it; http's own types do not.
  const options: RequestOptions & { autoSelectFamily: boolean } = {
    host: 'localhost',
    port: new URL(server.origin).port,
    family: 4,
    autoSelectFamily,
    agent: agentFor('http:', permit),
  };
  const request = httpRequest(options);
  request.end();
  try {
    const [response] = (await once(request, 'response')) as [{ statusCode: number; resume(): void }];
    response.resume();
    return response.statusCode;
  } catch (error) {
    return error as Error;
  }
}

describe('the guarded lookup of a host name', () => {
  it.each([true, false])('connects when every address is permitted (autoSelectFamily %s)', async (autoSelectFamily) => {
    expect(await getLocalhost(loopback, autoSelectFamily)).toBe(200);
  });

  it.each([true, false])('refuses before connecting when an address is not permitted (autoSelectFamily %s)', async (autoSelectFamily) => {
    // Prepare
    const connectionsBefore = server.connections;
    const nothing: AddressPermit = { key: 'nothing', allows: () => false };

    // Act
    const result = await getLocalhost(nothing, autoSelectFamily);

    // Assess
    expect(result).toBeInstanceOf(AddressNotAllowedError);
    expect((result as Error).message).toBe('localhost resolves to an address that is not allowed');
    expect(server.connections).toBe(connectionsBefore);
  });
});
