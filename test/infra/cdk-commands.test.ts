import { App } from 'aws-cdk-lib';
import { BUNDLING_STACKS, FAIL_SYNTH_ON_VALIDATION_ERRORS_CONTEXT } from 'aws-cdk-lib/cx-api';
import { buildApp } from '../../infra/app';
import { OPEN_RELAY_REFUSAL } from '../../infra/token-exchange-stack';
import { projectContext } from './stack-fixture';

// What the CDK CLI tells the app about the command it runs: `aws:cdk:bundling-stacks` (see
// validateSettings in infra/token-exchange-stack.ts). Nothing else in its context or environment
// differs between commands.
const NO_ASSET_BUILT: string[] = [];
const EVERY_STACK: string[] = ['**'];

/**
 * The app as the CLI runs it for a command, with no token URL choice anywhere. The CLI also asks
 * every app not to throw on validation errors: it reports them itself, and stops synth and deploy on them.
 */
function appAsTheCliRunsIt(bundlingStacks: string[], context: Record<string, unknown> = {}): App {
  return new App({
    context: { ...projectContext(), [BUNDLING_STACKS]: bundlingStacks, [FAIL_SYNTH_ON_VALIDATION_ERRORS_CONTEXT]: false, ...context },
  });
}

describe('the app with no token URL choice', () => {
  it('synthesizes for the commands that build no asset (bootstrap, ls, flags, destroy, metadata, gc)', () => {
    // Prepare
    const app = appAsTheCliRunsIt(NO_ASSET_BUILT);

    // Act
    const [stack] = buildApp(app);
    const assembly = app.synth();

    // Assess
    expect(assembly.getStackByName(stack.stackName).templateFile).toBe('TokenExchange.template.json');
  });

  it('leaves that assembly marked with the refusal as an error, so deploying it (`cdk deploy --app cdk.out`) stops', () => {
    // Prepare
    const app = appAsTheCliRunsIt(NO_ASSET_BUILT);

    // Act
    const [stack] = buildApp(app);

    // Assess
    const errors = app
      .synth()
      .getStackByName(stack.stackName)
      .messages.filter((message) => message.level === 'error')
      .map((message) => message.entry.data);
    expect(errors).toEqual([OPEN_RELAY_REFUSAL]);
  });

  it('stops with the refusal for synth, deploy, diff and watch, which build every stack', () => {
    // Act
    const act = () => buildApp(appAsTheCliRunsIt(EVERY_STACK));

    // Assess
    expect(act).toThrow(OPEN_RELAY_REFUSAL);
  });

  it('stops with the refusal for a command run `--exclusively` on this stack', () => {
    // Act
    const act = () => buildApp(appAsTheCliRunsIt(['TokenExchange']));

    // Assess
    expect(act).toThrow(OPEN_RELAY_REFUSAL);
  });

  it('stops with the refusal when run without the CLI, which says nothing about bundling', () => {
    // Act
    const act = () => buildApp(new App({ context: projectContext() }));

    // Assess
    expect(act).toThrow(OPEN_RELAY_REFUSAL);
  });

  it('still refuses a bad setting for a command that builds no asset', () => {
    // Prepare
    const app = appAsTheCliRunsIt(NO_ASSET_BUILT, { memorySize: '64' });

    // Act
    const act = () => buildApp(app);

    // Assess
    expect(act).toThrow(/memorySize must be a whole number of MiB from 128 to 10240, got 64/);
  });
});
