import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { join } from 'node:path';
import type { Server } from 'node:http';
import { type Config, loadConfig } from '../lambda/config';
import { destroyAgents } from '../lambda/upstream/guarded-agents';
import type * as Handler from '../lambda/handler';
import type { TokenHandler } from '../lambda/handler';
import { DEMO_SECRETS, demoStoredCredentials, keylessClient, localJwksUri } from './demo-credentials';
import { type LocalDynamoDb, localAwsEnvironment, LOCAL_TABLE_NAME, startLocalDynamoDb } from './dynamodb-local';
import { createHttpApiGateway, type LocalApi } from './http-api-gateway';
import { type Idp, startIdp } from './idp';
import { type LocalKms, startLocalKms } from './kms-local';
import { exitOnHelp } from './script-entry';
import { type LocalSecretsManager, startLocalSecretsManager } from './secrets-manager-local';
import { type BannerCredentials, startupBanner } from './startup-banner';

// `npm start`: the token routes on http://localhost:PORT through the deployed handler code, beside
// an embedded IdP and stand-ins for KMS and Secrets Manager, so the printed curls work with no account
// anywhere: one with a caller's own secret, one with a stored credential whose client has none.

const HELP = `npm start [-- --api rest]

Serves the token routes on http://localhost:PORT through the function's own handler, beside an
embedded OAuth 2.0 server (oidc-provider) with demo clients, and stand-ins for KMS, Secrets Manager
and, with TOKEN_CACHE=shared, DynamoDB: no AWS account anywhere. It prints the demo clients and curls
that get a token.

Settings (environment):
  API=http|rest            the events the handler gets: an HTTP API's payload 2.0 (default) or a REST
                           API's 1.0; --api rest does the same. Unknown routes get the HTTP API's 404
  PORT, IDP_PORT           the service's and the IdP's ports on 127.0.0.1 (3000, 3001; 0: a free one)
  TOKEN_URL_ALLOWLIST      more IdPs the service may post to; the embedded IdP is always added
  TOKEN_CACHE=shared       a DynamoDB table (dynalite, DYNAMODB_PORT) and a second instance sharing it
                           on SECOND_INSTANCE_PORT (3002); memory and off as deployed
  STORED_CREDENTIALS, STORED_CREDENTIALS_FILE
                           your stored credentials instead of the demo's; their secrets and keys are
                           looked up in the local stand-ins, which hold only the demo's
  UPSTREAM_TIMEOUT_MS, LOG_LEVEL and the rest: as the function reads them (docs/CONFIGURATION.md)
`;

/** `API`, or `--api`: which API Gateway the local one stands in for. */
function apiFrom(args: readonly string[], env: NodeJS.ProcessEnv): LocalApi {
  const flag = args.indexOf('--api');
  const value = (flag === -1 ? env.API : args[flag + 1])?.trim().toLowerCase() || 'http';
  if (value !== 'http' && value !== 'rest') throw new Error(`API (or --api) must be http or rest, got "${value}"`);
  return value;
}

/** The stored credentials the shell names, if it names any: they replace the demo's. */
function shellCredentials(env: NodeJS.ProcessEnv): 'STORED_CREDENTIALS' | 'STORED_CREDENTIALS_FILE' | undefined {
  return (['STORED_CREDENTIALS', 'STORED_CREDENTIALS_FILE'] as const).find((name) => env[name]?.trim());
}

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
 * TOKEN_CACHE_TABLE, or `token-cache`, and the pepper is the local stand-in's. The stored credentials
 * are the shell's when it names any, else the demo ones.
 */
function localConfig(allowlist: string, demoCredentials: string | undefined): Config {
  const tokenCacheTable = process.env.TOKEN_CACHE_TABLE?.trim() || LOCAL_TABLE_NAME;
  return loadConfig({
    ...process.env,
    TOKEN_URL_ALLOWLIST: allowlist,
    TOKEN_CACHE_TABLE: tokenCacheTable,
    TOKEN_CACHE_PEPPER_SECRET: LOCAL_PEPPER_SECRET,
    ...(demoCredentials === undefined ? {} : { STORED_CREDENTIALS: demoCredentials }),
  });
}

/** The local stand-ins of the AWS services the function calls: never an AWS account. */
interface LocalAws {
  readonly secrets: LocalSecretsManager;
  /** With TOKEN_CACHE=shared. */
  readonly table?: LocalDynamoDb;
}

/**
 * A Secrets Manager stand-in holding the demo stored credential's secret (and, with TOKEN_CACHE=shared,
 * a pepper made for this run), the table in an embedded DynamoDB-compatible server when the cache is
 * shared, and this process's AWS SDK settings pointed at them and at the local KMS. Set before the
 * handler module loads, since its shared tier and stored credentials start talking to them as they are created.
 */
