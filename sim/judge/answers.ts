import { COPY_SAYS_LESS_MS, ERROR_CODES, EXPIRY_GUARD_MS, HOLD_MAX_S, HOLD_MIN_S, ROUNDING_S, SECOND_MS } from './contract';
import { describe, type Issued } from './facts';
import { secondsOf } from './life';
import { type Invariant, invariant } from './invariant';

// What each answer must be on its own: in time, in the error table's shape, with a token the IdP issued
// for its key, never too close to its end, with an honest `expires_in`, a header that says where the
// token came from, and a token that could not be kept only for those who waited for it.

/** An answer's token came from an IdP call made for this very request. */
const ownMiss = ({ asked, issued }: { readonly asked: { readonly id: number }; readonly issued: Issued }) =>
  issued.call.request === asked.id;

/** A kept answer's field, "lowered by the seconds elapsed since it was received", in the type the IdP used; anything else unchanged. */
function lowered(value: unknown, seconds: number): unknown {
  if (typeof value === 'number' && Number.isFinite(value)) return Math.max(0, value - seconds);
  if (typeof value === 'string' && /^\d+$/.test(value)) return String(Math.max(0, Number(value) - seconds));
  return value;
}

/** Equal as JSON values compare: NaN (which a record may carry through) equals itself. */
const same = (a: unknown, b: unknown): boolean => a === b || (Number.isNaN(a) && Number.isNaN(b));

/** What is wrong with a copy's stated field: never above the true seconds left, never more than the copy's allowance below. */
function copyFieldFault(stated: unknown, issued: unknown, ageMs: number, spreadMs: number, sentBeforeMs: number): string | undefined {
  const seconds = secondsOf(issued);
  if (seconds === undefined) return same(stated, issued) ? undefined : `states ${String(stated)} where the IdP said ${String(issued)}`;
  const value = secondsOf(stated);
  if (value === undefined || typeof stated !== typeof issued)
    return `states ${JSON.stringify(stated)}, not a ${typeof issued} like the IdP's`;
  const left = seconds - ageMs / SECOND_MS;
  const least = left - (COPY_SAYS_LESS_MS + spreadMs + sentBeforeMs) / SECOND_MS - ROUNDING_S;
  if (value > Math.max(0, left)) return `states ${value} s where ${left.toFixed(3)} s are left`;
  if (value < least) return `states ${value} s where ${left.toFixed(3)} s are left (at least ${least.toFixed(3)} due)`;
  return undefined;
}

