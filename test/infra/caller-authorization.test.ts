import { App, Validations } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import { buildApp, propsFromContext } from '../../infra/app';
import { OPEN_RELAY_REFUSAL, TokenExchangeStack, type TokenExchangeStackProps } from '../../infra/token-exchange-stack';
import { newApp, projectContext } from './stack-fixture';

// Who may call the routes (callerAuthorization), and the refusal to post secrets to any URL by accident.
function template(props: TokenExchangeStackProps): { stack: TokenExchangeStack; template: Template } {
  const stack = new TokenExchangeStack(newApp({ bundle: false }), 'CallerAuthorizationTest', props);
  return { stack, template: Template.fromStack(stack) };
}

function acknowledgedRules(scope: IConstruct): string[] {
  return scope.node
    .findAll()
    .flatMap((construct) => construct.node.metadata)
    .filter((entry) => entry.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)
    .flatMap((entry) => Object.keys(entry.data as Record<string, string>));
}

/** An app with the project's context and nothing else, bundling nothing: for stacks the tests construct. */
const bareApp = (context: Record<string, string> = {}): App =>
  new App({ context: { ...projectContext(), 'aws:cdk:bundling-stacks': [], ...context } });

/**
 * What `cdk synth`, `deploy` or `diff` without -c give the app: the project's context and every stack
 * to bundle. Only for stacks that must be refused, which happens before anything is bundled.
 */
const synthApp = (): App => new App({ context: { ...projectContext(), 'aws:cdk:bundling-stacks': ['**'] } });

const ALLOWLIST = ['https://login.example.com'];

describe('callerAuthorization', () => {
  it('leaves both routes open to any caller by default (none)', () => {
    // Act
    const { template: open } = template({ allowedTokenUrls: ALLOWLIST });

    // Assess
    open.resourcePropertiesCountIs('AWS::ApiGatewayV2::Route', { AuthorizationType: 'NONE' }, 2);
    open.resourceCountIs('AWS::ApiGatewayV2::Route', 2);
  });

  it('puts IAM authorization (SigV4) on both routes with iam', () => {
    // Act
    const { template: iam } = template({ allowedTokenUrls: ALLOWLIST, callerAuthorization: 'iam' });

    // Assess
    iam.resourceCountIs('AWS::ApiGatewayV2::Route', 2);
    iam.resourcePropertiesCountIs('AWS::ApiGatewayV2::Route', { AuthorizationType: 'AWS_IAM' }, 2);
    iam.hasResourceProperties('AWS::ApiGatewayV2::Route', { RouteKey: 'POST /v1/oauth/token', AuthorizationType: 'AWS_IAM' });
    iam.hasResourceProperties('AWS::ApiGatewayV2::Route', { RouteKey: 'POST /oauth/token', AuthorizationType: 'AWS_IAM' });
  });

  it('names the caller in the access log with iam: its principal ARN and account, as API Gateway verified them', () => {
    // Act
    const { template: iam } = template({ allowedTokenUrls: ALLOWLIST, callerAuthorization: 'iam' });
    const { template: open } = template({ allowedTokenUrls: ALLOWLIST });

    // Assess
    const format = (stage: Template) =>
      JSON.parse(String(Object.values(stage.findResources('AWS::ApiGatewayV2::Stage'))[0]?.Properties.AccessLogSettings.Format)) as Record<
        string,
        string
      >;
    expect(format(iam)).toMatchObject({ callerArn: '$context.identity.userArn', callerAccountId: '$context.identity.accountId' });
    expect(Object.keys(format(open))).not.toContain('callerArn');
    iam.hasResourceProperties('AWS::Logs::QueryDefinition', {
      Name: 'CallerAuthorizationTest/failures-by-caller',
      QueryString: Match.stringLikeRegexp('by callerArn, sourceIp, userAgent, status'),
    });
  });

  it('outputs the route ARNs a caller needs execute-api:Invoke on, only with iam', () => {
    // Act
    const { template: iam } = template({ allowedTokenUrls: ALLOWLIST, callerAuthorization: 'iam' });
    const { template: open } = template({ allowedTokenUrls: ALLOWLIST });

    // Assess
    const rendered = JSON.stringify(iam.findOutputs('InvokeResources'));
    expect(rendered).toContain(':execute-api:');
    expect(rendered).toContain('/$default/POST/v1/oauth/token,');
    expect(rendered).toContain('/$default/POST/oauth/token"');
    expect(open.findOutputs('InvokeResources')).toEqual({});
  });

  it('acknowledges cdk-nag APIG4 (route authorization) only when the routes are open', () => {
    // Act
    const open = template({ allowedTokenUrls: ALLOWLIST }).stack;
    const iam = template({ allowedTokenUrls: ALLOWLIST, callerAuthorization: 'iam' }).stack;

    // Assess
    expect(acknowledgedRules(open)).toEqual([expect.stringMatching(/AwsSolutions-APIG4$/)]);
    expect(acknowledgedRules(iam)).toEqual([]);
  });

  it('passes the AwsSolutions checks with iam and nothing acknowledged', () => {
    // Prepare
    const { stack } = template({ allowedTokenUrls: ALLOWLIST, callerAuthorization: 'iam' });

    // Act
    const violations = new AwsSolutionsChecks().validateScope(stack).violations;

    // Assess
    expect(violations.map((violation) => violation.ruleName)).toEqual([]);
  });

  it('lets browsers send the SigV4 headers in CORS requests with iam', () => {
    // Act
    const { template: iam } = template({
      allowedTokenUrls: ALLOWLIST,
      callerAuthorization: 'iam',
      corsOrigins: ['https://app.example.com'],
    });

    // Assess
    iam.hasResourceProperties('AWS::ApiGatewayV2::Api', {
      CorsConfiguration: Match.objectLike({
        AllowOrigins: ['https://app.example.com'],
        AllowHeaders: ['content-type', 'authorization', 'x-amz-date', 'x-amz-security-token', 'x-amz-content-sha256'],
      }),
    });
  });

  it('refuses a value other than none or iam, naming the prop', () => {
    // Act
    const act = () => template({ allowedTokenUrls: ALLOWLIST, callerAuthorization: 'jwt' as 'iam' });

    // Assess
    expect(act).toThrow(/callerAuthorization must be one of none, iam, got jwt/);
  });

  it('is read from context, as `cdk synth -c callerAuthorization=iam -c allowedTokenUrls=https://login.example.com` gives it', () => {
    // Prepare
    const app = bareApp({ callerAuthorization: 'iam', allowedTokenUrls: 'https://login.example.com' });

    // Act
    const [stack] = buildApp(app);

    // Assess
    const synthesized = Template.fromStack(stack);
    synthesized.resourcePropertiesCountIs('AWS::ApiGatewayV2::Route', { AuthorizationType: 'AWS_IAM' }, 2);
    synthesized.hasResourceProperties('AWS::Lambda::Function', {
      Environment: { Variables: Match.objectLike({ TOKEN_URL_ALLOWLIST: 'https://login.example.com' }) },
    });
    expect(() => app.synth()).not.toThrow();
  });

  it('reads callerAuthorization and allowAnyPublicTokenUrl from context strings', () => {
    // Act
    const props = propsFromContext((key) => ({ callerAuthorization: ' IAM ', allowAnyPublicTokenUrl: 'true' })[key]);

    // Assess
    expect(props).toMatchObject({ callerAuthorization: 'iam', allowAnyPublicTokenUrl: true });
  });
});

