import type { Asked, IdpCall, IdpOutcome } from '../record';
import {
  CLOCKS_APART_MS,
  SHARED_TOKEN_LIMIT_BYTES,
  DEAD_HOLDER_DELAY_MS,
  ERROR_CODES,
  NO_CACHE_MAX_AGE_MS,
  PEPPER_SWITCH_MS,
  REJECTION_REMEMBERED_MS,
  STATUS_OF,
  TAKE_OVER_RESOLUTION_SHARE,
  TAKE_OVER_SHARE,
} from './contract';
import { type Answered, describe, type Facts, type Issued, rememberedMs, wholeDeadline } from './facts';
import { type Invariant, invariant } from './invariant';

// What an error, or a stale token in its place, must be: never a remembered failure for a no-cache
// request, never a stale token a 401 ended, never an error while a usable kept token exists, never
// worse than `TOKEN_CACHE=off` without the contract's own excuse, and for a caller's own assertion
// only what its own call got.

/** The IdP outcome behind each error status but the hold's 503 (the `hold earned` invariant's). */
const FAILURE_OF: Readonly<Partial<Record<number, IdpOutcome>>> = { 401: 'unauthorized', 502: 'error', 504: 'timeout' };

/**
 * Whether a request met the failure it answers: its own call's, one it shared, or one remembered.
 * Shared: a call for its key that ended while it waited (with `memory`, one already running on its
 * instance when it came; with `shared`, any: a request that lost the race for the table's claim by a
 * few ms waits on an exchange sent just after it arrived). A shared timeout counts only for a request
 * whose deadline ends no more than a fifth of the deadline after that call's request's (Bursts).
 * Remembered: 5 s for a 401, 1 s for any other, by the writer's clock, never for a no-cache request.
 */
function metFailure(facts: Facts, { asked, answer, key }: Answered, outcome: IdpOutcome): boolean {
  // From any time: a frozen instance meets its own answers when thawed, however long after the IdP gave them.
  return facts.endedWithin(key.id, -Infinity, answer.answeredAt).some((call) => {
    if (call.outcome !== outcome) return false;
    if (call.request === asked.id) return !(outcome === 'timeout' && waitedOut(facts, asked, call));
    if (!facts.shared && call.instance !== asked.instance) return false;
    // Clocks: for a no-cache request, another instance's end dated after its arrival may have come up to the spread before it.
    if (call.endedAt >= asked.arrivedAt - (asked.noCache ? facts.slack(call.instance, asked.instance) : 0)) {
      const waited = facts.shared || call.sentAt <= asked.arrivedAt;
      return waited && !(outcome === 'timeout' && outlasts(facts, asked, call));
    }
    const kept = rememberedMs(call, facts.T);
    // Its instance met it when the answer reached it (a frozen Lambda: when thawed), and the fleet remembers it as that
    // instance dated it ("Clocks": with clocks in step, the fleet behaves as one instance).
    const met = Math.min(facts.reachedAt(call), asked.arrivedAt);
    return !asked.noCache && kept > 0 && met >= asked.arrivedAt - kept - facts.slack(call.instance, asked.instance);
  });
}

/**
 * Whether an exchange that ran when the request came brought a token the fleet surely learned of before its answer:
 * published (its request answered, before its deadline) with no trouble, tampering or rotation in the way.
 */
function missedToken(facts: Facts, { asked, answer, key }: Answered): boolean {
  return facts.callsFor(key.id).some((call) => {
    const told = facts.answers.get(call.request)?.answeredAt;
    const holder = facts.requests.get(call.request);
    return (
      call.request !== asked.id &&
      call.outcome === 'token' &&
      call.bytes <= SHARED_TOKEN_LIMIT_BYTES &&
      call.sentAt <= asked.arrivedAt &&
      call.endedAt > asked.arrivedAt &&
      told !== undefined &&
      holder !== undefined &&
      told < Math.min(answer.answeredAt, facts.deadline(holder)) &&
      !facts.troubled(call.instance, call.sentAt, told) &&
      !facts.troubled(asked.instance, asked.arrivedAt, answer.answeredAt) &&
      !facts.tampered(key.id, call.sentAt, answer.answeredAt) &&
      !facts.rotated(call.sentAt - PEPPER_SWITCH_MS, answer.answeredAt) &&
      facts.stoppedHolders(key.id, call.sentAt, answer.answeredAt).length === 0
    );
  });
}

