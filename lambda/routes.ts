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
  const stagePrefix = event.requestContext.stage && event.requestContext.stage !== '$default' ? `/${event.requestContext.stage}` : '';
  return [http.path, event.rawPath].some(
    (path) =>
      typeof path === 'string' &&
      (isTokenPath(path) || (stagePrefix !== '' && path.startsWith(`${stagePrefix}/`) && isTokenPath(path.slice(stagePrefix.length)))),
  );
}

function isTokenPath(path: string): boolean {
  return (TOKEN_PATHS as readonly string[]).includes(path);
}
