/**
 * The contract's error table: every failure the service reports is an {@link ExchangeError} whose
 * `code` selects its HTTP status here, and nowhere else.
 */
export const ERROR_STATUS = {
  invalid_request: 400,
  unauthorized: 401,
  token_url_not_allowed: 403,
  credential_not_allowed: 403,
  payload_too_large: 413,
  upstream_error: 502,
  upstream_throttled: 503,
  upstream_timeout: 504,
  internal_error: 500,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

/**
 * A failure with a stable `code` and a `description` that is safe to show the caller. It carries
 * nothing else: the log line of an answered error names its code, and what the IdP did (its
 * status) is reported apart, so an underlying error would only be kept to be dropped.
 */
export class ExchangeError extends Error {
  constructor(
    readonly code: ErrorCode,
    readonly description: string,
  ) {
    super(description);
  }

  get statusCode(): number {
    return ERROR_STATUS[this.code];
  }
}

/** 503: the IdP asked the service to wait, for this many whole seconds (the `retry-after` header). */
export class UpstreamThrottled extends ExchangeError {
  declare readonly code: 'upstream_throttled';

  constructor(readonly retryAfterSeconds: number) {
    super('upstream_throttled', UPSTREAM_THROTTLED_DESCRIPTION);
  }
}

/** 400 naming the offending field, as the contract asks. */
export const invalidRequest = (description: string): ExchangeError => new ExchangeError('invalid_request', description);

/** 403 for a token URL the policy refuses; the description says which rule, never more. */
export const tokenUrlNotAllowed = (description: string): ExchangeError => new ExchangeError('token_url_not_allowed', description);

/**
 * 403 for a stored credential this caller may not use: the same text whether the name is unknown, the
 * caller unsigned or unlisted, or the scope, audience or resource outside the credential's, so a
 * refusal tells a caller nothing about which names exist or who may use them.
 */
export const credentialNotAllowed = (): ExchangeError =>
  new ExchangeError('credential_not_allowed', 'This caller may not get a token for this credential with these parameters');

/** The failures an exchange with the IdP can end in, besides a bug. */
export type UpstreamFailureCode = Extract<
  ErrorCode,
  'unauthorized' | 'token_url_not_allowed' | 'upstream_error' | 'upstream_throttled' | 'upstream_timeout'
>;

/** Retry-After is held between 1 and 60 s: long enough to matter, short enough that a bad value cannot silence a client for long. */
export const MAX_RETRY_AFTER_SECONDS = 60;

/**
 * The error for an exchange's failure, with its fixed description; a hold says how many seconds are
 * left (held between 1 and 60).
 */
export function upstreamFailure(code: UpstreamFailureCode, retryAfterSeconds = 1): ExchangeError {
  if (code === 'upstream_throttled') return new UpstreamThrottled(Math.min(MAX_RETRY_AFTER_SECONDS, Math.max(1, retryAfterSeconds)));
  return new ExchangeError(code, UPSTREAM_DESCRIPTIONS[code]);
}

/**
 * An error and what it wraps, outermost first. Wreck either boomifies a socket's own error in place
 * (keeping its class and code) or wraps it in a new Boom's `data`; other errors chain through `cause`.
 */
export function causeChain(error: unknown): object[] {
  const chain: object[] = [];
  let current: unknown = error;
  while (typeof current === 'object' && current !== null && chain.length < 5 && !chain.includes(current)) {
    chain.push(current);
    const link = current as { isBoom?: unknown; data?: unknown; cause?: unknown };
    current = link.isBoom === true ? link.data : link.cause;
  }
  return chain;
}

/** The refusal of an address, whether the policy sees it in the URL or the agent at connect time. */
const ADDRESS_NOT_ALLOWED_DESCRIPTION = 'access_token_url points to an address that is not allowed';

// Fixed texts: the caller learns the category, never the IdP's answer or an internal message.
const UNAUTHORIZED_DESCRIPTION = 'Unauthorized credentials provided';
export const UPSTREAM_ERROR_DESCRIPTION = 'The identity provider could not be reached or gave an unusable answer';
const UPSTREAM_THROTTLED_DESCRIPTION = 'The identity provider asked to wait before the next token request: retry after retry-after seconds';
export const UPSTREAM_TIMEOUT_DESCRIPTION = 'The identity provider did not answer in time';
export const INTERNAL_ERROR_DESCRIPTION = 'Internal error';

const UPSTREAM_DESCRIPTIONS: Record<Exclude<UpstreamFailureCode, 'upstream_throttled'>, string> = {
  unauthorized: UNAUTHORIZED_DESCRIPTION,
  token_url_not_allowed: ADDRESS_NOT_ALLOWED_DESCRIPTION,
  upstream_error: UPSTREAM_ERROR_DESCRIPTION,
  upstream_timeout: UPSTREAM_TIMEOUT_DESCRIPTION,
};
