import { isRecord } from '../type-guards';
import { payloadFormat } from './gateway-event';

/** Both paths are the same operation (the contract's Routes). */
export const TOKEN_PATHS = ['/v1/oauth/token', '/oauth/token'] as const;
export const TOKEN_ROUTE_KEYS: readonly string[] = TOKEN_PATHS.map((path) => `POST ${path}`);

/** Where the public keys of stored credentials' KMS keys are published, for IdPs to fetch (RFC 7517 5). */
export const JWKS_PATH = '/.well-known/jwks.json';
export const JWKS_ROUTE_KEY = `GET ${JWKS_PATH}`;

/**
 * True when the event is for a token route. API Gateway only invokes the function for its routes,
 * but an event can also come from a `$default` route, a named stage (whose name prefixes the path),
 * a REST API's catch-all resource, or a direct invoke that sends anything at all, so the event is
 * read as untrusted and the method and path are checked as API Gateway would.
 */
export function isTokenRoute(event: unknown): boolean {
  return isRoute(event, 'POST', TOKEN_PATHS);
}

/** True when the event is for the JWKS route, read as {@link isTokenRoute} reads it. */
export function isJwksRoute(event: unknown): boolean {
  return isRoute(event, 'GET', [JWKS_PATH]);
}

function isRoute(event: unknown, method: string, paths: readonly string[]): boolean {
  if (!isRecord(event)) return false;
  // 1.0: the resource API Gateway matched, or the path a catch-all resource (`/{proxy+}`) took in.
  if (payloadFormat(event) === '1.0')
    return event.httpMethod === method && [event.resource, event.path].some((path) => paths.includes(path as string));
  if (typeof event.routeKey === 'string' && paths.some((path) => event.routeKey === `${method} ${path}`)) return true;
  const context = event.requestContext;
  const http = isRecord(context) ? context.http : undefined;
  if (!isRecord(http) || http.method !== method) return false;
  const stage = (context as Record<string, unknown>).stage;
  return [http.path, event.rawPath].some((path) => paths.includes(path as string) || paths.includes(withoutStage(path, stage) as string));
}

/** `/prod/v1/oauth/token` under stage `prod` is `/v1/oauth/token`; undefined when the path has no such prefix. */
function withoutStage(path: unknown, stage: unknown): string | undefined {
  if (typeof path !== 'string' || typeof stage !== 'string' || stage === '' || stage === '$default') return undefined;
  return path.startsWith(`/${stage}/`) ? path.slice(stage.length + 1) : undefined;
}
