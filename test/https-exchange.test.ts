import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { UPSTREAM_ERROR_DESCRIPTION } from '../lambda/errors';
import { bodyOf, tokenEvent } from './support/events';
import { type HandlerProcess, startHandlerProcess } from '../local/handler-process';
import { createTestCa } from './support/test-pki';
import { issuerScript, metadataDocument, requestLines, wellKnownPaths } from './support/scripted-issuer';
import { json, startTokenServer, type TokenServer } from './support/token-server';

// The IdP is reached by host name (`localhost`, which the system resolver maps to loopback; the
// allowlist entry `https://localhost:PORT` permits loopback) with a certificate from a CA made here.
// The handler trusts that CA the way an operator makes a function trust a private CA: a process
// started with NODE_EXTRA_CA_CERTS. Node reads that variable only at start-up, so the handler runs
// in a child process; `tls.setDefaultCACertificates` would allow it in-process, but it does not
// exist before Node 22.19, and this suite also runs on Node 20. Nothing in lambda/ learns of the CA.

const CONTRACT_HEADERS = { 'content-type': 'application/json', 'cache-control': 'no-store', pragma: 'no-cache' };
const UPSTREAM_ERROR = { code: 'upstream_error', description: UPSTREAM_ERROR_DESCRIPTION };
// Keys simple-oauth2 would rewrite or add to, so "unchanged" is tested where it could fail.
const IDP_TOKEN = {
  access_token: 'tls-access-token',
  token_type: 'Bearer',
  expires_in: 3600,
  expires_at: 'the IdP says so',
  scope: 'read',
};

let caDir: string;
let handler: HandlerProcess | undefined;
const servers: Record<'success' | 'sni' | 'reuse' | 'untrusted' | 'mismatch' | 'issuer', TokenServer> = {} as never;

const request = (server: TokenServer) =>
  tokenEvent({ client_id: 'tls-client', client_secret: 'tls-secret', access_token_url: `${server.origin}/oauth2/token` });

beforeAll(async () => {
  const trustedCa = createTestCa('Token exchange test CA');
  const otherCa = createTestCa('Untrusted test CA');
  const localhost = trustedCa.issue(['localhost']);
  servers.success = await startTokenServer(json(200, IDP_TOKEN), localhost);
  servers.sni = await startTokenServer(json(200, IDP_TOKEN), localhost);
  servers.reuse = await startTokenServer(json(200, IDP_TOKEN), localhost);
  servers.untrusted = await startTokenServer(json(200, IDP_TOKEN), otherCa.issue(['localhost']));
  servers.mismatch = await startTokenServer(json(200, IDP_TOKEN), trustedCa.issue(['idp.example.test']));
  servers.issuer = await startTokenServer(json(200, IDP_TOKEN), localhost);
  const issuer = `${servers.issuer.origin}/realms/tls`;
  servers.issuer.answer(
    issuerScript({ [wellKnownPaths('/realms/tls').oidc]: json(200, metadataDocument(issuer, `${issuer}/token`)) }, json(200, IDP_TOKEN)),
  );

  caDir = mkdtempSync(join(tmpdir(), 'https-exchange-'));
  const caFile = join(caDir, 'ca.pem');
  writeFileSync(caFile, trustedCa.cert);
  handler = await startHandlerProcess({
    NODE_EXTRA_CA_CERTS: caFile,
    TOKEN_URL_ALLOWLIST: Object.values(servers)
      .map((server) => server.origin)
      .join(','),
  });
});

afterAll(async () => {
  await handler?.stop();
  await Promise.all(Object.values(servers).map((server) => server.close()));
  rmSync(caDir, { recursive: true, force: true });
});

describe('an HTTPS exchange with an IdP reached by host name', () => {
  it("answers 200 with the IdP's token JSON unchanged when its certificate chains to a trusted CA", async () => {
    // Act
    const result = await handler?.invoke(request(servers.success));

    // Assess
    expect(result?.statusCode).toBe(200);
    expect(result?.headers).toEqual(CONTRACT_HEADERS);
    expect(bodyOf(result ?? {})).toStrictEqual(IDP_TOKEN);
    expect(servers.success.received).toHaveLength(1);
  });

  it('sends the host name as SNI', async () => {
    // Act
    await handler?.invoke(request(servers.sni));

    // Assess
    expect(servers.sni.received.map((received) => received.servername)).toEqual(['localhost']);
  });

  it('reuses one TLS connection for two exchanges with the same IdP', async () => {
    // Act
    const first = await handler?.invoke(request(servers.reuse));
    const second = await handler?.invoke(request(servers.reuse));

    // Assess
    expect([first?.statusCode, second?.statusCode]).toEqual([200, 200]);
    expect(servers.reuse.handshakes).toBe(1);
    expect(servers.reuse.received.map((received) => received.connection)).toEqual([1, 1]);
  });

  it('answers 502 upstream_error and sends nothing when the certificate comes from an untrusted CA', async () => {
    // Act
    const result = await handler?.invoke(request(servers.untrusted));

    // Assess
    expect(result?.statusCode).toBe(502);
    expect(result?.headers).toEqual(CONTRACT_HEADERS);
    expect(bodyOf(result ?? {})).toStrictEqual(UPSTREAM_ERROR);
    // It did connect: the TLS check refused the server, before the request and its secret went out.
    expect(servers.untrusted.connections).toBe(1);
    expect(servers.untrusted.received).toEqual([]);
    expect(handler?.records.at(-1)).toMatchObject({ outcome: 'upstream_error', idp_error: 'tls' });
  });

  it('answers 502 upstream_error and sends nothing when a trusted certificate names another host', async () => {
    // Act
    const result = await handler?.invoke(request(servers.mismatch));

    // Assess
    expect(result?.statusCode).toBe(502);
    expect(result?.headers).toEqual(CONTRACT_HEADERS);
    expect(bodyOf(result ?? {})).toStrictEqual(UPSTREAM_ERROR);
    expect(servers.mismatch.connections).toBe(1);
    expect(servers.mismatch.received).toEqual([]);
    expect(handler?.records.at(-1)).toMatchObject({ outcome: 'upstream_error', idp_error: 'tls' });
  });
});

describe('a request by issuer over HTTPS', () => {
  it('reads the metadata and posts the token request over TLS, on one connection', async () => {
    // Act
    const result = await handler?.invoke(
      tokenEvent({ client_id: 'tls-client', client_secret: 'tls-secret', issuer: `${servers.issuer.origin}/realms/tls` }),
    );

    // Assess
    expect(result?.statusCode).toBe(200);
    expect(bodyOf(result ?? {})).toStrictEqual(IDP_TOKEN);
    expect(requestLines(servers.issuer.received)).toEqual(['GET /realms/tls/.well-known/openid-configuration', 'POST /realms/tls/token']);
    expect(servers.issuer.received.map((received) => [received.servername, received.connection])).toEqual([
      ['localhost', 1],
      ['localhost', 1],
    ]);
  });
});
