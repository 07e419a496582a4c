import type { APIGatewayProxyEventV2 } from 'aws-lambda';

/** Both paths are the same operation (the contract's Routes). */
export const TOKEN_PATHS = ['/v1/oauth/token', '/oauth/token'] as const;
export const TOKEN_ROUTE_KEYS: readonly string[] = TOKEN_PATHS.map((path) => `POST ${path}`);

/**
 * True when the event is for a token route. API Gateway only invokes the function for its two
 * routes, but an event can also come from a `$default` route or a hand-made invocation, so the
 * method and path are checked as API Gateway would.
 */
export function isTokenRoute(event: Pick<APIGatewayProxyEventV2, 'routeKey' | 'rawPath' | 'requestContext'>): boolean {
  if (TOKEN_ROUTE_KEYS.includes(event.routeKey)) return true;
  const method = event.requestContext?.http?.method;
  const path = event.requestContext?.http?.path ?? event.rawPath;
  return method === 'POST' && (TOKEN_PATHS as readonly string[]).includes(path);
}
