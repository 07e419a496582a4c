import { Duration } from 'aws-cdk-lib';
import { Match, type Template } from 'aws-cdk-lib/assertions';
import { RetentionDays } from 'aws-cdk-lib/aws-logs';
import { BUNDLE_TARGET } from '../../infra/bundling';
import { FUNCTION_RUNTIME, type TokenExchangeStackProps } from '../../infra/token-exchange-stack';
import { synthesize } from './stack-fixture';

const CONFIGURED: TokenExchangeStackProps = {
  allowedTokenUrls: ['https://login.example.com', 'https://*.auth0.com'],
  upstreamTimeoutMs: 8000,
  tokenCache: 'memory',
  logLevel: 'WARN',
  metricsNamespace: 'Acme/TokenExchange',
  memorySize: 512,
  functionTimeout: Duration.seconds(12),
  throttleRateLimit: 20,
  throttleBurstLimit: 40,
  logRetention: RetentionDays.THREE_MONTHS,
  reservedConcurrency: 10,
  corsOrigins: ['https://app.example.com', 'http://localhost:5173'],
  sourceMapStackTraces: true,
};

type Resource = { Properties: Record<string, unknown> };

let defaults: Template;
let configured: Template;

beforeAll(() => {
  defaults = synthesize().template;
  configured = synthesize(CONFIGURED).template;
});

/** The single resource of a type, asserting there is exactly one. */
function only(template: Template, type: string): { id: string; resource: Resource } {
  const found = Object.entries(template.findResources(type));
  expect(found).toHaveLength(1);
  const [id, resource] = found[0] as [string, Resource];
  return { id, resource };
}

/** Renders an `Fn::Join` of literals and `Ref`s as `literal${LogicalId}literal`, to compare URLs. */
function joined(value: unknown): string {
  const [separator, parts] = (value as { 'Fn::Join': [string, unknown[]] })['Fn::Join'];
  return parts.map((part) => (typeof part === 'string' ? part : `\${${(part as { Ref: string }).Ref}}`)).join(separator);
}

describe('the function', () => {
  it('is one function on the fixed Node.js 24 runtime for arm64, exporting handler', () => {
    // Prepare / Act: synthesized in beforeAll

    // Assess
    defaults.resourceCountIs('AWS::Lambda::Function', 1);
    defaults.hasResourceProperties('AWS::Lambda::Function', { Runtime: 'nodejs24.x', Architectures: ['arm64'], Handler: 'index.handler' });
  });

  it('runs a bundle built for no newer a Node.js than its runtime', () => {
    const runtimeMajor = Number(/^nodejs(\d+)\.x$/.exec(FUNCTION_RUNTIME.name)?.[1]);
    const targetMajor = Number(/^node(\d+)$/.exec(BUNDLE_TARGET)?.[1]);

    expect(targetMajor).toBeGreaterThanOrEqual(22);
    expect(targetMajor).toBeLessThanOrEqual(runtimeMajor);
  });

  it('has 256 MiB and a 10 s timeout by default', () => {
    defaults.hasResourceProperties('AWS::Lambda::Function', { MemorySize: 256, Timeout: 10 });
  });

  it('takes memory and timeout from props', () => {
    configured.hasResourceProperties('AWS::Lambda::Function', { MemorySize: 512, Timeout: 12 });
  });

  it("sets exactly the contract's configuration and the metrics namespace, with their defaults, and no DEBUG", () => {
    const { resource } = only(defaults, 'AWS::Lambda::Function');

    expect(resource.Properties.Environment).toEqual({
      Variables: {
        TOKEN_URL_ALLOWLIST: '',
        UPSTREAM_TIMEOUT_MS: '5000',
        TOKEN_CACHE: 'off',
        LOG_LEVEL: 'INFO',
        POWERTOOLS_METRICS_NAMESPACE: 'TokenExchange',
      },
    });
  });

  it('sets the environment from props: allowlist comma-joined, cache on, source-mapped stack traces, and no DEBUG', () => {
    const { resource } = only(configured, 'AWS::Lambda::Function');

    expect(resource.Properties.Environment).toEqual({
      Variables: {
        TOKEN_URL_ALLOWLIST: 'https://login.example.com,https://*.auth0.com',
        UPSTREAM_TIMEOUT_MS: '8000',
        TOKEN_CACHE: 'memory',
        LOG_LEVEL: 'WARN',
        POWERTOOLS_METRICS_NAMESPACE: 'Acme/TokenExchange',
        NODE_OPTIONS: '--enable-source-maps',
      },
    });
  });

  it('logs to its own log group, kept for a month by default', () => {
    const logGroups = defaults.findResources('AWS::Logs::LogGroup', { Properties: { RetentionInDays: 30 } });
    const { resource } = only(defaults, 'AWS::Lambda::Function');

    const target = (resource.Properties.LoggingConfig as { LogGroup: { Ref: string } }).LogGroup.Ref;
    expect(Object.keys(logGroups)).toContain(target);
  });

  it('may write only to its own log group: no managed policy, two log actions on that group', () => {
    const { resource: fn } = only(defaults, 'AWS::Lambda::Function');
    const { id: roleId, resource: role } = only(defaults, 'AWS::IAM::Role');
    const logGroup = (fn.Properties.LoggingConfig as { LogGroup: { Ref: string } }).LogGroup.Ref;

    expect(fn.Properties.Role).toEqual({ 'Fn::GetAtt': [roleId, 'Arn'] });
    expect(role.Properties.ManagedPolicyArns).toBeUndefined();
    defaults.resourceCountIs('AWS::IAM::Policy', 0);
    expect(role.Properties.Policies).toEqual([
      {
        PolicyName: 'WriteOwnLogs',
        PolicyDocument: {
          Version: '2012-10-17',
          Statement: [
            { Effect: 'Allow', Action: ['logs:CreateLogStream', 'logs:PutLogEvents'], Resource: { 'Fn::GetAtt': [logGroup, 'Arn'] } },
          ],
        },
      },
    ]);
  });

  it('reserves no concurrency by default', () => {
    defaults.hasResourceProperties('AWS::Lambda::Function', { ReservedConcurrentExecutions: Match.absent() });
  });

  it('reserves the concurrency set in props', () => {
    configured.hasResourceProperties('AWS::Lambda::Function', { ReservedConcurrentExecutions: 10 });
  });
});