describe('cleartext token URLs', () => {
  it.each([
    ['a public host', 'http://login.example.com'],
    ['a wildcard domain', 'http://*.example.com'],
    ['a public address', 'http://93.184.215.14:8080/token'],
  ])('are refused for %s: client secrets would cross networks unencrypted', (_case, entry) => {
    const act = () => template({ allowedTokenUrls: ['https://login.example.com', entry] });

    expect(act).toThrow(
      `allowedTokenUrls entry "${entry}" would send client secrets in cleartext over the network: use https, or say allowCleartextTokenUrls=true on purpose`,
    );
  });

  it.each(['http://localhost:8080', 'http://127.0.0.1:9000', 'http://10.0.0.5/token', 'http://[fd00::5]'])(
    'are accepted for a loopback or private address literal: %s',
    (entry) => {
      expect(() => template({ allowedTokenUrls: [entry] })).not.toThrow();
    },
  );

  it('are accepted with allowCleartextTokenUrls=true, said on purpose', () => {
    const { template: cleartext } = template({ allowedTokenUrls: ['http://login.example.com'], allowCleartextTokenUrls: true });

    cleartext.hasResourceProperties('AWS::Lambda::Function', {
      Environment: { Variables: Match.objectLike({ TOKEN_URL_ALLOWLIST: 'http://login.example.com' }) },
    });
  });

  it('refuses allowCleartextTokenUrls=true with no such entry to allow', () => {
    const act = () => template({ allowedTokenUrls: ALLOWLIST, allowCleartextTokenUrls: true });

    expect(act).toThrow('allowCleartextTokenUrls=true needs an http entry in allowedTokenUrls that is not a private address');
  });

  it('is read from context as `-c allowCleartextTokenUrls=true`', () => {
    expect(propsFromContext((key) => (key === 'allowCleartextTokenUrls' ? 'true' : undefined)).allowCleartextTokenUrls).toBe(true);
  });
});

describe('no open relay by accident', () => {
  it('stops with neither allowedTokenUrls nor allowAnyPublicTokenUrl, naming both ways forward', () => {
    // Act
    const act = () => new TokenExchangeStack(synthApp(), 'OpenRelay', {});

    // Assess
    expect(act).toThrow(OPEN_RELAY_REFUSAL);
    expect(OPEN_RELAY_REFUSAL).toMatch(/-c 'allowedTokenUrls=https:\/\/\S+'/);
    expect(OPEN_RELAY_REFUSAL).toMatch(/-c allowAnyPublicTokenUrl=true/);
  });

  it('stops `cdk synth` with no context with that message', () => {
    // Act
    const act = () => buildApp(synthApp());

    // Assess
    expect(act).toThrow(/allowedTokenUrls is empty.*allowedTokenUrls=.*allowAnyPublicTokenUrl=true/s);
  });

  it('stops on an empty allowlist too', () => {
    // Act
    const act = () => new TokenExchangeStack(synthApp(), 'EmptyList', { allowedTokenUrls: [] });

    // Assess
    expect(act).toThrow(OPEN_RELAY_REFUSAL);
  });

  it('deploys an empty TOKEN_URL_ALLOWLIST when allowAnyPublicTokenUrl=true says so', () => {
    // Act
    const [stack] = buildApp(bareApp({ allowAnyPublicTokenUrl: 'true' }));

    // Assess
    Template.fromStack(stack).hasResourceProperties('AWS::Lambda::Function', {
      Environment: { Variables: Match.objectLike({ TOKEN_URL_ALLOWLIST: '' }) },
    });
  });

  it('refuses allowAnyPublicTokenUrl=true beside an allowlist, which it would contradict', () => {
    // Act
    const act = () => new TokenExchangeStack(bareApp(), 'Both', { allowedTokenUrls: ALLOWLIST, allowAnyPublicTokenUrl: true });

    // Assess
    expect(act).toThrow(/allowAnyPublicTokenUrl=true contradicts allowedTokenUrls/);
  });
});
