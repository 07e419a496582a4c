import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { join } from 'node:path';
import type { Server } from 'node:http';
import { type Config, loadConfig } from '../lambda/config';
import { destroyAgents } from '../lambda/upstream/guarded-agents';
import type * as Handler from '../lambda/handler';
import { type LocalDynamoDb, localAwsEnvironment, LOCAL_TABLE_NAME, startLocalDynamoDb } from './dynamodb-local';
import { createHttpApiGateway } from './http-api-gateway';
import { startIdp } from './idp';
import { type LocalSecretsManager, startLocalSecretsManager } from './secrets-manager-local';
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

/** The name of the local stand-in's secret that holds the shared cache's pepper. */
const LOCAL_PEPPER_SECRET = 'token-cache-pepper';

/**
 * The function's configuration from this process's environment, read by the function's own rules
 * before anything starts: a bad value (a TOKEN_CACHE_TABLE DynamoDB would refuse, say) is a message
 * naming the variable, not an error from the local table. With `shared` the table is named
 * TOKEN_CACHE_TABLE, or `token-cache`, and the pepper is the local stand-in's.
 */
function localConfig(allowlist: string): Config {
  const tokenCacheTable = process.env.TOKEN_CACHE_TABLE?.trim() || LOCAL_TABLE_NAME;
  return loadConfig({
    ...process.env,
    TOKEN_URL_ALLOWLIST: allowlist,
    TOKEN_CACHE_TABLE: tokenCacheTable,
    TOKEN_CACHE_PEPPER_SECRET: LOCAL_PEPPER_SECRET,
  });
}

/**
 * With TOKEN_CACHE=shared: an embedded DynamoDB-compatible server holding the table, a Secrets Manager
 * stand-in holding a pepper made for this run, and this process's AWS SDK settings pointed at both,
 * so no AWS account is involved. Set before the handler module loads, since its shared tier starts
 * talking to both as it is created.
 */
async function startSharedTable(config: Config): Promise<{ table: LocalDynamoDb; secrets: LocalSecretsManager } | undefined> {
  if (config.tokenCache.mode !== 'shared') return undefined;
  const tableName = config.tokenCache.table;
  const table = await startLocalDynamoDb({ port: portFromEnv('DYNAMODB_PORT', 0), tableName });
  const secrets = await startLocalSecretsManager({ [LOCAL_PEPPER_SECRET]: randomBytes(32).toString('base64url') });
  Object.assign(process.env, localAwsEnvironment(table.endpoint, secrets.endpoint), {
    TOKEN_CACHE_TABLE: tableName,
    TOKEN_CACHE_PEPPER_SECRET: LOCAL_PEPPER_SECRET,
  });
  return { table, secrets };
}

async function listen(server: Server, port: number): Promise<number> {
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  return (server.address() as { port: number }).port;
}

async function main(): Promise<void> {
  // What the Lambda runtime and the stack set, so logs and metrics look as they do when deployed.
  process.env.AWS_LAMBDA_INITIALIZATION_TYPE ??= 'on-demand';
  process.env.POWERTOOLS_METRICS_NAMESPACE ??= 'TokenExchange';
  const port = portFromEnv('PORT', 3000);
  const idp = await startIdp({ port: portFromEnv('IDP_PORT', 3001) });
  const servers: Server[] = [];
  let local: Awaited<ReturnType<typeof startSharedTable>>;
  const stopAll = async (): Promise<void> => {
    for (const server of servers) server.closeAllConnections();
    await Promise.all([
      ...servers.map((server) => new Promise((resolve) => server.close(resolve))),
      idp.close(),
      local?.table.close(),
      local?.secrets.close(),
    ]);
    destroyAgents();
  };
  try {
    // The user's entries stay; the embedded IdP's origin is added so the policy lets the service reach it.
    const allowlist = [process.env.TOKEN_URL_ALLOWLIST?.trim(), idp.issuer].filter(Boolean).join(',');
    const config = localConfig(allowlist);
    local = await startSharedTable(config);
    const table = local?.table;
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded once the table's settings are in the environment
    const { createHandler } = require('../lambda/handler') as typeof Handler;
    const openApiPath = join(__dirname, '..', 'openapi.yaml');

    servers.push(createHttpApiGateway({ handler: createHandler(config), openApiPath }));
    const actualPort = await listen(servers[0] as Server, port);
    let secondInstanceUrl: string | undefined;
    if (table) {
      // A second handler with its own memory tier and table client: what another Lambda instance is.
      servers.push(createHttpApiGateway({ handler: createHandler(config), openApiPath }));
      secondInstanceUrl = `http://localhost:${await listen(servers[1] as Server, portFromEnv('SECOND_INSTANCE_PORT', 3002))}`;
    }
    const shared = table && secondInstanceUrl ? { endpoint: table.endpoint, tableName: table.tableName, secondInstanceUrl } : undefined;
    process.stdout.write(startupBanner(`http://localhost:${actualPort}`, idp, allowlist, shared));
  } catch (error) {
    await stopAll();
    throw error;
  }

  let stopping = false;
  const stop = async (): Promise<void> => {
    if (stopping) process.exit(1); // a second Ctrl-C: do not wait
    stopping = true;
    await stopAll();
  };
  process.on('SIGINT', () => void stop());
  process.on('SIGTERM', () => void stop());
}

main().catch((error: NodeJS.ErrnoException) => {
  const message =
    error.code === 'EADDRINUSE'
      ? `${error.message}: set PORT, IDP_PORT, SECOND_INSTANCE_PORT or DYNAMODB_PORT to a free port (0 picks one)`
      : error.message;
  process.stderr.write(`npm start failed: ${message}\n`);
  process.exit(1);
});
