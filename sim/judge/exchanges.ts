import type { IdpCall, SimKey } from '../record';
import {
  BURST_CALLS_MEMORY,
  BURST_CALLS_SHARED,
  SHARED_TOKEN_LIMIT_BYTES,
  NO_CACHE_REACH_MS,
  PEPPER_SWITCH_MS,
  REJECTION_REMEMBERED_MS,
  TAKE_OVER_SHARE,
} from './contract';
import { describe, type Facts, type Issued, rememberedMs } from './facts';
import { type Invariant, invariant } from './invariant';

// What reaches the IdP, and what the fleet learns: one exchange per burst (give or take the contract's
// allowances), none while a fresh token is held, one refresh at a time and one before a token goes
// stale, a no-cache token everywhere within 30 s, and nothing sealed with a rotated pepper after 60 s.

/** Kinds a cache keeps and shares ("`private_key_jwt` requests are never answered from a cache"). */
const cached = (key: SimKey | undefined): key is SimKey => key !== undefined && key.kind !== 'assertion';

/**
 * Whether `instance` surely held a token of `call`'s key in `phase` when it sent `call`: received or answered
 * before the call's request came, or read from the table (`heldSurely`), no 401 it may know of since, and
 * in that phase however the clocks stand.
 */
function heldIn(facts: Facts, call: IdpCall, phase: 'fresh' | 'refresh'): Issued | undefined {
  const asked = facts.requests.get(call.request);
  if (!asked || asked.noCache) return undefined;
  return facts.tokensAlive(call.key, call.sentAt).find((issued) => {
    if (!issued.life.kept) return false;
    // A token whose exchange outlived its request may be dated at its send (as for `expires_in`): as old as that, it may be fresh no longer.
    const age = call.sentAt - (phase === 'fresh' ? facts.datedFrom(issued) : issued.issuedAt);
    const slack = facts.slack(issued.receiver, call.instance);
    const inPhase =
      phase === 'fresh' ? age < issued.life.refreshMs - slack : age >= issued.life.refreshMs + slack && age < issued.life.staleMs - slack;
    return (
      inPhase &&
      // A 401 that another clock dated after the token's receipt voids it ("Clocks": a fact may take effect up to the spread early or late).
      facts.rejectedAfter(call.key, call.instance, issued.issuedAt - (facts.shared ? facts.spread : 0), call.sentAt) === undefined &&
      facts.heldSurely(call.instance, issued, asked.arrivedAt, call.sentAt) !== undefined
    );
  });
}

/** Whether a remembered failure or a hold for `key` may have been in force on `instance` at `at` (by some clock). */
function failureInForce(facts: Facts, key: SimKey, instance: string, at: number): boolean {
  const remembered = facts.endedWithin(key.id, at - REJECTION_REMEMBERED_MS - facts.spread, at).some((call) => {
    const kept = rememberedMs(call, facts.T);
    return kept > 0 && (facts.shared || call.instance === instance) && at < call.endedAt + kept + facts.slack(call.instance, instance);
  });
  const held = facts
    .holdsAround(key, at)
    .some(
      (hold) =>
        (facts.shared || hold.instance === instance) &&
        facts.covers(hold, key, 'possibly') &&
        hold.from <= at &&
        at < hold.lateUntil + facts.slack(hold.instance, instance),
    );
  return remembered || held;
}

/** The IdP calls for one key of a kind the cache shares, in the order they were sent. */
function* sharedKeys(facts: Facts): Generator<[SimKey, readonly IdpCall[]]> {
  for (const key of facts.keys.values()) if (cached(key)) yield [key, facts.callsFor(key.id)];
}