describe('the HTTP API', () => {
  it('routes POST /v1/oauth/token and POST /oauth/token, and nothing else, to one integration', () => {
    const { id: integrationId } = only(defaults, 'AWS::ApiGatewayV2::Integration');
    const routes = Object.values(defaults.findResources('AWS::ApiGatewayV2::Route')) as Resource[];

    expect(routes.map((route) => route.Properties.RouteKey).sort()).toEqual(['POST /oauth/token', 'POST /v1/oauth/token']);
    for (const route of routes) expect(joined(route.Properties.Target)).toBe(`integrations/\${${integrationId}}`);
  });

  it('invokes the function through a Lambda proxy integration with payload format 2.0', () => {
    const { id: functionId } = only(defaults, 'AWS::Lambda::Function');

    defaults.hasResourceProperties('AWS::ApiGatewayV2::Integration', {
      IntegrationType: 'AWS_PROXY',
      PayloadFormatVersion: '2.0',
      IntegrationUri: { 'Fn::GetAtt': [functionId, 'Arn'] },
    });
  });

  it('lets API Gateway invoke the function only for the two token routes', () => {
    const permissions = Object.values(defaults.findResources('AWS::Lambda::Permission')) as Resource[];

    const scopes = permissions.map((permission) => joined(permission.Properties.SourceArn).replace(/^.*\}/, '')).sort();
    expect(scopes).toEqual(['/*/*/oauth/token', '/*/*/v1/oauth/token']);
    for (const permission of permissions) expect(permission.Properties.Principal).toBe('apigateway.amazonaws.com');
  });

  it('serves one auto-deployed $default stage', () => {
    defaults.resourceCountIs('AWS::ApiGatewayV2::Stage', 1);
    defaults.hasResourceProperties('AWS::ApiGatewayV2::Stage', { StageName: '$default', AutoDeploy: true });
  });

  it('throttles the default route at 50 requests per second with a burst of 100 by default', () => {
    defaults.hasResourceProperties('AWS::ApiGatewayV2::Stage', {
      DefaultRouteSettings: Match.objectLike({ ThrottlingRateLimit: 50, ThrottlingBurstLimit: 100 }),
    });
  });

  it('throttles the default route as set in props', () => {
    configured.hasResourceProperties('AWS::ApiGatewayV2::Stage', {
      DefaultRouteSettings: Match.objectLike({ ThrottlingRateLimit: 20, ThrottlingBurstLimit: 40 }),
    });
  });

  it('writes JSON access logs with the request id, route and status to a log group of its own', () => {
    const { resource: stage } = only(defaults, 'AWS::ApiGatewayV2::Stage');
    const { resource: fn } = only(defaults, 'AWS::Lambda::Function');
    const settings = stage.Properties.AccessLogSettings as { DestinationArn: { 'Fn::GetAtt': [string, string] }; Format: string };
    const [accessLogGroup] = settings.DestinationArn['Fn::GetAtt'];

    expect(JSON.parse(settings.Format)).toMatchObject({
      requestId: '$context.requestId',
      routeKey: '$context.routeKey',
      status: '$context.status',
    });
    defaults.hasResource('AWS::Logs::LogGroup', Match.objectLike({ Properties: { RetentionInDays: 30 } }));
    expect(Object.keys(defaults.findResources('AWS::Logs::LogGroup'))).toContain(accessLogGroup);
    expect(accessLogGroup).not.toBe((fn.Properties.LoggingConfig as { LogGroup: { Ref: string } }).LogGroup.Ref);
  });

  it('keeps both log groups for the retention set in props', () => {
    configured.resourceCountIs('AWS::Logs::LogGroup', 2);
    expect(Object.keys(configured.findResources('AWS::Logs::LogGroup', { Properties: { RetentionInDays: 90 } }))).toHaveLength(2);
  });

  it('has no CORS configuration when no origins are set', () => {
    defaults.hasResourceProperties('AWS::ApiGatewayV2::Api', { CorsConfiguration: Match.absent() });
  });

  it('answers CORS preflights for POST from the origins set in props', () => {
    configured.hasResourceProperties('AWS::ApiGatewayV2::Api', {
      CorsConfiguration: Match.objectLike({
        AllowOrigins: ['https://app.example.com', 'http://localhost:5173'],
        AllowMethods: ['POST'],
        AllowHeaders: ['content-type'],
      }),
    });
  });
});

describe('the outputs', () => {
  it('give the API URL and both token endpoint URLs', () => {
    const { id: apiId } = only(defaults, 'AWS::ApiGatewayV2::Api');
    const base = `https://\${${apiId}}.execute-api.\${AWS::Region}.\${AWS::URLSuffix}/`;

    const outputs = defaults.toJSON().Outputs as Record<string, { Value: unknown }>;

    expect(Object.fromEntries(Object.entries(outputs).map(([name, output]) => [name, joined(output.Value)]))).toEqual({
      ApiUrl: base,
      TokenEndpointV1: `${base}v1/oauth/token`,
      TokenEndpoint: `${base}oauth/token`,
    });
  });
});
