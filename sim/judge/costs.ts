import { SECOND_MS } from './contract';
import { describe } from './facts';
import { type Invariant, invariant } from './invariant';

// What the cache may cost the table and the pepper's store. The contract bounds it in words ("a refused
// conditional write is retried a bounded number of times"); the numbers are the team's, as
// docs/TOKEN-CACHE.md states them to users ("Costs", "The pepper"), each read at its loosest.

/**
 * "a waiter reads every 20 to 100 ms": one read of an item per 20 ms a request lasts, beyond its first
 * few. The first few count twice: a Lambda instance thawed for a request finishes the calls its last
 * one left under way.
 */
export const READ_EVERY_MS = 20;
export const FIRST_READS = 6;
/** "a claim, a renewal per 250 ms of the IdP and the outcome", "one that waits over 250 ms also writes its echo request", each "after 3 refusals, without the table": four tries of a write per 250 ms, and of three more (the last request's outcome among them). */
export const WRITE_EVERY_MS = 250;
export const TRIES = 4;
export const FIRST_WRITES = 3;
/** "The pepper is read at start, again in the background once 30 s old"; "Without a pepper an instance ... tries again at most once a second". */
export const PEPPER_AGAIN_MS = 30_000;
export const PEPPER_RETRY_MS = SECOND_MS;

export const costInvariants: readonly Invariant[] = [
  invariant(
    'table costs',
    'The table never costs an answer: "a refused conditional write is retried a bounded number of times before the request goes on without the table"; docs/TOKEN-CACHE.md, Costs: "a claim, a renewal per 250 ms of the IdP and the outcome; a waiter reads every 20 to 100 ms".',
    (facts, flag) => {
      for (const { asked, answer } of facts.answered) {
        // Only a request alone on its instance from arrival to answer owns every call its instance made meanwhile.
        if (!facts.alone(asked, answer.answeredAt)) continue;
        const lasted = answer.answeredAt - asked.arrivedAt;
        const calls = facts.record.table.filter(
          (call) => call.instance === asked.instance && call.sentAt >= asked.arrivedAt && call.sentAt <= answer.answeredAt,
        );
        const counts = new Map<string, { get: number; put: number }>();
        for (const call of calls) {
          const count = counts.get(call.item) ?? { get: 0, put: 0 };
          count[call.op]++;
          counts.set(call.item, count);
        }
        const reads = FIRST_READS + Math.floor(lasted / READ_EVERY_MS);
        const writes = TRIES * (FIRST_WRITES + Math.floor(lasted / WRITE_EVERY_MS));
        for (const [item, count] of counts) {
          if (count.get > reads)
            flag(answer.answeredAt, `${describe(asked)} read ${item} ${count.get} times in ${lasted} ms (at most ${reads})`);
          if (count.put > writes)
            flag(answer.answeredAt, `${describe(asked)} wrote ${item} ${count.put} times in ${lasted} ms (at most ${writes})`);
        }
      }
    },
  ),
  invariant(
    'pepper reads',
    'docs/TOKEN-CACHE.md, The pepper: "The pepper is read at start, again in the background once 30 s old ... Without a pepper an instance goes without the table and tries again at most once a second."',
    (facts, flag) => {
      const last = new Map<string, (typeof facts.record.pepper)[number]>();
      for (const read of [...facts.record.pepper].sort((a, b) => a.sentAt - b.sentAt)) {
        const before = last.get(read.instance);
        last.set(read.instance, read);
        if (!before) continue;
        const gotIt = before.fault === 'none' && before.answeredAt !== undefined && before.answeredAt <= read.sentAt;
        const least = gotIt ? PEPPER_AGAIN_MS : PEPPER_RETRY_MS;
        if (read.sentAt - before.sentAt < least)
          flag(read.sentAt, `${read.instance} read the pepper ${read.sentAt - before.sentAt} ms after its last read (at least ${least})`);
      }
    },
  ),
];
