import { isRecord } from '../type-guards';

/** Both paths are the same operation (the contract's Routes). */
export const TOKEN_PATHS = ['/v1/oauth/token', '/oauth/token'] as const;
export const TOKEN_ROUTE_KEYS: readonly string[] = TOKEN_PATHS.map((path) => `POST ${path}`);

/**
 * True when the event is for a token route. API Gateway only invokes the function for its two
 * routes, but an event can also come from a `$default` route, a named stage (whose name prefixes
 * the path) or a direct invoke that sends anything at all, so the event is read as untrusted and
 * the method and path are checked as API Gateway would.
 */
export function isTokenRoute(event: unknown): boolean {
  if (!isRecord(event)) return false;
  if (typeof event.routeKey === 'string' && TOKEN_ROUTE_KEYS.includes(event.routeKey)) return true;
  const context = event.requestContext;
  const http = isRecord(context) ? context.http : undefined;
  if (!isRecord(http) || http.method !== 'POST') return false;
  const stage = (context as Record<string, unknown>).stage;
  return [http.path, event.rawPath].some((path) => isTokenPath(path) || isTokenPath(withoutStage(path, stage)));
}

function isTokenPath(path: unknown): boolean {
  return (TOKEN_PATHS as readonly unknown[]).includes(path);
}

/** `/prod/v1/oauth/token` under stage `prod` is `/v1/oauth/token`; undefined when the path has no such prefix. */
function withoutStage(path: unknown, stage: unknown): string | undefined {
  if (typeof path !== 'string' || typeof stage !== 'string' || stage === '' || stage === '$default') return undefined;
  return path.startsWith(`/${stage}/`) ? path.slice(stage.length + 1) : undefined;
}
