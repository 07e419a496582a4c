import { ConnectionError, type Send, type SmokeAnswer, type SmokeRequest } from './http';

/** A client that can get a token from the deployed service's IdP, for the end-to-end check. */
export interface TokenClient {
  readonly clientId: string;
  readonly clientSecret: string;
  readonly tokenUrl: string;
  /** The IdP's issuer: the same client gets a token by it too (the endpoint from its metadata). */
  readonly issuer?: string;
}

/** A stored credential this caller (the SigV4 signer) may use, for the end-to-end check. */
export interface StoredCredentialAsk {
  readonly name: string;
  readonly scope?: string;
}

/** `auto`: sign with SigV4 from the moment API Gateway refuses an unsigned request as IAM APIs do. */
export type SigningMode = 'auto' | 'always' | 'never';

export interface SmokeOptions {
  readonly send: Send;
  readonly signing: SigningMode;
  /** Why requests cannot be signed (no region), when they cannot. */
  readonly cannotSign?: string;
  readonly token?: TokenClient;
  readonly credential?: StoredCredentialAsk;
  /** A second token request answered `x-token-cache: miss` fails instead of being reported. */
  readonly expectCacheHit?: boolean;
}

export type Verdict = 'PASS' | 'FAIL' | 'SKIP';

export interface CheckResult {
  readonly verdict: Verdict;
  readonly name: string;
  readonly detail: string;
}

interface Check {
  readonly name: string;
  readonly request: SmokeRequest;
  judge(answer: SmokeAnswer): { ok: boolean; detail: string };
}

/**
 * The instance metadata address: the service must refuse it as a token URL before connecting
 * (403 token_url_not_allowed), so nothing is ever sent there, by the service or by this check.
 */
export const METADATA_TOKEN_URL = 'https://169.254.169.254/latest/api/token';

const TOKEN_PATHS: readonly string[] = ['/v1/oauth/token', '/oauth/token'];
const JWKS_PATH = '/.well-known/jwks.json';
// API Gateway's own answers for a route it does not have: the HTTP API's, and a REST API's (which it also gives unsigned IAM callers).
const NOT_FOUND = 'Not Found';
const MISSING_TOKEN = 'Missing Authentication Token';

/**
 * Checks a running service against the contract, reporting each check as it ends: both token routes
 * answer `400 invalid_request` to an empty body and `403 token_url_not_allowed` to the metadata
 * address, another path gets API Gateway's own answer (an HTTP API's `404`, a REST API's `403`), the
 * JWKS is public keys or absent; with a client a token is issued (behind a cache, issued again from
 * it), and by issuer when one is named; with a stored credential, its token, and an unknown name
 * refused. A check without what it needs is reported skipped. The first answer that is no HTTP answer
 * stops the run.
 */