export const answerInvariants: readonly Invariant[] = [
  invariant(
    'deadline',
    'Token cache: "Everything a request does, table calls and waits included, ends within `UPSTREAM_TIMEOUT_MS`."',
    (facts, flag) => {
      for (const { asked, answer } of facts.answered) {
        const took = answer.answeredAt - asked.arrivedAt;
        // Simulated time is floating point: sums of the same moments may differ in their last bits.
        if (took > facts.T + 1e-6) flag(answer.answeredAt, `${describe(asked)} answered after ${took} ms (deadline ${facts.T} ms)`);
      }
      for (const asked of facts.unanswered) {
        const deadline = facts.deadline(asked);
        const died = facts.diedAt(asked.instance);
        // Unanswered because its instance died first, or the run stopped first: no breach seen.
        if (facts.record.endedAt > deadline && (died === undefined || died > deadline))
          flag(deadline, `${describe(asked)} never answered, though its instance lived past its deadline`);
      }
    },
  ),
  invariant(
    'responses',
    'Responses: "Success: `200`" with `x-token-cache` (Token cache: "Every `200` says where its token came from"); errors as the table: 401 `unauthorized`, 502 `upstream_error`, 503 `upstream_throttled` with "a `retry-after` header: whole seconds ... (1 to 60)", 504 `upstream_timeout`; "500 ... never expected".',
    (facts, flag) => {
      for (const { asked, answer } of facts.answered) {
        const at = answer.answeredAt;
        if (answer.status === 200) {
          if (answer.header === undefined || answer.token === undefined || answer.code !== undefined)
            flag(
              at,
              `${describe(asked)}: a 200 with header ${String(answer.header)}, token ${String(answer.token)}, code ${String(answer.code)}`,
            );
          continue;
        }
        const code = ERROR_CODES.get(answer.status);
        if (code === undefined || answer.code !== code || answer.header !== undefined || answer.token !== undefined) {
          flag(at, `${describe(asked)}: ${answer.status} ${String(answer.code)}, not a row of the error table`);
          continue;
        }
        const { retryAfter } = answer;
        if (
          answer.status === 503 &&
          !(Number.isInteger(retryAfter) && (retryAfter as number) >= HOLD_MIN_S && (retryAfter as number) <= HOLD_MAX_S)
        )
          flag(at, `${describe(asked)}: a 503 with retry-after ${String(retryAfter)}`);
      }
    },
  ),
  invariant(
    'issued',
    'Responses: "body = the IdP\'s token JSON object"; Token cache: "A kept token answers an identical request" (the request\'s key).',
    (facts, flag) => {
      for (const { asked, answer } of facts.answered) {
        if (answer.status !== 200 || answer.token === undefined) continue;
        const issued = facts.tokens.get(answer.token);
        if (!issued) flag(answer.answeredAt, `${describe(asked)} got ${answer.token}, which the IdP never issued`);
        else if (issued.key.id !== asked.key)
          flag(answer.answeredAt, `${describe(asked)} got ${answer.token}, issued for ${issued.key.id}`);
        else if (issued.issuedAt > answer.answeredAt)
          flag(answer.answeredAt, `${describe(asked)} got ${answer.token} before the IdP issued it (${issued.issuedAt})`);
      }
    },
  ),
  invariant(
    'memory stays on its instance',
    'Configuration: "`memory` ...: reuse an unexpired token for identical requests within one instance".',
    (facts, flag) => {
      if (facts.shared) return;
      for (const { asked, answer, issued } of facts.served) {
        if (issued.receiver !== asked.instance)
          flag(answer.answeredAt, `${describe(asked)} got ${issued.token}, which ${issued.receiver} received`);
      }
    },
  ),
  invariant(
    'expiry margin',
    'Clocks: "no answer carries a token within 5 s of its expiry by the clock of the instance that received it (so none ever carries an expired one)"; age by the receiver\'s clock is true age.',
    (facts, flag) => {
      for (const answered of facts.served) {
        const { asked, answer, issued } = answered;
        // A miss is the IdP's answer to this request's own call, passed on as "Responses" demands: the margin binds what the cache kept or shared.
        if (issued.life.lifeMs === undefined || (answer.header === 'miss' && ownMiss(answered))) continue;
        const age = answer.answeredAt - issued.issuedAt;
        if (age >= issued.life.lifeMs - EXPIRY_GUARD_MS)
          flag(answer.answeredAt, `${describe(asked)} got ${issued.token} ${age} ms old, of a ${issued.life.lifeMs} ms life`);
      }
    },
  ),
  invariant(
    'copy margin',
    'Clocks: "a copy from the table may say up to 5 s less": a copy is reckoned 5 s older, so it is served only while its age by the answerer\'s clock (true age, give or take the spread) is under `expires_in` less 10 s.',
    (facts, flag) => {
      for (const { asked, answer, issued } of facts.served) {
        const limit = facts.servingLimitMs(issued, asked.instance);
        if (limit === undefined || issued.receiver === asked.instance) continue;
        const age = answer.answeredAt - issued.issuedAt;
        if (age >= limit + facts.spread)
          flag(
            answer.answeredAt,
            `${describe(asked)} got a copy of ${issued.token} ${age} ms old (limit ${limit} ms + spread ${facts.spread})`,
          );
      }
    },
  ),
  invariant(
    'expires_in',
    'Lifetime: "A kept answer lowers `expires_in`, and `ext_expires_in` where present, by the seconds elapsed since it was received"; Clocks: "no answer\'s `expires_in` says a token lives longer than it does by that clock (a copy from the table may say up to 5 s less)".',
    (facts, flag) => {
      for (const answered of facts.served) {
        const { asked, answer, issued } = answered;
        const fields = [
          ['expires_in', answer.expiresIn, issued.call.expiresIn],
          ['ext_expires_in', answer.extExpiresIn, issued.call.extExpiresIn],
        ] as const;
        const age = answer.answeredAt - issued.issuedAt;
        const outlived = facts.outlived(issued);
        for (const [name, stated, given] of fields) {
          let fault: string | undefined;
          if (answer.header === 'miss' && ownMiss(answered)) {
            if (!same(stated, given)) fault = `states ${JSON.stringify(stated)} where the IdP said ${JSON.stringify(given)}`;
          } else if (issued.receiver === asked.instance) {
            const due = lowered(given, Math.ceil(Math.max(0, age) / SECOND_MS));
            const sinceSent = lowered(given, Math.ceil(Math.max(0, answer.answeredAt - issued.call.sentAt) / SECOND_MS));
            const within = outlived && typeof stated === typeof due && Number(stated) >= Number(sinceSent) && Number(stated) <= Number(due);
            if (!same(stated, due) && !within)
              fault = `states ${JSON.stringify(stated)} where ${JSON.stringify(due)} is due ${age} ms after receipt`;
          } else fault = copyFieldFault(stated, given, age, facts.spread, issued.issuedAt - facts.datedFrom(issued));
          if (fault) flag(answer.answeredAt, `${describe(asked)} with ${issued.token}: ${name} ${fault}`);
        }
      }
    },
  ),
  invariant(
    'header',
    'Token cache: "Every `200` says where its token came from: `x-token-cache: hit`, `miss` or `stale`"; Stale if error: "A token not yet stale answers `hit` as usual"; Bursts: those who arrive while an exchange runs "share that exchange and its outcome".',
    (facts, flag) => {
      for (const answered of facts.served) {
        const { asked, answer, issued, key } = answered;
        if (key.kind === 'assertion') continue; // the `assertion` invariant's
        const own = ownMiss(answered);
        const age = answer.answeredAt - issued.issuedAt;
        const slack = facts.slack(issued.receiver, asked.instance);
        const where = `${describe(asked)} got ${issued.token} (${age} ms old) as ${String(answer.header)}`;
        if (own !== (answer.header === 'miss')) {
          flag(answer.answeredAt, `${where}: ${own ? 'its own call got it' : 'no call of its own got it'}`);
          continue;
        }
        // A token its own call brought before it was answered is the answer; one still on its way is not (a hedge lost to the table).
        const got = facts
          .callsOf(asked.id)
          .find((call) => call.outcome === 'token' && call.token !== issued.token && call.endedAt <= answer.answeredAt);
        if (got) flag(answer.answeredAt, `${where}, though its own call got ${String(got.token)}`);
        const { life } = issued;
        // Dated from its send (an exchange that outlived its request), a token goes stale up to that much early.
        const early = issued.issuedAt - facts.datedFrom(issued);
        if (answer.header === 'stale' && !(life.kept && age >= life.staleMs - slack - early))
          flag(answer.answeredAt, `${where}, not stale by the answerer's clock`);
        // A token that cannot be kept has no phases: whom it may reach is `unkept token`'s.
        if (answer.header === 'hit' && life.kept && !(issued.issuedAt >= asked.arrivedAt || age < life.staleMs + slack))
          flag(answer.answeredAt, `${where}, stale by the answerer's clock and issued before the request arrived`);
      }
    },
  ),
  invariant(
    'unkept token',
    'Bursts: a token "even one that cannot be kept: it goes to those waiting for it and to no later request"; Lifetime: only "a numeric `expires_in` over 30 s is kept"; Stale if error: an old copy written back "can bring an old token back until it expires".',
    (facts, flag) => {
      for (const { asked, answer, issued } of facts.served) {
        if (issued.life.kept) continue;
        // On its receiver, those who came before the IdP answered; elsewhere, those who came before the fleet
        // could know its exchange had ended: before its request was answered, the outcome published by then.
        const told = facts.answers.get(issued.call.request)?.answeredAt ?? issued.issuedAt;
        const limit =
          issued.receiver === asked.instance
            ? issued.issuedAt
            : Math.max(issued.issuedAt, told) + facts.slack(issued.receiver, asked.instance);
        // Stale if error: "An old copy of an item written back by someone with write access can bring an old token back until it expires".
        const replayed = facts.tampered(
          issued.key.id,
          issued.issuedAt,
          answer.answeredAt,
          (one) => one.action === 'replay' && (one.of ?? 0) >= issued.issuedAt,
        );
        if (asked.arrivedAt > limit && !replayed)
          flag(
            answer.answeredAt,
            `${describe(asked)} got ${issued.token}, which cannot be kept, ${asked.arrivedAt - issued.issuedAt} ms after it was issued`,
          );
      }
    },
  ),
];
