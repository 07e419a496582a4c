/**
 * Whether a request asks for a token the IdP issued just now: RFC 9111 5.2.1.4 `Cache-Control:
 * no-cache`, or 5.4 `Pragma: no-cache` when there is no Cache-Control.
 */
export function noCacheRequested(headers: Readonly<Record<string, string>>): boolean {
  const directives = header(headers, 'cache-control') ?? header(headers, 'pragma');
  return (
    directives !== undefined && directives.split(',').some((directive) => directive.split('=')[0]?.trim().toLowerCase() === 'no-cache')
  );
}

/** API Gateway lower-cases header names in payload 2.0; a direct invoke may not. */
function header(headers: Readonly<Record<string, string>>, name: string): string | undefined {
  return Object.entries(headers).find(([key]) => key.toLowerCase() === name)?.[1];
}
