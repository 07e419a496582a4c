// Under `npm run mutate` only (jest.mutation.config.js). Stryker needs one failing test to call a
// mutant killed, but its jest runner cannot bail (jest has no programmatic bail), so every test that
// reached the mutant ran to its end. Once a test has failed under the active mutant, this skips the
// rest of that mutant's run: later tests, and later describe blocks with their beforeAll and afterAll
// hooks (a block that has started keeps its afterAll, so what it opened is closed). Nothing changes
// for Stryker's dry run or for a mutant no test kills.
const { TestEnvironment } = require('jest-environment-node');

/** The active mutant some test has already failed under, in this process. */
let killed;

class MutationEnvironment extends TestEnvironment {
  async handleTestEvent(event) {
    const mutant = process.env.__STRYKER_ACTIVE_MUTANT__;
    if (mutant === undefined) return;
    if (event.name === 'test_done' && event.test.errors.length > 0) killed = mutant;
    else if (killed === mutant && event.name === 'run_describe_start') event.describeBlock.mode = 'skip';
    else if (killed === mutant && event.name === 'test_start') event.test.mode = 'skip';
  }
}

module.exports = MutationEnvironment;
