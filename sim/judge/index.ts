import type { SimRecord, Violation } from '../record';
import { answerInvariants } from './answers';
import { costInvariants } from './costs';
import { exchangeInvariants } from './exchanges';
import { failureInvariants } from './failures';
import { Facts } from './facts';
import { holdInvariants } from './holds';
import type { Invariant } from './invariant';

export type { Invariant } from './invariant';

/** Every invariant the judge applies, by name, each citing the contract's words. */
export const invariants: readonly Invariant[] = [
  ...answerInvariants,
  ...failureInvariants,
  ...holdInvariants,
  ...exchangeInvariants,
  ...costInvariants,
];

/**
 * Judge a simulation run by the contract alone, from what its record shows from outside the cache:
 * every violation found, in the order of when it happened.
 */
export function judge(record: SimRecord): Violation[] {
  const facts = new Facts(record);
  const found = [...facts.dangling, ...invariants.flatMap((invariant) => invariant.check(facts))];
  return found.sort((a, b) => a.at - b.at);
}
