import { once } from 'node:events';
import { join } from 'node:path';
import { loadConfig } from '../lambda/config';
import { destroyAgents } from '../lambda/guarded-agents';
import { createHandler } from '../lambda/handler';
import { createHttpApiGateway } from './http-api-gateway';
import { startIdp } from './idp';
import { startupBanner } from './startup-banner';

// `npm start`: the token routes on http://localhost:PORT through the deployed handler code, beside
// an embedded IdP so the printed curl works with no account anywhere.

function portFromEnv(name: string, fallback: number): number {
  const value = process.env[name]?.trim();
  if (value === undefined || value === '') return fallback;
  const port = Number(value);
  if (!/^\d+$/.test(value) || port > 65535) throw new Error(`Environment variable ${name} must be a port number from 0 to 65535`);
  return port;
}

async function main(): Promise<void> {
  // What the Lambda runtime and the stack set, so logs and metrics look as they do when deployed.
  process.env.AWS_LAMBDA_INITIALIZATION_TYPE ??= 'on-demand';
  process.env.POWERTOOLS_METRICS_NAMESPACE ??= 'TokenExchange';
  const port = portFromEnv('PORT', 3000);
  const idp = await startIdp({ port: portFromEnv('IDP_PORT', 3001) });
  // The user's entries stay; the embedded IdP's origin is added so the policy lets the service reach it.
  const allowlist = [process.env.TOKEN_URL_ALLOWLIST?.trim(), idp.issuer].filter(Boolean).join(',');
  const handler = createHandler(loadConfig({ ...process.env, TOKEN_URL_ALLOWLIST: allowlist }));

  const server = createHttpApiGateway({ handler, openApiPath: join(__dirname, '..', 'openapi.yaml') });
  server.listen(port, '127.0.0.1');
  try {
    await once(server, 'listening');
  } catch (error) {
    await idp.close();
    throw error;
  }
  const actualPort = (server.address() as { port: number }).port;
  process.stdout.write(startupBanner(`http://localhost:${actualPort}`, idp, allowlist));

  let stopping = false;
  const stop = async (): Promise<void> => {
    if (stopping) process.exit(1); // a second Ctrl-C: do not wait
    stopping = true;
    server.closeAllConnections();
    server.close();
    await Promise.all([once(server, 'close'), idp.close()]);
    destroyAgents();
  };
  process.on('SIGINT', () => void stop());
  process.on('SIGTERM', () => void stop());
}

main().catch((error: NodeJS.ErrnoException) => {
  const message = error.code === 'EADDRINUSE' ? `${error.message}: set PORT or IDP_PORT to a free port (0 picks one)` : error.message;
  process.stderr.write(`npm start failed: ${message}\n`);
  process.exit(1);
});
