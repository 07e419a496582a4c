import type { Asked, IdpCall, SimKey } from '../record';
import { HOLD_MAX_S, HOLD_MIN_S, PEPPER_SWITCH_MS, REJECTION_REMEMBERED_MS, SECOND_MS, STATUS_OF } from './contract';
import { describe, type Facts, type Hold } from './facts';
import { type Invariant, invariant } from './invariant';

// "The IdP asks to wait": a throttle holds its source key, its client's assertions, or (its secret
// proven) its whole client id at that token URL, until its retry-after has passed. The instance that
// got it knows at once; the fleet (`shared`) from the answer it was published before.

/**
 * When a hold's publication surely stood until `until`: told with no fault in the way of its instance, no adversary on
 * the hold's items, no pepper rotation from 60 s before it to then; undefined if it was not.
 */
function publishedFor(facts: Facts, hold: Hold, until: number): number | undefined {
  if (!facts.shared || hold.told === undefined || facts.troubled(hold.instance, hold.from, hold.told)) return undefined;
  if (facts.tamperedItems((item) => facts.holdItem(item, hold.source), hold.from, until)) return undefined;
  // A rotation within the 60 s before it began: its instance may have sealed it with the pepper the fleet then ignores.
  return facts.rotated(hold.from - PEPPER_SWITCH_MS, until) ? undefined : hold.told;
}

/**
 * Whether an instance other than the hold's own surely knew it for a request that arrived at `arrivedAt`,
 * until `until`: published before the request came (as `publishedFor`), and no fault in the way of the read.
 */
function fleetKnew(facts: Facts, hold: Hold, instance: string, arrivedAt: number, until: number): boolean {
  const told = publishedFor(facts, hold, until);
  // "The table never costs an answer ... at worst the request goes to the IdP itself."
  return told !== undefined && arrivedAt > told && !facts.troubled(instance, arrivedAt, until);
}

/**
 * Whether a request learnt of a hold from the exchange it waited on: earned by a call running when it came, published
 * (as `publishedFor`) before its answer, and its instance read the hold's item after that with no fault
 * (Bursts: those that arrive while an exchange runs "share that exchange and its outcome"; "A hold is never shortened").
 */
function heardWaiting(facts: Facts, hold: Hold, asked: Asked, answeredAt: number): boolean {
  const { call } = hold;
  const told = publishedFor(facts, hold, answeredAt);
  return (
    told !== undefined &&
    call.sentAt <= asked.arrivedAt &&
    call.endedAt > asked.arrivedAt &&
    answeredAt < hold.until - facts.spread &&
    facts.readBetween(asked.instance, (name) => facts.holdItem(name, hold.source), told, answeredAt)
  );
}

/** `retry-after`: "the seconds left (rounded up)", within the contract's 1 to 60. */
function secondsLeft(until: number, at: number): number {
  return Math.min(HOLD_MAX_S, Math.max(HOLD_MIN_S, Math.ceil((until - at) / SECOND_MS)));
}

/** Within a millisecond (the clocks' resolution) of a whole second, not on it, the seconds left may round either way. */
function atEdge(until: number, at: number): number {
  const over = (until - at) % SECOND_MS;
  return (over > 0 && over < 1) || over > SECOND_MS - 1 ? 1 : 0;
}

/**
 * The values a 503's retry-after may state: a hold's seconds left (more, up to `most`, where its instance met
 * it late), within the clocks' spread when another instance dated it.
 */
interface Due {
  readonly seconds: number;
  readonly most: number;
  readonly tolerance: number;
  /** Surely known to the answering instance: never shortened below it. */
  readonly sure: boolean;
}

function duesOf(facts: Facts, asked: Asked, answeredAt: number): Due[] {
  const key = facts.keys.get(asked.key) as SimKey;
  const dues: Due[] = [];
  for (const call of facts.callsOf(asked.id)) {
    const own = facts.holdOf(call);
    if (own) dues.push({ seconds: own.retryAfterS, most: own.retryAfterS, tolerance: 0, sure: true });
  }
  for (const hold of facts.holdsAround(key, answeredAt)) {
    if (hold.call.request === asked.id || (!facts.shared && hold.instance !== asked.instance) || !facts.covers(hold, key, 'possibly'))
      continue;
    const slack = facts.slack(hold.instance, asked.instance);
    // In force when it came (by some clock), or met while it waited: the burst it joined was throttled.
    const inForce = hold.from <= asked.arrivedAt && asked.arrivedAt < hold.lateUntil + slack;
    const met = hold.from >= asked.arrivedAt && hold.from <= answeredAt;
    if (!inForce && !met) continue;
    const known =
      hold.instance === asked.instance
        ? hold.from <= asked.arrivedAt && asked.arrivedAt < hold.until
        : (asked.arrivedAt < hold.until - facts.spread && fleetKnew(facts, hold, asked.instance, asked.arrivedAt, answeredAt)) ||
          heardWaiting(facts, hold, asked, answeredAt);
    dues.push({
      seconds: secondsLeft(hold.until, answeredAt),
      most: secondsLeft(hold.lateUntil, answeredAt),
      tolerance: Math.ceil(slack / SECOND_MS) + atEdge(hold.until, answeredAt),
      sure: known && facts.covers(hold, key, 'surely'),
    });
  }
  return dues;
}

