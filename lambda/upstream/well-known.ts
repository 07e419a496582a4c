/**
 * The two well-known addresses of an issuer's metadata, in the order they are tried: OpenID Connect
 * Discovery 1.0 4 (appended to the issuer, less a trailing `/`), then RFC 8414 3.1 (inserted
 * between the host and the path, less a trailing `/`).
 */
export function metadataUrls(issuer: URL): [URL, URL] {
  const path = issuer.pathname.replace(/\/$/, '');
  return [
    new URL(`${issuer.origin}${path}/.well-known/openid-configuration`),
    new URL(`${issuer.origin}/.well-known/oauth-authorization-server${path}`),
  ];
}
