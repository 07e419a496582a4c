import type { APIGatewayProxyEventV2 } from 'aws-lambda';

/** Both paths are the same operation (the contract's Routes). */
export const TOKEN_PATHS = ['/v1/oauth/token', '/oauth/token'] as const;
export const TOKEN_ROUTE_KEYS: readonly string[] = TOKEN_PATHS.map((path) => `POST ${path}`);

/**
 * True when the event is for a token route. API Gateway only invokes the function for its two
 * routes, but an event can also come from a `$default` route, a named stage (whose name prefixes
 * the path) or a hand-made invocation, so the method and path are checked as API Gateway would.
 */
export function isTokenRoute(event: Pick<APIGatewayProxyEventV2, 'routeKey' | 'rawPath' | 'requestContext'>): boolean {
  if (TOKEN_ROUTE_KEYS.includes(event.routeKey)) return true;
  const http = event.requestContext?.http;
  if (http?.method !== 'POST') return false;
  const stage = event.requestContext.stage;
  return [http.path, event.rawPath].some((path) => isTokenPath(path) || isTokenPath(withoutStage(path, stage)));
}

function isTokenPath(path: string | undefined): boolean {
  return (TOKEN_PATHS as readonly string[]).includes(path ?? '');
}

/** `/prod/v1/oauth/token` under stage `prod` is `/v1/oauth/token`; undefined when the path has no such prefix. */
function withoutStage(path: string | undefined, stage: string | undefined): string | undefined {
  if (!path || !stage || stage === '$default' || !path.startsWith(`/${stage}/`)) return undefined;
  return path.slice(stage.length + 1);
}
