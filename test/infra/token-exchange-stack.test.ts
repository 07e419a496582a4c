import { Duration } from 'aws-cdk-lib';
import { Capture, Match, type Template } from 'aws-cdk-lib/assertions';
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

let defaults: Template;
let configured: Template;

beforeAll(() => {
  defaults = synthesize().template;
  configured = synthesize(CONFIGURED).template;
});

/** The logical id a `Ref` or `Fn::GetAtt` of the only resource of a type names. */
function idOfOnly(template: Template, type: string): string {
  template.resourceCountIs(type, 1);
  return Object.keys(template.findResources(type))[0] as string;
}

/** The logical id of the function's log group, captured from its LoggingConfig. */
function functionLogGroup(template: Template): string {
  const logGroup = new Capture();
  template.hasResourceProperties('AWS::Lambda::Function', { LoggingConfig: { LogGroup: { Ref: logGroup } } });
  return logGroup.asString();
}

/** `https://${Api}.execute-api.${AWS::Region}.${AWS::URLSuffix}/` followed by `path`, as CloudFormation joins it. */
function apiUrl(apiId: string, path: string): unknown {
  return {
    'Fn::Join': ['', ['https://', { Ref: apiId }, '.execute-api.', { Ref: 'AWS::Region' }, '.', { Ref: 'AWS::URLSuffix' }, `/${path}`]],
  };
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
    defaults.hasResourceProperties('AWS::Lambda::Function', {
      Environment: {
        Variables: Match.objectEquals({
          TOKEN_URL_ALLOWLIST: '',
          UPSTREAM_TIMEOUT_MS: '5000',
          TOKEN_CACHE: 'off',
          LOG_LEVEL: 'INFO',
          POWERTOOLS_METRICS_NAMESPACE: 'TokenExchange',
        }),
      },
    });
  });

  it('sets the environment from props: allowlist comma-joined, cache on, source-mapped stack traces, and no DEBUG', () => {
    configured.hasResourceProperties('AWS::Lambda::Function', {
      Environment: {
        Variables: Match.objectEquals({
          TOKEN_URL_ALLOWLIST: 'https://login.example.com,https://*.auth0.com',
          UPSTREAM_TIMEOUT_MS: '8000',
          TOKEN_CACHE: 'memory',
          LOG_LEVEL: 'WARN',
          POWERTOOLS_METRICS_NAMESPACE: 'Acme/TokenExchange',
          NODE_OPTIONS: '--enable-source-maps',
        }),
      },
    });
  });

  it('logs to its own log group, kept for a month by default', () => {
    const logGroup = functionLogGroup(defaults);

    expect(defaults.findResources('AWS::Logs::LogGroup', { Properties: { RetentionInDays: 30 } })).toHaveProperty([logGroup]);
  });

  it('runs as its own role, with no managed policy and no separate policy resource', () => {
    const role = idOfOnly(defaults, 'AWS::IAM::Role');

    defaults.hasResourceProperties('AWS::Lambda::Function', { Role: { 'Fn::GetAtt': [role, 'Arn'] } });
    defaults.hasResourceProperties('AWS::IAM::Role', { ManagedPolicyArns: Match.absent() });
    defaults.resourceCountIs('AWS::IAM::Policy', 0);
  });

  it('may only create log streams and put log events in its own log group', () => {
    const logGroup = functionLogGroup(defaults);

    defaults.hasResourceProperties('AWS::IAM::Role', {
      Policies: [
        {
          PolicyName: 'WriteOwnLogs',
          PolicyDocument: {
            Version: '2012-10-17',
            Statement: [
              { Effect: 'Allow', Action: ['logs:CreateLogStream', 'logs:PutLogEvents'], Resource: { 'Fn::GetAtt': [logGroup, 'Arn'] } },
            ],
          },
        },
      ],
    });
  });

  it('reserves no concurrency by default', () => {
    defaults.hasResourceProperties('AWS::Lambda::Function', { ReservedConcurrentExecutions: Match.absent() });
  });

  it('reserves the concurrency set in props', () => {
    configured.hasResourceProperties('AWS::Lambda::Function', { ReservedConcurrentExecutions: 10 });
  });
});

describe('the HTTP API', () => {
  it('has exactly two routes', () => {
    defaults.resourceCountIs('AWS::ApiGatewayV2::Route', 2);
  });

  it.each(['POST /v1/oauth/token', 'POST /oauth/token'])('routes %s to the one integration', (routeKey) => {
    const integration = idOfOnly(defaults, 'AWS::ApiGatewayV2::Integration');

    defaults.hasResourceProperties('AWS::ApiGatewayV2::Route', {
      RouteKey: routeKey,
      Target: { 'Fn::Join': ['', ['integrations/', { Ref: integration }]] },
    });
  });

  it('invokes the function through a Lambda proxy integration with payload format 2.0', () => {
    const fn = idOfOnly(defaults, 'AWS::Lambda::Function');

    defaults.hasResourceProperties('AWS::ApiGatewayV2::Integration', {
      IntegrationType: 'AWS_PROXY',
      PayloadFormatVersion: '2.0',
      IntegrationUri: { 'Fn::GetAtt': [fn, 'Arn'] },
    });
  });

  it('lets API Gateway invoke the function through exactly two permissions', () => {
    defaults.resourceCountIs('AWS::Lambda::Permission', 2);
  });

  it.each(['/*/*/v1/oauth/token', '/*/*/oauth/token'])('lets API Gateway invoke the function for %s only', (scope) => {
    const api = idOfOnly(defaults, 'AWS::ApiGatewayV2::Api');

    defaults.hasResourceProperties('AWS::Lambda::Permission', {
      Principal: 'apigateway.amazonaws.com',
      SourceArn: { 'Fn::Join': ['', Match.arrayWith([{ Ref: api }, scope])] },
    });
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

  it('writes JSON access logs with the request id, route and status', () => {
    defaults.hasResourceProperties('AWS::ApiGatewayV2::Stage', {
      AccessLogSettings: {
        Format: Match.serializedJson(
          Match.objectLike({ requestId: '$context.requestId', routeKey: '$context.routeKey', status: '$context.status' }),
        ),
      },
    });
  });

  it('writes its access logs to a log group of its own, kept for a month by default', () => {
    const accessLogs = new Capture();

    defaults.hasResourceProperties('AWS::ApiGatewayV2::Stage', {
      AccessLogSettings: { DestinationArn: { 'Fn::GetAtt': [accessLogs, 'Arn'] } },
    });

    expect(accessLogs.asString()).not.toBe(functionLogGroup(defaults));
    expect(defaults.findResources('AWS::Logs::LogGroup', { Properties: { RetentionInDays: 30 } })).toHaveProperty([accessLogs.asString()]);
  });

  it('keeps both log groups for the retention set in props', () => {
    configured.resourceCountIs('AWS::Logs::LogGroup', 2);
    configured.allResourcesProperties('AWS::Logs::LogGroup', { RetentionInDays: 90 });
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
  it.each([
    ['ApiUrl', ''],
    ['TokenEndpointV1', 'v1/oauth/token'],
    ['TokenEndpoint', 'oauth/token'],
  ])('give %s as the API URL followed by %p', (name, path) => {
    const api = idOfOnly(defaults, 'AWS::ApiGatewayV2::Api');

    defaults.hasOutput(name, { Value: apiUrl(api, path) });
  });

  it("are exactly those three and the dashboard's URL", () => {
    expect(Object.keys(defaults.findOutputs('*')).sort()).toEqual(['ApiUrl', 'DashboardUrl', 'TokenEndpoint', 'TokenEndpointV1']);
  });
});
