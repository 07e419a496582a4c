import type { Deadline } from '../clock';
import { JWT_BEARER_ASSERTION_TYPE, signClientSecretJwt } from '../request/client-assertion';
import type { TokenRequest } from '../request/token-request';
import type { TokenTarget } from '../policy/token-url-policy';

// What simple-oauth2 is given for one token request; exchange.ts does the sending.

const MAX_ANSWER_BYTES = 1024 * 1024;
const USER_AGENT = 'token-exchange-service';
const BACKSTOP_GRACE_MS = 1000;

/**
 * simple-oauth2's configuration in the normalised form its own joi schema would produce (every
 * default filled in; a test holds the two equal). The grant is built from its parts with it, so
 * joi is never loaded: the request was validated more strictly before reaching here.
 */
export function grantConfig(request: TokenRequest, target: TokenTarget, deadline: Deadline) {
  return {
    client: { id: request.clientId, idParamName: 'client_id', ...clientCredential(request, target, deadline.clock.epoch()) },
    // The absolute URL as tokenPath: wreck resolves the path against tokenHost, so a relative path
    // such as `//169.254.169.254/x` could change the host; an absolute one resolves to itself.
    auth: { tokenHost: target.url.origin, tokenPath: target.url.href, refreshPath: target.url.href, revokePath: '/oauth/revoke' },
    options: {
      scopeSeparator: ' ',
      // RFC 6749 2.3.1: id and secret are form-encoded before the Basic header is built ('strict');
      // 'loose' sends them as given, for servers that never form-decode them.
      credentialsEncodingMode: request.basicCredentialsEncoding === 'raw' ? 'loose' : 'strict',
      bodyFormat: 'form',
      authorizationMethod: request.authMethod === 'client_secret_basic' ? 'header' : 'body',
    },
    http: {
      headers: { accept: 'application/json', 'user-agent': USER_AGENT },
      redirects: false,
      // Parse any answer as JSON whatever its content type; whether it is a usable token is
      // decided below, by its shape and the real status.
      json: 'force',
      maxBytes: MAX_ANSWER_BYTES,
      // A backstop only: the deadline timer aborts the whole attempt, connect to last byte. The
      // grace keeps this one from firing first: wreck's timer is the system's, not the request's
      // clock's, and an abort by wreck would read as an error the IdP caused, not a timeout.
      timeout: Math.max(1, deadline.leftMs()) + BACKSTOP_GRACE_MS,
    },
  } as const;
}

/**
 * What simple-oauth2 sends as the client's "secret", and under which form parameter. For the two
 * JWT methods (RFC 7523 2.2) that is the assertion as `client_assertion`, with `client_id` beside
 * it, so no client secret ever reaches the wire; the assertion type goes in {@link tokenParams}.
 */
function clientCredential(request: TokenRequest, target: TokenTarget, now: number): { secret: string; secretParamName: string } {
  switch (request.authMethod) {
    case 'client_secret_jwt':
      return {
        secret: signClientSecretJwt(request.clientId, request.clientSecret, target.url.href, now),
        secretParamName: 'client_assertion',
      };
    case 'private_key_jwt':
      return { secret: request.clientAssertion, secretParamName: 'client_assertion' };
    default:
      return { secret: request.clientSecret, secretParamName: 'client_secret' };
  }
}

/**
 * The token request's form parameters besides client authentication. An array value becomes one
 * parameter per item (simple-oauth2 encodes the form with `querystring`), as RFC 8707 2 wants
 * for `resource`.
 */
export function tokenParams(request: TokenRequest): Record<string, string | readonly string[]> {
  const params: Record<string, string | readonly string[]> = { grant_type: request.grantType };
  if (request.scope !== undefined) params.scope = request.scope;
  if (request.audience !== undefined) params.audience = request.audience;
  if (request.resource !== undefined) params.resource = request.resource;
  if (request.authMethod === 'client_secret_jwt' || request.authMethod === 'private_key_jwt') {
    params.client_assertion_type = JWT_BEARER_ASSERTION_TYPE;
  }
  return params;
}
