/**
 * How a refusal names a setting: as the stack's prop (`logRetention`) when the stack is used as a
 * construct, or as the context key the user typed (`-c logRetentionDays=...`) when the app is run.
 */
export type SettingName = (prop: string) => string;

/** One refused setting: fixed words, or words that name each setting through `name`. */
export type SettingProblem = string | ((name: SettingName) => string);

/** The props' own names. */
export const PROP_NAMES: SettingName = (prop) => prop;

/** The stack's settings refused, one line each; `describe` words them for whoever set them some other way. */
export class InvalidSettingsError extends Error {
  constructor(readonly problems: readonly SettingProblem[]) {
    super(describeProblems('TokenExchangeStack props', problems, PROP_NAMES));
  }

  describe(what: string, name: SettingName): string {
    return describeProblems(what, this.problems, name);
  }
}

function describeProblems(what: string, problems: readonly SettingProblem[], name: SettingName): string {
  const lines = problems.map((problem) => (typeof problem === 'string' ? problem : problem(name)));
  return `Invalid ${what}:\n- ${lines.join('\n- ')}`;
}
