import { callerArnOf } from '../request/gateway-event';

/** A `callers` entry: an IAM principal ARN in which `*` matches any run of characters. */
export interface CallerPattern {
  readonly text: string;
  matches(principal: string): boolean;
}

const ARN = /^arn:[\x21-\x7E]{1,2044}$/;
// arn:PARTITION:sts::ACCOUNT:assumed-role/ROLE/SESSION: the session's ARN carries no role path.
const ASSUMED_ROLE = /^arn:([^:]+):sts::(\d{12}):assumed-role\/([^/]+)\/[^/]+$/;

/**
 * Compile a `callers` entry. Refuses what could never match a caller: a session (callers are matched
 * as their role) and a role with a path (a session's ARN names its role without one).
 */
export function callerPattern(text: string): CallerPattern {
  if (!ARN.test(text)) throw new Error(`must have callers as IAM principal ARN patterns (arn:...), got "${text}"`);
  if (text.includes(':assumed-role/')) {
    throw new Error(
      `has the caller "${text}", a role session: sessions are matched as their role, so name the role (arn:aws:iam::ACCOUNT:role/NAME)`,
    );
  }
  if (/:role\/.*\//.test(text)) {
    throw new Error(`has the caller "${text}", a role with a path: a role session names its role without the path, so leave it out`);
  }
  const [first, ...rest] = text.split('*') as [string, ...string[]];
  const last = rest.pop();
  return {
    text,
    matches: (principal) => (last === undefined ? principal === first : matchesParts(principal, first, rest, last)),
  };
}

/** Whether `principal` is `first`, then each middle part in order, then `last`, with anything between: linear, no backtracking. */
function matchesParts(principal: string, first: string, middle: readonly string[], last: string): boolean {
  const end = principal.length - last.length;
  if (end < first.length || !principal.startsWith(first) || !principal.endsWith(last)) return false;
  let at = first.length;
  for (const part of middle) {
    const found = principal.indexOf(part, at);
    if (found === -1 || found + part.length > end) return false;
    at = found + part.length;
  }
  return true;
}

/**
 * The IAM principal API Gateway verified for this request (`callerAuthorization=iam`), the same ARN on
 * either API (see {@link callerArnOf}), matched as a principal: an assumed-role session
 * (`arn:aws:sts::ACCOUNT:assumed-role/NAME/SESSION`) as its role (`arn:aws:iam::ACCOUNT:role/NAME`).
 * Undefined without one: nothing else in the event is trusted.
 */
export function verifiedCaller(event: unknown): { readonly arn: string; readonly principal: string } | undefined {
  const arn = callerArnOf(event);
  if (typeof arn !== 'string' || !ARN.test(arn)) return undefined;
  const session = ASSUMED_ROLE.exec(arn);
  return { arn, principal: session ? `arn:${session[1]}:iam::${session[2]}:role/${session[3]}` : arn };
}
