import { Stack, Validations } from 'aws-cdk-lib';
import { HttpApi, HttpMethod } from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpUrlIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import { Code, Function as LambdaFunction, Runtime } from 'aws-cdk-lib/aws-lambda';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import { buildApp } from '../../infra/app';
import type { TokenExchangeStack } from '../../infra/token-exchange-stack';
import { newApp, synthesize } from './stack-fixture';

// cdk-nag 3 is a policy validation plugin, not an aspect: findings are not annotations, so
// `validateScope` (its documented entry point for tests) reports them, warnings included.
function findings(scope: IConstruct): string[] {
  return new AwsSolutionsChecks().validateScope(scope).violations.map((violation) => violation.ruleName);
}

function acknowledgedRules(scope: IConstruct): Record<string, string> {
  const rules: Record<string, string> = {};
  for (const construct of scope.node.findAll()) {
    for (const entry of construct.node.metadata) {
      if (entry.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY) Object.assign(rules, entry.data);
    }
  }
  return rules;
}

let defaults: TokenExchangeStack;
let configured: TokenExchangeStack;

beforeAll(() => {
  defaults = synthesize().stack;
  configured = synthesize({
    reservedConcurrency: 5,
    corsOrigins: ['https://app.example.com'],
    allowedTokenUrls: ['https://*.auth0.com'],
  }).stack;
});

describe('cdk-nag AwsSolutions', () => {
  it('finds no unacknowledged error or warning in the stack with default props', () => {
    expect(findings(defaults)).toEqual([]);
  });

  it('finds no unacknowledged error or warning in the stack with CORS, reserved concurrency and an allowlist', () => {
    expect(findings(configured)).toEqual([]);
  });

  it('acknowledges only APIG4 (authorization on a public token endpoint), with a reason', () => {
    const rules = acknowledgedRules(defaults);

    expect(Object.keys(rules)).toEqual([expect.stringMatching(/AwsSolutions-APIG4$/)]);
    expect(Object.values(rules)[0]).toMatch(/client credentials/);
  });

  it('does report an unacknowledged public route, the managed basic execution role and Node.js 22 (the checks are live)', () => {
    // Prepare: what the stack avoids, in a bare stack
    const stack = new Stack(newApp({ bundle: false }), 'Control');
    const api = new HttpApi(stack, 'Api');
    api.addRoutes({
      path: '/token',
      methods: [HttpMethod.POST],
      integration: new HttpUrlIntegration('Url', 'https://idp.example.com/token'),
    });
    new LambdaFunction(stack, 'Fn', {
      runtime: Runtime.NODEJS_22_X,
      handler: 'index.handler',
      code: Code.fromInline('exports.handler=()=>{}'),
    });

    // Act
    const reported = findings(stack);

    // Assess
    expect(reported).toEqual(
      expect.arrayContaining([
        'AwsSolutions-APIG1',
        'AwsSolutions-APIG4',
        'AwsSolutions-L1',
        expect.stringMatching(/^AwsSolutions-IAM4\[/),
      ]),
    );
  });

  it('fails the synth of the app when a finding is not acknowledged', () => {
    // Prepare: an unauthorized route the stack did not acknowledge, in the app as buildApp makes it
    const app = newApp({ bundle: false });
    const [stack] = buildApp(app);
    const extra = new HttpApi(stack, 'Unreviewed', { createDefaultStage: false });
    extra.addRoutes({ path: '/open', methods: [HttpMethod.GET], integration: new HttpUrlIntegration('Url', 'https://idp.example.com/') });

    // Act
    const act = () => app.synth();

    // Assess
    expect(act).toThrow(/AwsSolutions-APIG4/);
  });
});