export const exchangeInvariants: readonly Invariant[] = [
  invariant(
    'burst',
    'Bursts: "With `shared`, while the table answers, the requests for one key that arrive while its exchange runs or while its outcome is remembered reach the IdP at most twice across the fleet, plus one for each request that would otherwise wait on exchanges that can no longer answer within its deadline while its own still could (its deadline ends more than a fifth of the deadline after theirs)"; A dead holder; `memory`: at most once per instance.',
    (facts, flag) => {
      const limit = facts.shared ? BURST_CALLS_SHARED : BURST_CALLS_MEMORY;
      for (const [key, calls] of sharedKeys(facts)) {
        const flagged = new Set<IdpCall>();
        calls.forEach((first, index) => {
          const firstAsked = facts.requests.get(first.request);
          // The outcome is remembered by the writer's clock: another instance may see it end up to the spread early.
          // The fleet remembers it only as published: not when the table failed its instance before it answered, nor
          // (an outcome at its request's deadline) before a write sent then landed (one refused then is not written again).
          const told = facts.answers.get(first.request)?.answeredAt;
          const troubled = told === undefined || facts.troubled(first.instance, firstAsked?.arrivedAt ?? first.sentAt, told);
          const unpublished = (at: number) => troubled || facts.untoldAtDeadline(first, at);
          const endFor = (instance: string, at = Infinity) =>
            first.endedAt +
            (instance !== first.instance && unpublished(at)
              ? 0
              : Math.max(0, rememberedMs(first, facts.T) - facts.slack(first.instance, instance)));
          const burstEnd = endFor(first.instance);
          const stopped = facts.shared
            ? new Set(facts.stoppedHolders(key.id, first.sentAt, burstEnd).map((holder) => holder.instance)).size
            : 0;
          // An exchange sent after its instance's table failed its request is unknown to the fleet ("while the table answers"):
          // only that instance's requests may wait on it, or join its burst.
          const unknown = (call: IdpCall) =>
            facts.shared && facts.troubled(call.instance, facts.requests.get(call.request)?.arrivedAt ?? call.sentAt, call.sentAt);
          const firstUnknown = unknown(first);
          // The exchanges of the burst so far: a request may take over only those still running when it arrived.
          const running = firstAsked ? [{ deadline: facts.deadline(firstAsked), call: first, unknown: firstUnknown }] : [];
          let counted = 0;
          // A request counts by when it came, not when it asked: one that came by the burst's end asks by its deadline.
          for (let next = index + 1; next < calls.length; next++) {
            const call = calls[next] as IdpCall;
            if (call.sentAt > burstEnd + facts.T) break;
            if ((!facts.shared || firstUnknown) && call.instance !== first.instance) continue;
            const asked = facts.requests.get(call.request);
            const end = endFor(call.instance, call.sentAt);
            if (!asked) continue;
            const deadline = facts.deadline(asked);
            // "Clocks": a no-cache request takes no remembered failure, and its writer may date one that ended up to the spread
            // after the request came before it: such an exchange is not one it could share.
            const waitedOn = running
              .filter(
                ({ call: exchange, unknown: elsewhere }) =>
                  !(elsewhere && exchange.instance !== call.instance) &&
                  exchange.endedAt >=
                    asked.arrivedAt + (asked.noCache && exchange.outcome !== 'token' ? facts.slack(exchange.instance, call.instance) : 0),
              )
              .map((exchange) => exchange.deadline);
            const takesOver = waitedOn.length > 0 && deadline > Math.max(...waitedOn) + facts.T * TAKE_OVER_SHARE;
            running.push({ deadline, call, unknown: unknown(call) });
            if (takesOver || !(asked.arrivedAt > first.sentAt && asked.arrivedAt <= end)) continue;
            // "Clocks": a token that cannot be kept, received elsewhere within the spread after this request came, may be
            // dated before it came: "to no later request", so this one may ask for its own.
            const clockedOut =
              facts.shared &&
              facts
                .tokensWithin(key.id, asked.arrivedAt, asked.arrivedAt + facts.spread)
                .some((issued) => !issued.life.kept && issued.receiver !== call.instance);
            const excused =
              clockedOut ||
              // The outcome not published when it asked: it knew the exchange had run, not how it ended ("while the table answers").
              (call.instance !== first.instance && call.sentAt > first.endedAt && unpublished(call.sentAt)) ||
              // A no-cache request that came when no exchange it could share ran asks for itself ("no remembered failure").
              (asked.noCache && (asked.arrivedAt > first.endedAt || waitedOn.length === 0)) ||
              (facts.shared &&
                (facts.troubled(call.instance, first.sentAt, call.sentAt) ||
                  facts.tampered(key.id, first.sentAt, call.sentAt) ||
                  facts.rotated(call.sentAt - PEPPER_SWITCH_MS, call.sentAt) ||
                  // DynamoDB's item limit: the table cannot hold it, so none can wait on it there.
                  facts.tooLargeBefore(key.id, call.sentAt)));
            if (excused) continue;
            counted++;
            if (counted > limit + stopped && !flagged.has(call)) {
              flagged.add(call);
              flag(
                call.sentAt,
                `${call.instance} sent call ${counted + 1} of the burst for ${key.id} that began at ${first.sentAt} (allowed ${limit + stopped} after the first)`,
              );
            }
          }
        });
      }
    },
  ),
  invariant(
    'fresh token kept',
    'Token cache: "A kept token answers an identical request"; Refresh ahead: the IdP is asked again only "From the later of (received + `expires_in`/2) and (stale - 30 s)", by "the instance that received the token ... from the window\'s middle on, the first request on any instance"; `no-cache` aside.',
    (facts, flag) => {
      for (const call of facts.calls) {
        if (!cached(facts.keys.get(call.key))) continue;
        const fresh = heldIn(facts, call, 'fresh');
        if (fresh)
          flag(
            call.sentAt,
            `${call.instance} asked the IdP for ${call.key} while it held ${fresh.token}, ${call.sentAt - fresh.issuedAt} ms old and fresh`,
          );
        // Before the window's middle (as any clock may date it), a copy is its receiver's to refresh (one holding a token of its own may).
        const copy = facts.shared ? heldIn(facts, call, 'refresh') : undefined;
        const own = () =>
          facts.tokensAlive(call.key, call.sentAt).some((issued) => issued.call !== call && issued.receiver === call.instance);
        if (copy?.life.kept && copy.receiver !== call.instance && call.sentAt - copy.issuedAt < copy.life.middleMs - facts.spread && !own())
          flag(
            call.sentAt,
            `${call.instance} refreshed ${call.key}'s ${copy.token}, ${copy.receiver}'s, ${call.sentAt - copy.issuedAt} ms old: before its window's middle`,
          );
      }
    },
  ),
  invariant(
    'one refresh at a time',
    'Refresh ahead: "a kept token is refreshed from the IdP by one request while every other request for it is answered at once with the kept token (`hit`) ... With `shared`, one refresh at a time per key across the fleet".',
    (facts, flag) => {
      for (const [key, calls] of sharedKeys(facts)) {
        const refreshes = calls.filter((call) => heldIn(facts, call, 'refresh') !== undefined);
        refreshes.forEach((second, index) => {
          const first = refreshes
            .slice(0, index)
            .find((earlier) => second.sentAt < earlier.endedAt && (facts.shared || earlier.instance === second.instance));
          const [firstAsked, secondAsked] = [facts.requests.get(first?.request ?? NaN), facts.requests.get(second.request)];
          if (!first || !firstAsked || !secondAsked) return;
          const from = Math.min(firstAsked.arrivedAt, secondAsked.arrivedAt);
          const excused =
            facts.troubled(first.instance, from, second.sentAt) ||
            facts.troubled(second.instance, from, second.sentAt) ||
            facts.tampered(key.id, from - facts.T, second.sentAt) ||
            facts.rotated(second.sentAt - PEPPER_SWITCH_MS, second.sentAt) ||
            facts.stoppedHolders(key.id, first.sentAt, second.sentAt).some((holder) => holder.instance === first.instance) ||
            // DynamoDB's item limit: a token too large for the table is each instance's own to refresh, as is every token
            // of a key one of whose tokens found no room there (nobody waits on its claims); the held one was issued before.
            facts.tooLargeBefore(key.id, second.sentAt);
          if (!excused)
            flag(
              second.sentAt,
              `${second.instance} refreshed ${key.id} while ${first.instance}'s refresh (sent ${first.sentAt}) still ran`,
            );
        });
      }
    },
  ),
  invariant(
    'refresh fires',
    'Refresh ahead: "the instance that received the token refreshes it on its first request in that window; from the window\'s middle on, the first request on any instance does ... other instances switch to the new token no later than their copy goes stale".',
    (facts, flag) => {
      for (const issued of facts.tokens.values()) {
        const { life, key, receiver } = issued;
        if (!life.kept || !cached(key)) continue;
        // A request answered with the token in its window, on an instance that surely saw it there and was free to refresh.
        const triggers = facts.servedWith(issued.token).filter(({ asked, answer }) => {
          const age = asked.arrivedAt - issued.issuedAt;
          const inWindow =
            asked.instance === receiver
              ? age >= life.refreshMs && age < life.staleMs
              : facts.shared && age >= life.middleMs + facts.spread && age < life.staleMs - facts.spread;
          return (
            answer.header === 'hit' &&
            inWindow &&
            !facts.troubled(asked.instance, asked.arrivedAt, answer.answeredAt) &&
            // A hold that came while it was answered held its refresh back ("nothing more is sent").
            !failureInForce(facts, key, asked.instance, asked.arrivedAt) &&
            !failureInForce(facts, key, asked.instance, answer.answeredAt)
          );
        });
        const first = triggers.reduce<(typeof triggers)[number] | undefined>(
          (earliest, trigger) => (earliest && earliest.asked.arrivedAt <= trigger.asked.arrivedAt ? earliest : trigger),
          undefined,
        );
        if (!first) continue;
        const staleBy = issued.issuedAt + life.staleMs + facts.slack(receiver, first.asked.instance);
        const by = (instance: string) => facts.shared || instance === receiver;
        // An exchange for the key under way in the window is the one refresh at a time, even one sent just before it opened.
        const opens = issued.issuedAt + life.refreshMs - facts.spread;
        const called = facts.callsFor(key.id).some((call) => call.sentAt <= staleBy && call.endedAt >= opens && by(call.instance));
        const newer = facts.tokensWithin(key.id, issued.issuedAt, staleBy).some((other) => other !== issued && by(other.receiver));
        const from = first.asked.arrivedAt - facts.T;
        const excused = (facts.shared && facts.stoppedHolders(key.id, from, staleBy).length > 0) || facts.tampered(key.id, from, staleBy);
        if (!called && !newer && !excused)
          flag(staleBy, `${issued.token} of ${key.id} went stale unrefreshed, though ${describe(first.asked)} came in its refresh window`);
      }
    },
  ),
  invariant(
    'no-cache reaches the fleet',
    '`cache-control: no-cache`: "its token replaces the kept one in the table and in the answering instance, and with `shared` every other instance answers with it (or a newer token) within 30 s".',
    (facts, flag) => {
      for (const { asked, answer, key, issued: carried } of facts.served) {
        if (!cached(key)) continue;
        const { instance } = asked;
        const newer = facts.noCacheMissesWithin(key.id, carried.issuedAt, asked.arrivedAt).find((missed) => {
          const replacement = facts.tokens.get(missed.answer.token ?? '');
          // A token that cannot be kept replaces nothing; one up to the clock spread older may be dated newer ("Clocks").
          if (!replacement?.life.kept || !(replacement.issuedAt > carried.issuedAt + facts.slack(replacement.receiver, carried.receiver)))
            return false;
          const told = missed.answer.answeredAt;
          if (missed.asked.instance === instance) return asked.arrivedAt > told;
          if (!facts.shared || !(asked.arrivedAt > told + NO_CACHE_REACH_MS)) return false;
          return !(
            // DynamoDB's item limit: a token too large for the table reaches no other instance.
            replacement.call.bytes > SHARED_TOKEN_LIMIT_BYTES ||
            facts.troubled(replacement.receiver, missed.asked.arrivedAt, told) ||
            facts.tableFault(instance, asked.arrivedAt - NO_CACHE_REACH_MS, answer.answeredAt, key.id) ||
            facts.pepperFault(instance, asked.arrivedAt - NO_CACHE_REACH_MS, answer.answeredAt) ||
            facts.tampered(key.id, told, answer.answeredAt) ||
            facts.rotated(answer.answeredAt - PEPPER_SWITCH_MS, answer.answeredAt) ||
            // The pepper: "items sealed with the old one are then ignored". An instance that did not read the
            // key's item between the answer and a rotation (after it, it may have switched) can no longer learn the token from it.
            facts.record.rotations.some(
              (at) =>
                (at > told && at <= answer.answeredAt && !facts.readTable(instance, told, at, (item) => item === key.id)) ||
                // Told during a switch: its item may be sealed with the old pepper, which instances that switched never read.
                (at <= told && told <= at + PEPPER_SWITCH_MS),
            )
          );
        });
        if (newer)
          flag(
            answer.answeredAt,
            `${describe(asked)} got ${carried.token}, older than ${String(newer.answer.token)} that ${describe(newer.asked)} got at ${newer.answer.answeredAt}`,
          );
      }
    },
  ),
  invariant(
    'pepper',
    'The pepper: "After the pepper secret is rotated every instance uses the new one within 60 s; items sealed with the old one are then ignored."',
    (facts, flag) => {
      if (!facts.shared) return;
      for (const { asked, answer, issued } of facts.served) {
        if (answer.header === 'miss' || issued.receiver === asked.instance) continue;
        // Its receiver, alive, holds it in memory and may seal it anew with the new pepper: only what others read from the table is void.
        const receiverDied = facts.diedAt(issued.receiver);
        if (receiverDied === undefined || receiverDied > answer.answeredAt) continue;
        // The earliest rotation after the token's issue whose 60 s are over: the instance may have read the old item only before that.
        const rotation = facts.record.rotations
          .filter((at) => at > issued.issuedAt && at + PEPPER_SWITCH_MS <= answer.answeredAt)
          .reduce((earliest, at) => Math.min(earliest, at), Infinity);
        if (rotation < Infinity && !facts.answeredWith(asked.instance, issued.token, rotation + PEPPER_SWITCH_MS))
          flag(
            answer.answeredAt,
            `${describe(asked)} got ${issued.token}, sealed before the rotation at ${rotation}, first read after its 60 s`,
          );
      }
    },
  ),
];
