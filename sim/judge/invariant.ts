import type { Violation } from '../record';
import type { Facts } from './facts';

/** One promise of the contract: its name, the contract's words it applies, and the check that finds it broken. */
export interface Invariant {
  readonly name: string;
  /** The contract's section and words. */
  readonly rule: string;
  readonly check: (facts: Facts) => Violation[];
}

/** An invariant whose check reports each breach through `flag`. */
export function invariant(
  name: string,
  rule: string,
  check: (facts: Facts, flag: (at: number, detail: string) => void) => void,
): Invariant {
  return {
    name,
    rule,
    check: (facts) => {
      const found: Violation[] = [];
      check(facts, (at, detail) => found.push({ rule: name, at, detail }));
      return found;
    },
  };
}