/**
 * Whether a failure may be the request's instance's own memory, or an exchange it shared: a call for its key with that
 * outcome on its instance, or running when it came (by any clock), or an earlier request on its instance answered it.
 */
function failureOwnOrShared(facts: Facts, asked: Asked, status: number): boolean {
  const since = asked.arrivedAt - REJECTION_REMEMBERED_MS - facts.T - facts.spread;
  return (
    facts
      .callsFor(asked.key)
      .some(
        (call) =>
          STATUS_OF[call.outcome] === status && (call.instance === asked.instance || call.endedAt >= asked.arrivedAt - facts.spread),
      ) ||
    facts
      .underWay(asked.instance, since, asked.arrivedAt)
      .some(
        (other) =>
          other.id !== asked.id &&
          other.key === asked.key &&
          other.arrivedAt < asked.arrivedAt &&
          facts.answers.get(other.id)?.status === status,
      )
  );
}

export const holdInvariants: readonly Invariant[] = [
  invariant(
    'hold kept',
    'The IdP asks to wait: "nothing more is sent to that token URL ... for that client id until its `retry-after` has passed, with `shared` from any instance"; "A hold is never shortened".',
    (facts, flag) => {
      const flagged = new Set<IdpCall>();
      for (const hold of facts.holds) {
        for (const call of facts.sentWithin(hold.from, hold.until)) {
          if (flagged.has(call) || !(call.sentAt > hold.from && call.sentAt < hold.until)) continue;
          const key = facts.keys.get(call.key);
          if (!key || !facts.covers(hold, key, 'surely')) continue;
          if (call.instance !== hold.instance) {
            // Another instance's clock may see the hold end up to the spread early.
            const asked = facts.requests.get(call.request);
            // "... at worst the request goes to the IdP itself": so it may while its read of the hold's items is still out.
            if (
              !asked ||
              !(call.sentAt < hold.until - facts.spread) ||
              !fleetKnew(facts, hold, call.instance, asked.arrivedAt, call.sentAt) ||
              facts.tableSilent(call.instance, (item) => facts.holdItem(item, hold.source), asked.arrivedAt, call.sentAt)
            )
              continue;
          }
          flagged.add(call);
          flag(
            call.sentAt,
            `${call.instance} asked the IdP for ${call.key} ${call.sentAt - hold.from} ms into the ${hold.retryAfterS} s hold ${hold.instance} got for ${hold.source.id}`,
          );
        }
      }
    },
  ),
  invariant(
    'hold earned',
    'The IdP asks to wait: "those requests get the same `503` with the seconds left (rounded up)"; "a later, shorter `retry-after` leaves the longer one in force"; Responses: 503 "Carries a `retry-after` header: whole seconds, the IdP\'s (1 to 60)".',
    (facts, flag) => {
      for (const { asked, answer } of facts.answered) {
        if (answer.status !== 503) continue;
        const dues = duesOf(facts, asked, answer.answeredAt);
        if (dues.length === 0) {
          flag(answer.answeredAt, `${describe(asked)} got 503 with no throttle of its own and no hold covering it`);
          continue;
        }
        const stated = answer.retryAfter;
        const least = Math.max(-Infinity, ...dues.filter((due) => due.sure).map((due) => due.seconds - due.tolerance));
        const matches = dues.some(
          (due) => (stated as number) >= due.seconds - due.tolerance && (stated as number) <= due.most + due.tolerance,
        );
        if (!matches || (stated as number) < least) {
          const shown = dues.map(
            (due) =>
              `${due.seconds}${due.most > due.seconds ? `-${due.most}` : ''}${due.tolerance > 0 ? `±${due.tolerance}` : ''}${due.sure ? ' (known)' : ''}`,
          );
          flag(answer.answeredAt, `${describe(asked)} got retry-after ${String(stated)} where the holds say ${shown.join(', ')}`);
        }
      }
    },
  ),
  invariant(
    'hold over failure',
    'The IdP asks to wait: "nothing more is sent to that token URL ... for that client id until its `retry-after` has passed, with `shared` from any instance; those requests get the same `503` with the seconds left (rounded up), or a kept unexpired token"; "A hold on a client id covers every request for that client id and token URL".',
    (facts, flag) => {
      if (!facts.shared) return;
      for (const { asked, answer, key } of facts.answered) {
        if (![401, 502, 504].includes(answer.status) || asked.noCache || key.kind === 'assertion') continue;
        if (facts.callsOf(asked.id).length > 0) continue;
        // Another key's hold on the whole client id, published to the fleet before the request came and in force by every clock.
        const hold = facts
          .holdsAround(key, asked.arrivedAt)
          .find(
            (candidate) =>
              candidate.source.id !== key.id &&
              candidate.instance !== asked.instance &&
              facts.covers(candidate, key, 'surely') &&
              answer.answeredAt < candidate.until - facts.spread &&
              fleetKnew(facts, candidate, asked.instance, asked.arrivedAt, answer.answeredAt),
          );
        if (!hold || failureOwnOrShared(facts, asked, answer.status)) continue;
        flag(
          answer.answeredAt,
          `${describe(asked)} got ${answer.status} under the ${hold.retryAfterS} s hold ${hold.instance} got for ${hold.source.id}, published before it came`,
        );
      }
    },
  ),
];
