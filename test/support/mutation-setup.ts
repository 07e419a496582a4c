import fc from 'fast-check';

// Under mutation a failing property only has to fail: shrinking it to a smallest case costs minutes
// per mutant and turns a killed mutant into a timeout. `npm test` keeps shrinking.
fc.configureGlobal({ endOnFailure: true });