/** Whether `asked`'s deadline ends far enough after that of the request that sent `call` to spend a call of its own ("Bursts"). */
function outlasts(facts: Facts, asked: Asked, call: IdpCall): boolean {
  const leader = facts.requests.get(call.request);
  return leader !== undefined && facts.deadline(asked) > facts.deadline(leader) + facts.T * (TAKE_OVER_SHARE + TAKE_OVER_RESOLUTION_SHARE);
}

/**
 * Whether a request's own call, cut short, was sent only once every exchange it might have waited on had ended, each
 * another instance's whose request it outlasts: it was owed that call while they ran (Bursts: one "for each request that
 * would otherwise wait on exchanges that can no longer answer within its deadline while its own still could"; "The table
 * never costs an answer ...: at worst the request goes to the IdP itself"), so the timeout its wait cost is not its excuse.
 */
function waitedOut(facts: Facts, asked: Asked, own: IdpCall): boolean {
  if (!facts.shared || wholeDeadline(own, facts.T)) return false;
  const before = facts
    .callsFor(asked.key)
    .filter((call) => call.request !== asked.id && call.sentAt < own.sentAt && call.endedAt > asked.arrivedAt);
  const waited = (call: IdpCall) => call.instance !== asked.instance && call.endedAt <= own.sentAt;
  // Once the fleet knew the key's tokens do not fit in its item, nobody waits on its claims ("Large tokens").
  if (facts.oversizeKnown(asked.key, asked.arrivedAt) && before.some((call) => waited(call) && call.sentAt <= asked.arrivedAt)) return true;
  return before.length > 0 && before.every((call) => waited(call) && outlasts(facts, asked, call));
}

/**
 * A token issued within the clocks' 5 s after a 401 another instance got, as the two clocks dated them
 * (the run's spread added): it may be denied standing in (see CLOCKS_APART_MS).
 */
function closeAfterRejection(facts: Facts, issued: Issued): boolean {
  return facts
    .endedWithin(issued.key.id, issued.issuedAt - CLOCKS_APART_MS - facts.spread, issued.issuedAt)
    .some((call) => call.outcome === 'unauthorized' && call.instance !== issued.receiver);
}

/**
 * Whether the instance that answered `asked` surely knew of the 401 `rejection` while it was still remembered there, up to
 * `answeredAt` (Remembered failures: "A rejection (`401`) is remembered for 5 s ... with `shared`, on every instance").
 * Its own instance: from when it met it (its request answered with it, or a refresh ahead's 401 reaching it), for 5 s by
 * its one clock. Another (`shared`): once the 401 was surely published (its request answered with it, no table or pepper
 * trouble on its instance all along, nor at its deadline with no write landed) and that instance then read the key's
 * item with no fault (met as answered), before the request came, or within it while no other request was under way
 * there; until 5 s less the spread ("Clocks": another's fact may take effect that much early), with no fault of its own
 * since the telling on the key's item or the pepper, and no rotation from 60 s before the 401's visit (its item may be
 * sealed with a pepper the reader ignores).
 */
function knewRejection(facts: Facts, asked: Asked, answeredAt: number, rejection: IdpCall): boolean {
  const visit = facts.requests.get(rejection.request);
  const told = facts.answers.get(rejection.request);
  if (!visit || !told) return false;
  const item = (name: string) => name === asked.key;
  if (rejection.instance === asked.instance) {
    // A refresh ahead answered before its exchange ended meets the 401 when it reaches its instance (a frozen Lambda: at the thaw).
    const outlived = told.answeredAt < rejection.endedAt;
    if (!outlived && told.status !== 401) return false;
    const knownAt = outlived ? facts.reachedAt(rejection) : told.answeredAt;
    return asked.arrivedAt > knownAt && asked.arrivedAt < rejection.endedAt + REJECTION_REMEMBERED_MS;
  }
  const { instance } = asked;
  return (
    facts.shared &&
    told.status === 401 &&
    told.answeredAt >= rejection.endedAt &&
    answeredAt < rejection.endedAt + REJECTION_REMEMBERED_MS - facts.spread &&
    !facts.untoldAtDeadline(rejection, answeredAt) &&
    !facts.troubled(rejection.instance, visit.arrivedAt, told.answeredAt) &&
    facts.readMet(instance, item, told.answeredAt, facts.alone(asked, answeredAt) ? answeredAt : asked.arrivedAt) &&
    !facts.tableFault(instance, told.answeredAt, answeredAt, asked.key) &&
    !facts.pepperFault(instance, told.answeredAt, answeredAt) &&
    !facts.tampered(asked.key, rejection.sentAt, answeredAt) &&
    !facts.ttlDeleted(asked.key, rejection.sentAt, answeredAt) &&
    !facts.rotated(visit.arrivedAt - PEPPER_SWITCH_MS, answeredAt)
  );
}