async function startLocalAws(config: Config, kms: LocalKms): Promise<LocalAws> {
  // Before the first client exists: the SDK's notice that its 2027 releases need Node.js 22 is beside the point here.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const secrets = await startLocalSecretsManager({ ...DEMO_SECRETS });
  if (config.tokenCache.mode !== 'shared') {
    Object.assign(process.env, localAwsEnvironment({ secretsManager: secrets.endpoint, kms: kms.endpoint }));
    return { secrets };
  }
  const tableName = config.tokenCache.table;
  secrets.set(LOCAL_PEPPER_SECRET, randomBytes(32).toString('base64url'));
  let table: LocalDynamoDb;
  try {
    table = await startLocalDynamoDb({ port: portFromEnv('DYNAMODB_PORT', 0), tableName });
  } catch (error) {
    await secrets.close();
    throw error;
  }
  Object.assign(process.env, localAwsEnvironment({ dynamoDb: table.endpoint, secretsManager: secrets.endpoint, kms: kms.endpoint }), {
    TOKEN_CACHE_TABLE: tableName,
    TOKEN_CACHE_PEPPER_SECRET: LOCAL_PEPPER_SECRET,
  });
  return { secrets, table };
}

async function listen(server: Server, port: number): Promise<number> {
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  return (server.address() as { port: number }).port;
}

/** A handler to give the gateway before the function's configuration exists: the IdP needs the gateway's port first. */
function deferredHandler(): { handler: TokenHandler; bind(handler: TokenHandler): void } {
  let bound: TokenHandler | undefined;
  return {
    handler: (event, context) => (bound ? bound(event, context) : Promise.reject(new Error('the handler is not loaded yet'))),
    bind: (handler) => {
      bound = handler;
    },
  };
}

async function main(args: readonly string[]): Promise<void> {
  const api = apiFrom(args, process.env);
  // What the Lambda runtime and the stack set, so logs and metrics look as they do when deployed.
  process.env.AWS_LAMBDA_INITIALIZATION_TYPE ??= 'on-demand';
  process.env.POWERTOOLS_METRICS_NAMESPACE ??= 'TokenExchange';
  const openApiPath = join(__dirname, '..', 'openapi.yaml');
  const first = deferredHandler();
  const instances = [first];
  const servers: Server[] = [createHttpApiGateway({ handler: first.handler, openApiPath, api })];
  let idp: Idp | undefined;
  let kms: LocalKms | undefined;
  let local: LocalAws | undefined;
  const stopAll = async (): Promise<void> => {
    for (const server of servers) server.closeAllConnections();
    await Promise.all([
      ...servers.map((server) => new Promise((resolve) => server.close(resolve))),
      idp?.close(),
      kms?.close(),
      local?.table?.close(),
      local?.secrets.close(),
    ]);
    destroyAgents();
  };
  try {
    // The gateway listens first: the embedded IdP knows the keyless client only by its JWKS URL.
    const port = await listen(servers[0] as Server, portFromEnv('PORT', 3000));
    const jwksUri = localJwksUri(port);
    idp = await startIdp({ port: portFromEnv('IDP_PORT', 3001), extraClients: [keylessClient(jwksUri)], loopbackJwksUris: [jwksUri] });
    kms = await startLocalKms();
    // The user's entries stay; the embedded IdP's origin is added so the policy lets the service reach it.
    const allowlist = [process.env.TOKEN_URL_ALLOWLIST?.trim(), idp.issuer].filter(Boolean).join(',');
    const from = shellCredentials(process.env);
    const config = localConfig(allowlist, from ? undefined : demoStoredCredentials(idp, kms));
    const credentials: BannerCredentials = from ? { from, names: config.storedCredentials.map(({ name }) => name) } : { from: 'demo' };
    local = await startLocalAws(config, kms);
    const table = local.table;
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded once the local AWS settings are in the environment
    const { createHandler } = require('../lambda/handler') as typeof Handler;
    let secondInstanceUrl: string | undefined;
    if (table) {
      // A second handler with its own memory tier and table client: what another Lambda instance is.
      const second = deferredHandler();
      instances.push(second);
      servers.push(createHttpApiGateway({ handler: second.handler, openApiPath, api }));
      secondInstanceUrl = `http://localhost:${await listen(servers[1] as Server, portFromEnv('SECOND_INSTANCE_PORT', 3002))}`;
    }
    for (const instance of instances) instance.bind(createHandler(config));
    const shared = table && secondInstanceUrl ? { endpoint: table.endpoint, tableName: table.tableName, secondInstanceUrl } : undefined;
    process.stdout.write(startupBanner({ serviceUrl: `http://localhost:${port}`, idp, allowlist, jwksUri, api, credentials, shared }));
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

exitOnHelp(HELP);

main(process.argv.slice(2)).catch((error: NodeJS.ErrnoException) => {
  const message =
    error.code === 'EADDRINUSE'
      ? `${error.message}: set PORT, IDP_PORT, SECOND_INSTANCE_PORT or DYNAMODB_PORT to a free port (0 picks one)`
      : error.message;
  process.stderr.write(`npm start failed: ${message}\n`);
  process.exit(1);
});