export async function runSmokeChecks(options: SmokeOptions, report: (result: CheckResult) => void): Promise<CheckResult[]> {
  const results: CheckResult[] = [];
  const record = (result: CheckResult): void => {
    results.push(result);
    report(result);
  };
  let sign = options.signing === 'always';
  // With SMOKE_SIGV4=1, first an unsigned request that API Gateway must refuse.
  const checks: { check: Check; unsigned?: boolean }[] = [
    ...(options.signing === 'always' ? [{ check: unsignedRefusedCheck(), unsigned: true }] : []),
    ...contractChecks().map((check) => ({ check })),
    // The one route without caller authentication: never signed.
    { check: jwksCheck(), unsigned: true },
  ];
  for (const [index, { check, unsigned = false }] of checks.entries()) {
    try {
      let answer = await send(check.request, sign && !unsigned);
      // Only a token route's refusal says the API takes IAM callers: a REST API refuses a route it lacks alike.
      if (!sign && !unsigned && options.signing === 'auto' && TOKEN_PATHS.includes(check.request.path) && isIamRefusal(answer)) {
        record({
          verdict: 'PASS',
          name: `${check.name}, unsigned`,
          detail: `API Gateway's 403 {"message":"${String(messageOf(answer))}"}: the API takes IAM callers, so the checks sign their requests with SigV4 from here on`,
        });
        sign = true;
        answer = await send(check.request, true);
      }
      const { ok, detail } = check.judge(answer);
      record({ verdict: ok ? 'PASS' : 'FAIL', name: check.name, detail });
    } catch (error) {
      record({ verdict: 'FAIL', name: check.name, detail: error instanceof Error ? error.message : String(error) });
      for (const rest of checks.slice(index + 1)) {
        record({ verdict: 'SKIP', name: rest.check.name, detail: 'not run: the service could not be reached' });
      }
      return results;
    }
  }

  if (options.token) await tokenChecks(options.token);
  else {
    record({
      verdict: 'SKIP',
      name: 'a token through the service',
      detail: 'no client: set SMOKE_CLIENT_ID, SMOKE_CLIENT_SECRET and SMOKE_TOKEN_URL to get one from that IdP',
    });
  }
  if (options.token?.issuer) await tokenCheck(`POST /v1/oauth/token by SMOKE_ISSUER`, issuerRequest(options.token));
  else record({ verdict: 'SKIP', name: 'a token by issuer', detail: 'no issuer: set SMOKE_ISSUER (with the client) to get one by it' });
  if (options.credential) await credentialChecks(options.credential);
  else {
    record({
      verdict: 'SKIP',
      name: "a stored credential's token",
      detail: 'no credential: set SMOKE_CREDENTIAL to one the signer may use (callerAuthorization=iam)',
    });
  }
  return results;

  /** A token request that must be answered with a token. */
  async function tokenCheck(name: string, request: SmokeRequest): Promise<void> {
    try {
      const { ok, detail } = judgeToken(await send(request, sign));
      record({ verdict: ok ? 'PASS' : 'FAIL', name, detail });
    } catch (error) {
      record({ verdict: 'FAIL', name, detail: (error as Error).message });
    }
  }

  /** The credential's token for this signer, and a name no credential has refused with the one text. */
  async function credentialChecks({ name, scope }: StoredCredentialAsk): Promise<void> {
    await tokenCheck(`POST /v1/oauth/token for the stored credential ${name}`, {
      method: 'POST',
      path: '/v1/oauth/token',
      json: { credential: name, ...(scope === undefined ? {} : { scope }) },
    });
    const unknown = { method: 'POST' as const, path: '/v1/oauth/token', json: { credential: 'smoke-no-such-credential' } };
    const check = 'POST /v1/oauth/token for a credential no entry has';
    try {
      const { ok, detail } = expectError(403, 'credential_not_allowed')(await send(unknown, sign));
      record({ verdict: ok ? 'PASS' : 'FAIL', name: check, detail });
    } catch (error) {
      record({ verdict: 'FAIL', name: check, detail: (error as Error).message });
    }
  }

  async function send(request: SmokeRequest, signed: boolean): Promise<SmokeAnswer> {
    if (signed && options.cannotSign) throw new Error(`cannot sign with SigV4: ${options.cannotSign}`);
    try {
      return await options.send(request, { sign: signed });
    } catch (error) {
      if (error instanceof ConnectionError) throw error;
      // The credential chain found nothing, or signing failed: the SDK's message names no secret.
      throw new Error(`cannot sign with SigV4: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  async function tokenChecks(client: TokenClient): Promise<void> {
    const name = 'POST /v1/oauth/token with the SMOKE_CLIENT_ID client';
    const request: SmokeRequest = {
      method: 'POST',
      path: '/v1/oauth/token',
      json: { client_id: client.clientId, client_secret: client.clientSecret, access_token_url: client.tokenUrl },
    };
    let first: SmokeAnswer;
    try {
      first = await send(request, sign);
    } catch (error) {
      record({ verdict: 'FAIL', name, detail: (error as Error).message });
      return;
    }
    const judged = judgeToken(first);
    record({ verdict: judged.ok ? 'PASS' : 'FAIL', name, detail: judged.detail });
    if (!judged.ok || first.headers.get('x-token-cache') === null) return;

    const again = 'the same token request again';
    try {
      const second = await send(request, sign);
      const repeated = judgeToken(second);
      const cache = second.headers.get('x-token-cache');
      const hit = cache === 'hit';
      const ok = repeated.ok && (hit || !options.expectCacheHit);
      const verdict = hit
        ? 'a hit: answered from the cache'
        : `not a hit (x-token-cache: ${cache ?? 'absent'}): another instance may have answered, or the token cannot be kept`;
      record({ verdict: ok ? 'PASS' : 'FAIL', name: again, detail: repeated.ok ? `200, ${verdict}` : repeated.detail });
    } catch (error) {
      record({ verdict: 'FAIL', name: again, detail: (error as Error).message });
    }
  }
}

function contractChecks(): Check[] {
  return [
    ...TOKEN_PATHS.map((path) => ({
      name: `POST ${path} with an empty body`,
      request: { method: 'POST' as const, path },
      judge: expectError(400, 'invalid_request'),
    })),
    ...TOKEN_PATHS.map((path) => ({
      name: `POST ${path} naming the metadata address as token URL`,
      request: {
        method: 'POST' as const,
        path,
        json: { client_id: 'smoke-test', client_secret: 'smoke-test', access_token_url: METADATA_TOKEN_URL },
      },
      judge: expectError(403, 'token_url_not_allowed'),
    })),
    {
      name: 'POST /v1/oauth/no-such-route',
      request: { method: 'POST', path: '/v1/oauth/no-such-route', json: {} },
      judge: (answer) =>
        isNoRoute(answer)
          ? { ok: true, detail: `API Gateway's ${answer.status} {"message":"${String(messageOf(answer))}"}` }
          : { ok: false, detail: `expected API Gateway's 404 {"message":"Not Found"} (a REST API's 403), got ${describe(answer)}` },
    },
  ];
}

/** A token by issuer: the same client, the endpoint read from the issuer's metadata. */
function issuerRequest({ clientId, clientSecret, issuer }: TokenClient): SmokeRequest {
  return { method: 'POST', path: '/v1/oauth/token', json: { client_id: clientId, client_secret: clientSecret, issuer } };
}

/** The JWKS: public keys only, cacheable at most 5 minutes; or API Gateway's answer where no stored credential has a KMS key. */
function jwksCheck(): Check {
  return {
    name: `GET ${JWKS_PATH}`,
    request: { method: 'GET', path: JWKS_PATH },
    judge: (answer) => {
      if (isNoRoute(answer)) return { ok: true, detail: `not served (API Gateway's ${answer.status}): no stored credential has a KMS key` };
      const keys = answer.status === 200 ? json(answer)?.keys : undefined;
      const maxAge = Number(/max-age=(\d+)/.exec(answer.headers.get('cache-control') ?? '')?.[1] ?? Number.NaN);
      const problem = !Array.isArray(keys)
        ? `expected 200 {"keys":[...]}, got ${describe(answer)}`
        : !keys.every(isPublicJwk)
          ? 'a key is not a public signing JWK (kty, kid, use sig, alg; no private member)'
          : !(maxAge <= 300)
            ? `cache-control must allow at most 5 minutes, got ${answer.headers.get('cache-control') ?? 'none'}`
            : undefined;
      return problem
        ? { ok: false, detail: problem }
        : { ok: true, detail: `200 with ${(keys as unknown[]).length} public key(s), max-age ${maxAge}` };
    },
  };
}

function isPublicJwk(key: unknown): boolean {
  if (typeof key !== 'object' || key === null) return false;
  const jwk = key as Record<string, unknown>;
  const named = ['kty', 'kid', 'alg'].every((member) => typeof jwk[member] === 'string') && jwk.use === 'sig';
  return named && !['d', 'p', 'q', 'dp', 'dq', 'qi', 'k'].some((member) => member in jwk);
}

/** API Gateway's own answer for a route it does not have: the HTTP API's 404, a REST API's 403. */
function isNoRoute(answer: SmokeAnswer): boolean {
  return (answer.status === 404 && messageOf(answer) === NOT_FOUND) || (answer.status === 403 && messageOf(answer) === MISSING_TOKEN);
}

function unsignedRefusedCheck(): Check {
  return {
    name: 'POST /v1/oauth/token unsigned (SMOKE_SIGV4=1)',
    request: { method: 'POST', path: '/v1/oauth/token' },
    judge: (answer) =>
      isIamRefusal(answer)
        ? { ok: true, detail: `API Gateway's 403 {"message":"${String(messageOf(answer))}"}: only signed requests reach the function` }
        : { ok: false, detail: `expected API Gateway's 403 {"message":"Forbidden"} (IAM callers only), got ${describe(answer)}` },
  };
}

function expectError(status: number, code: string): Check['judge'] {
  return (answer) =>
    answer.status === status && json(answer)?.code === code
      ? { ok: true, detail: `${status} ${code}` }
      : { ok: false, detail: `expected ${status} ${code}, got ${describe(answer)}` };
}

function judgeToken(answer: SmokeAnswer): { ok: boolean; detail: string } {
  const body = answer.status === 200 ? json(answer) : undefined;
  const token = body?.access_token;
  if (typeof token !== 'string' || token === '') {
    return {
      ok: false,
      detail: `expected 200 with a string access_token, got ${answer.status === 200 ? '200 without one' : describe(answer)}`,
    };
  }
  const facts = [
    typeof body?.expires_in === 'number' ? `expires_in ${body.expires_in}` : undefined,
    answer.headers.get('x-token-cache') === null ? undefined : `x-token-cache: ${answer.headers.get('x-token-cache')}`,
  ].filter(Boolean);
  return { ok: true, detail: `200 with an access token${facts.length > 0 ? ` (${facts.join(', ')})` : ''}` };
}

/** API Gateway's own answer to an unsigned request on an IAM route: the HTTP API's, or a REST API's. */
function isIamRefusal(answer: SmokeAnswer): boolean {
  return answer.status === 403 && (messageOf(answer) === 'Forbidden' || messageOf(answer) === MISSING_TOKEN);
}

function json(answer: SmokeAnswer): Record<string, unknown> | undefined {
  try {
    const parsed: unknown = JSON.parse(answer.body);
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function messageOf(answer: SmokeAnswer): unknown {
  return json(answer)?.message;
}

/**
 * An answer in a line, for a failed check: its status and the error's code and description or API
 * Gateway's message. Never the body of a 2xx, which may hold a token.
 */
function describe(answer: SmokeAnswer): string {
  if (answer.status >= 200 && answer.status < 300) return `${answer.status}`;
  const body = json(answer);
  const text =
    typeof body?.code === 'string'
      ? `${body.code}${typeof body.description === 'string' ? `: ${body.description}` : ''}`
      : typeof body?.message === 'string'
        ? `{"message":${JSON.stringify(body.message)}}`
        : `a ${Buffer.byteLength(answer.body)}-byte body that is no JSON error`;
  return `${answer.status} ${text.length > 160 ? `${text.slice(0, 157)}...` : text}`;
}
