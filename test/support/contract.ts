// The contract's tables written out, not imported from lambda/: a test then holds the service to the
// contract rather than to itself.

/** Error code to HTTP status. */
export const CONTRACT_ERROR_STATUS = {
  invalid_request: 400,
  unauthorized: 401,
  token_url_not_allowed: 403,
  credential_not_allowed: 403,
  payload_too_large: 413,
  internal_error: 500,
  upstream_error: 502,
  upstream_throttled: 503,
  upstream_timeout: 504,
} as const;

export type ContractErrorCode = keyof typeof CONTRACT_ERROR_STATUS;

/** Every field of a token request, in the contract's order. */
export const CONTRACT_REQUEST_FIELDS = [
  'client_id',
  'client_secret',
  'access_token_url',
  'issuer',
  'grant_type',
  'scope',
  'audience',
  'token_endpoint_auth_method',
  'client_assertion',
  'client_assertion_type',
  'resource',
  'basic_credentials_encoding',
  'credential',
] as const;

/** The largest request body the function reads (64 KiB). */
export const MAX_BODY_BYTES = 65_536;

export const UNAUTHORIZED_DESCRIPTION = 'Unauthorized credentials provided';
export const ADDRESS_NOT_ALLOWED_DESCRIPTION = 'access_token_url points to an address that is not allowed';

/** The one text of every stored-credential refusal (403 credential_not_allowed), whatever failed. */
export const CREDENTIAL_NOT_ALLOWED_DESCRIPTION = 'This caller may not get a token for this credential with these parameters';
