import type { Clock, Deadline } from '../clock';
import type { CredentialByIssuer, CredentialRequest } from '../credentials/access-policy';
import { invalidRequest } from '../errors';
import { IssuerMetadata, type MetadataReport } from './issuer-metadata';
import { type ParsedTokenRequest, type TokenRequest, withMetadataMethod } from '../request/token-request';
import { type AllowlistEntry, checkTokenUrl, type TokenTarget } from '../policy/token-url-policy';

/** A request with its token URL, and where the token URL policy lets the exchange connect. */
export interface ResolvedRequest {
  readonly request: TokenRequest | CredentialRequest;
  readonly target: TokenTarget;
}

/**
 * Turns a parsed request into what the cache and the exchange work on, given the request's
 * deadline and a report for its log line.
 */
export type EndpointResolver = (
  request: ParsedTokenRequest | CredentialRequest | CredentialByIssuer,
  deadline: Deadline,
  report: MetadataReport,
) => Promise<ResolvedRequest>;

/**
 * The resolver of one function instance. A request by `access_token_url` is held to the token URL
 * policy as it stands; a request by `issuer` is held to it by its issuer, then takes the token
 * endpoint (itself held to the policy) and, unless named, the method from the issuer's metadata. Both
 * end in the same form, so the token cache keys a request by the endpoint found and the method chosen,
 * whichever way the caller named the IdP.
 */
export function createEndpointResolver(
  allowlist: readonly AllowlistEntry[],
  clock: Clock,
  metadata: IssuerMetadata = new IssuerMetadata(allowlist, undefined, clock),
): EndpointResolver {
  return async (parsed, deadline, report) => {
    if (!('issuer' in parsed)) return { request: parsed, target: checkTokenUrl(parsed.accessTokenUrl, allowlist) };
    const { issuer, ...asked } = parsed;
    const issuerTarget = checkIssuer(issuer, allowlist);
    report.host = issuerTarget.url.hostname;
    const endpoint = await metadata.tokenEndpoint(issuer, issuerTarget, deadline, report);
    // A stored credential names its own method.
    if ('credential' in asked) return { request: { ...asked, accessTokenUrl: endpoint.url }, target: endpoint.target };
    const { authentication, ...fields } = asked;
    const credentials =
      authentication.authMethod === 'from_metadata' ? withMetadataMethod(authentication, endpoint.authMethod) : authentication;
    return { request: { ...fields, ...credentials, accessTokenUrl: endpoint.url }, target: endpoint.target };
  };
}

/**
 * The issuer is held to the token URL policy as an `access_token_url` would be. RFC 8414 2 gives it
 * no query, and neither well-known form could be built from one.
 */
function checkIssuer(issuer: string, allowlist: readonly AllowlistEntry[]): TokenTarget {
  const target = checkTokenUrl(issuer, allowlist, 'issuer');
  if (issuer.includes('?')) throw invalidRequest('issuer must not have a query (RFC 8414 2)');
  return target;
}