export const failureInvariants: readonly Invariant[] = [
  invariant(
    'no-cache',
    '`cache-control: no-cache`: "it gets no token received more than 5 s before it arrived and no remembered failure ... If the IdP gives none, the error (no stale token)."',
    (facts, flag) => {
      for (const answered of facts.answered) {
        const { asked, answer, key } = answered;
        if (!asked.noCache || key.kind === 'assertion') continue;
        if (answer.status === 200) {
          const issued = facts.tokens.get(answer.token ?? '');
          if (answer.header === 'stale') flag(answer.answeredAt, `${describe(asked)} got a stale token`);
          else if (issued && asked.arrivedAt - issued.issuedAt > NO_CACHE_MAX_AGE_MS + facts.slack(issued.receiver, asked.instance))
            flag(
              answer.answeredAt,
              `${describe(asked)} got ${issued.token}, issued ${asked.arrivedAt - issued.issuedAt} ms before it arrived`,
            );
          continue;
        }
        const outcome = FAILURE_OF[answer.status];
        // A 504 at its own deadline is its own timeout, not a remembered one: whether it was due is `worse than off`'s.
        if (outcome === undefined || (outcome === 'timeout' && answer.answeredAt - asked.arrivedAt >= facts.T)) continue;
        // Clocks: an end another instance dated may read up to the spread late, so it may have come that much before.
        const met = facts
          .endedWithin(key.id, asked.arrivedAt - (facts.shared ? facts.spread : 0), answer.answeredAt)
          .some(
            (call) =>
              call.outcome === outcome &&
              call.endedAt >= asked.arrivedAt - facts.slack(call.instance, asked.instance) &&
              (facts.shared || call.instance === asked.instance),
          );
        if (!met) flag(answer.answeredAt, `${describe(asked)} got ${answer.status} from no IdP call that ended after it arrived`);
      }
    },
  ),
  invariant(
    '401 outlived',
    'Stale if error: "A `401` ends stale-if-error for its key everywhere: no instance ever again answers `stale` with a token of that key received before the `401` ... (An old copy of an item written back ... can bring an old token back until it expires ...)"; Clocks: "no `401` is outlived".',
    (facts, flag) => {
      for (const { asked, answer, key, issued } of facts.served) {
        if (answer.header !== 'stale') continue;
        const rejection = facts.endedWithin(key.id, issued.issuedAt, answer.answeredAt).find((call) => {
          if (call.outcome !== 'unauthorized' || !(call.endedAt > issued.issuedAt)) return false;
          // The 401 binds its own instance from its end, and the fleet from the answer it was published before (answered at
          // its deadline, only once a write sent then landed, as the burst rule reads a timeout).
          const told = facts.untoldAtDeadline(call, answer.answeredAt) ? undefined : facts.answers.get(call.request)?.answeredAt;
          const replayed = facts.tampered(
            key.id,
            call.endedAt,
            answer.answeredAt,
            (tampering) =>
              (tampering.action === 'replay' && (tampering.of === undefined || tampering.of < (told ?? Infinity))) ||
              // A deleted item, or garbage in its place, is its first copy written back (none, from before any 401), for
              // the instances that learn of the 401 from the table alone.
              (call.instance !== asked.instance && (tampering.action === 'delete' || tampering.action === 'garbage')),
          );
          if (replayed) return false;
          if (call.instance === asked.instance) return answer.answeredAt > call.endedAt;
          return (
            facts.shared &&
            told !== undefined &&
            asked.arrivedAt > told &&
            !facts.troubled(call.instance, call.endedAt, told) &&
            !facts.rotated(answer.answeredAt - PEPPER_SWITCH_MS, answer.answeredAt)
          );
        });
        if (rejection)
          flag(
            answer.answeredAt,
            `${describe(asked)} got ${issued.token} (issued ${issued.issuedAt}) as stale after the 401 ${rejection.instance} got at ${rejection.endedAt}`,
          );
      }
    },
  ),
  invariant(
    '401 remembered',
    'Remembered failures: "A rejection (`401`) is remembered for 5 s for that key ... Within that time the same request gets the same answer (or a stale token, as above) without reaching the IdP; with `shared`, on every instance"; Stale if error: "A `401` ends stale-if-error for its key everywhere".',
    (facts, flag) => {
      for (const { asked, answer, key, issued } of facts.served) {
        // `no-cache` takes "no remembered failure"; a stale token is `401 outlived`'s; an assertion is "never remembered".
        if (asked.noCache || answer.header === 'stale' || key.kind === 'assertion') continue;
        // Bursts: a token that cannot be kept "goes to those waiting for it": to a request that came, by the clocks, while its
        // exchange ran (before the fleet was told it had ended, up to the spread after), the rejection notwithstanding.
        const told = facts.answers.get(issued.call.request)?.answeredAt ?? issued.issuedAt;
        if (!issued.life.kept && asked.arrivedAt <= Math.max(issued.issuedAt, told) + facts.slack(issued.receiver, asked.instance))
          continue;
        const rejection = facts.endedWithin(key.id, asked.arrivedAt - REJECTION_REMEMBERED_MS, asked.arrivedAt).find(
          (call) =>
            call.outcome === 'unauthorized' &&
            // Received before the rejecting call was sent, as the two clocks dated them ("Clocks": up to the spread apart).
            issued.issuedAt < call.sentAt - facts.slack(issued.receiver, call.instance) &&
            // "An old copy of an item written back ... can bring an old token back until it expires".
            !facts.tampered(key.id, call.sentAt, answer.answeredAt, (tampering) => tampering.action === 'replay') &&
            knewRejection(facts, asked, answer.answeredAt, call),
        );
        if (rejection)
          flag(
            answer.answeredAt,
            `${describe(asked)} got ${issued.token} (issued ${issued.issuedAt}) as ${String(answer.header)} ${asked.arrivedAt - rejection.endedAt} ms after the 401 ${rejection.instance} got`,
          );
      }
    },
  ),
  invariant(
    'stale if error',
    'Stale if error: "When the IdP gives no token (any `502`, `503` or `504` case, including a remembered failure and a hold) and a kept token has not yet expired, the answer is that token ... This holds for every kept copy".',
    (facts, flag) => {
      for (const { asked, answer, key } of facts.answered) {
        if (![502, 503, 504].includes(answer.status) || asked.noCache || key.kind === 'assertion') continue;
        const { instance } = asked;
        const at = answer.answeredAt;
        // With `shared`, an instance whose table or pepper failed it cannot rule out a 401 elsewhere, which a stale answer might outlive.
        // A request that joined a fetch already under way ("Bursts": it shares its outcome) shares that fetch's trouble too.
        const joinedFrom = asked.arrivedAt - facts.T;
        if (
          facts.shared &&
          (facts.troubled(instance, asked.arrivedAt, at) ||
            facts.tableFault(instance, joinedFrom, at, key.id) ||
            facts.pepperFault(instance, joinedFrom, at))
        )
          continue;
        const usable = facts.tokensAlive(key.id, at).find((issued) => {
          const limit = facts.servingLimitMs(issued, instance);
          // "its token replaces the kept one": a newer kept token the instance may have learnt of is the one it keeps, and is judged itself.
          // Newer as dated ("Clocks": a receipt another clock dates may take effect early): up to the spread before counts.
          const replaced = facts
            .tokensWithin(key.id, issued.issuedAt - facts.spread, at)
            .some(
              (newer) =>
                newer !== issued &&
                newer.issuedAt >= issued.issuedAt - facts.slack(newer.receiver, issued.receiver) &&
                newer.life.kept &&
                (facts.shared || newer.receiver === instance || facts.answeredWith(instance, newer.token, at)),
            );
          // The pepper: "items sealed with the old one are then ignored", and with them the 401s they held, which no
          // token may outlive: one received before its instance switched is owed as `stale` no more; one sealed anew
          // for an instance that had switched too stays owed.
          const unsighted = facts.shared && !facts.sealedAlike(issued, instance, asked.arrivedAt, at);
          return (
            !replaced &&
            !unsighted &&
            limit !== undefined &&
            at - facts.datedFrom(issued) + facts.slack(issued.receiver, instance) < limit &&
            facts.rejectedAfter(key.id, instance, issued.issuedAt, at) === undefined &&
            !closeAfterRejection(facts, issued) &&
            facts.heldSurely(instance, issued, asked.arrivedAt, at) !== undefined
          );
        });
        if (usable) flag(at, `${describe(asked)} got ${answer.status} while it held ${usable.token} (issued ${usable.issuedAt})`);
      }
    },
  ),
  invariant(
    'worse than off',
    'Responses: 401 "the IdP answered ... with a 4xx", 502 "the IdP could not be reached ...", 504 "no complete answer within `UPSTREAM_TIMEOUT_MS`"; Remembered failures; Bursts; A dead holder: "delays the other requests for that key by at most 1 s"; The table never costs an answer.',
    (facts, flag) => {
      for (const answered of facts.answered) {
        const { asked, answer, key } = answered;
        const outcome = FAILURE_OF[answer.status];
        if (outcome === undefined || key.kind === 'assertion') continue;
        if (facts.offSurely(key, asked.arrivedAt, answer.status) || metFailure(facts, answered, outcome)) continue;
        if (outcome === 'timeout') {
          // A holder that stopped costs up to 1 s of the deadline: excused only where off with that much less would not surely answer.
          const lessened = facts.off(key, asked.arrivedAt, facts.T - DEAD_HOLDER_DELAY_MS);
          const deadHolder =
            facts.shared &&
            (facts.standingStopped(key.id, asked.arrivedAt).length > 0 ||
              facts.stoppedHolders(key.id, asked.arrivedAt, answer.answeredAt).length > 0) &&
            !(lessened.size === 1 && !lessened.has(504));
          // Waiting on the table's news of another's exchange, which the contract does not promise when the table fails.
          const tableFailedIt = facts.tableFault(asked.instance, asked.arrivedAt, answer.answeredAt, key.id);
          // DynamoDB's item limit: a token too large for the table never reaches those who waited on its exchange; once the
          // fleet knows the key's tokens do not fit, nobody waits on its claims ("Large tokens").
          const tooLarge =
            facts.shared &&
            !facts.oversizeKnown(key.id, asked.arrivedAt) &&
            facts
              .callsFor(key.id)
              .some(
                (call) =>
                  call.instance !== asked.instance &&
                  call.sentAt <= asked.arrivedAt + facts.T &&
                  call.endedAt >= asked.arrivedAt &&
                  call.bytes > SHARED_TOKEN_LIMIT_BYTES,
              );
          // "Clocks": a token that cannot be kept, received elsewhere within the clocks' spread after this request arrived,
          // is a fact that may take effect that much early here: this request may have judged itself later than it.
          const clockedOut =
            facts.shared &&
            facts
              .tokensWithin(key.id, asked.arrivedAt, asked.arrivedAt + facts.spread)
              .some((issued) => !issued.life.kept && issued.receiver !== asked.instance);
          // "Bursts": it shares the exchange still running at its deadline, unless it outlasts that exchange's request (then it
          // was owed its own call, judged as any);
          // not when an exchange that ran as it came brought a token the fleet was told of by then: that was its outcome.
          const sharedRunning =
            facts.shared &&
            facts
              .callsFor(key.id)
              .some(
                (call) =>
                  call.request !== asked.id &&
                  call.sentAt < answer.answeredAt &&
                  call.endedAt > answer.answeredAt &&
                  !outlasts(facts, asked, call),
              ) &&
            !missedToken(facts, answered);
          if (deadHolder || tableFailedIt || tooLarge || clockedOut || sharedRunning) continue;
        }
        const off = [...facts.off(key, asked.arrivedAt)].join(' or ') || 'nothing known';
        flag(answer.answeredAt, `${describe(asked)} got ${answer.status} where off would have answered ${off}, and met no such failure`);
      }
    },
  ),
  invariant(
    'assertion',
    'Token cache: "`private_key_jwt` requests are never answered from a cache, never share an exchange and are never remembered; holds apply to them."',
    (facts, flag) => {
      for (const { asked, answer, key } of facts.answered) {
        if (key.kind !== 'assertion') continue;
        const own = facts.callsOf(asked.id);
        if (answer.status === 200) {
          if (!(answer.header === 'miss' && own.some((call) => call.outcome === 'token' && call.token === answer.token)))
            flag(answer.answeredAt, `${describe(asked)} got ${String(answer.token)} as ${String(answer.header)}, not from its own call`);
        } else if (
          answer.status !== 503 &&
          ERROR_CODES.has(answer.status) &&
          !own.some((call) => STATUS_OF[call.outcome] === answer.status)
        ) {
          flag(
            answer.answeredAt,
            `${describe(asked)} got ${answer.status}, which its own calls (${own.map((call) => call.outcome).join(', ') || 'none'}) did not`,
          );
        }
      }
    },
  ),
];
