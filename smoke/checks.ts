import { ConnectionError, type Send, type SmokeAnswer, type SmokeRequest } from './http';

/** A client that can get a token from the deployed service's IdP, for the end-to-end check. */
export interface TokenClient {
  readonly clientId: string;
  readonly clientSecret: string;
  readonly tokenUrl: string;
}

/** `auto`: sign with SigV4 from the moment API Gateway refuses an unsigned request as IAM APIs do. */
export type SigningMode = 'auto' | 'always' | 'never';

export interface SmokeOptions {
  readonly send: Send;
  readonly signing: SigningMode;
  /** Why requests cannot be signed (no region), when they cannot. */
  readonly cannotSign?: string;
  readonly token?: TokenClient;
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

const TOKEN_PATHS = ['/v1/oauth/token', '/oauth/token'] as const;

/**
 * Checks a running service against the contract, reporting each check as it ends: both token routes
 * answer `400 invalid_request` to an empty body and `403 token_url_not_allowed` to the metadata
 * address, another path gets API Gateway's `404`, and with a client a token is issued (and, behind a
 * cache, issued again from it); without one, that check is reported skipped. The first answer that
 * is no HTTP answer stops the run.
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
  ];
  for (const [index, { check, unsigned = false }] of checks.entries()) {
    try {
      let answer = await send(check.request, sign && !unsigned);
      if (!sign && options.signing === 'auto' && isIamRefusal(answer)) {
        record({
          verdict: 'PASS',
          name: `${check.name}, unsigned`,
          detail: `API Gateway's 403 {"message":"Forbidden"}: the API takes IAM callers, so the checks sign their requests with SigV4 from here on`,
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
  return results;

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
        answer.status === 404 && messageOf(answer) === 'Not Found'
          ? { ok: true, detail: `API Gateway's 404 {"message":"Not Found"}` }
          : { ok: false, detail: `expected API Gateway's 404 {"message":"Not Found"}, got ${describe(answer)}` },
    },
  ];
}

function unsignedRefusedCheck(): Check {
  return {
    name: 'POST /v1/oauth/token unsigned (SMOKE_SIGV4=1)',
    request: { method: 'POST', path: '/v1/oauth/token' },
    judge: (answer) =>
      isIamRefusal(answer)
        ? { ok: true, detail: `API Gateway's 403 {"message":"Forbidden"}: only signed requests reach the function` }
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

/** API Gateway's own answer to an unsigned or unpermitted request on an IAM route. */
function isIamRefusal(answer: SmokeAnswer): boolean {
  return answer.status === 403 && messageOf(answer) === 'Forbidden';
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
