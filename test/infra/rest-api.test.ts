import { Duration, Validations } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { buildApp } from '../../infra/app';
import type { StoredCredentialProps } from '../../infra/stored-credentials';
import type { TokenExchangeStackProps } from '../../infra/token-exchange-stack';
import { newApp, synthesize } from './stack-fixture';

// api=rest: the same routes through a REST API (Lambda proxy, payload 1.0), regional or private,
// with a resource policy admitting other accounts or an organization, behind AWS WAF if asked.

const ACCOUNT = '123456789012';
const OTHER_ACCOUNT = '111122223333';
const ORG = 'o-a1b2c3d4e5';
const VPC_ENDPOINT = 'vpce-0123456789abcdef0';
const WEB_ACL = `arn:aws:wafv2:eu-west-1:${ACCOUNT}:regional/webacl/token-exchange/a1b2c3d4-5678-90ab-cdef-0123456789ab`;
const REST: TokenExchangeStackProps = { api: 'rest' };
const IAM_REST: TokenExchangeStackProps = { api: 'rest', callerAuthorization: 'iam' };
const PRIVATE: TokenExchangeStackProps = { api: 'rest', endpoint: 'private', vpcEndpointIds: [VPC_ENDPOINT] };
const KEYLESS: StoredCredentialProps = {
  name: 'orders-api',
  clientId: 'orders',
  tokenUrl: 'https://example.okta.com/oauth2/default/v1/token',
  method: 'private_key_jwt',
  key: 'kms',
  callers: [`arn:aws:iam::${ACCOUNT}:role/orders-service`],
};

type Statement = { Sid: string; Effect: string; Principal: unknown; Action: string; Resource: unknown; Condition?: unknown };

let open: ReturnType<typeof synthesize>;

beforeAll(() => {
  open = synthesize(REST);
});

function methods(template: Template): string[] {
  const resources = template.toJSON().Resources as Record<string, { Type: string; Properties: Record<string, unknown> }>;
  const pathOf = (ref: unknown): string => {
    const id = (ref as { Ref?: string }).Ref;
    const resource = id === undefined ? undefined : resources[id];
    return resource?.Type === 'AWS::ApiGateway::Resource'
      ? `${pathOf(resource.Properties.ParentId)}/${String(resource.Properties.PathPart)}`
      : '';
  };
  return Object.values(resources)
    .filter((resource) => resource.Type === 'AWS::ApiGateway::Method')
    .map(({ Properties }) => `${String(Properties.HttpMethod)} ${pathOf(Properties.ResourceId)} ${String(Properties.AuthorizationType)}`)
    .sort();
}

function policy(template: Template): Statement[] | undefined {
  const [api] = Object.values(template.findResources('AWS::ApiGateway::RestApi')) as {
    Properties: { Policy?: { Statement: Statement[] } };
  }[];
  return api?.Properties.Policy?.Statement;
}

function accessLogFormat(template: Template): Record<string, string> {
  const [stage] = Object.values(template.findResources('AWS::ApiGateway::Stage')) as {
    Properties: { AccessLogSetting: { Format: string } };
  }[];
  return JSON.parse(stage?.Properties.AccessLogSetting.Format ?? '{}') as Record<string, string>;
}

const TOKEN_ROUTES = ['execute-api:/api/POST/oauth/token', 'execute-api:/api/POST/v1/oauth/token'];

describe('the REST API (api=rest)', () => {
  it('serves exactly the two token routes, open to any caller with callerAuthorization none, and no HTTP API', () => {
    expect(methods(open.template)).toEqual(['POST /oauth/token NONE', 'POST /v1/oauth/token NONE']);
    open.template.resourceCountIs('AWS::ApiGatewayV2::Api', 0);
  });

  it('hands each request to the function through a Lambda proxy integration (payload format 1.0)', () => {
    open.template.allResourcesProperties('AWS::ApiGateway::Method', {
      Integration: Match.objectLike({ Type: 'AWS_PROXY', IntegrationHttpMethod: 'POST' }),
    });
  });

  it('lets API Gateway invoke the function for those two methods of its stage only, with no test-invoke permission', () => {
    open.template.resourceCountIs('AWS::Lambda::Permission', 2);
    for (const path of ['/POST/v1/oauth/token', '/POST/oauth/token']) {
      open.template.hasResourceProperties('AWS::Lambda::Permission', {
        Principal: 'apigateway.amazonaws.com',
        SourceArn: { 'Fn::Join': ['', Match.arrayWith([{ Ref: Match.stringLikeRegexp('^RestApiDeploymentStageapi') }, path])] },
      });
    }
  });

  it('puts IAM authorization (SigV4) on both token routes with iam, and serves the JWKS route without it when a key signs', () => {
    const { template } = synthesize({ ...IAM_REST, storedCredentials: [KEYLESS] });

    expect(methods(template)).toEqual(['GET /.well-known/jwks.json NONE', 'POST /oauth/token AWS_IAM', 'POST /v1/oauth/token AWS_IAM']);
  });

  it('is a regional endpoint by default, with no resource policy when it admits no other account', () => {
    open.template.hasResourceProperties('AWS::ApiGateway::RestApi', {
      EndpointConfiguration: { Types: ['REGIONAL'] },
      Policy: Match.absent(),
    });
  });

  it('throttles the stage as set, and writes JSON access logs to a log group of its own, named as the HTTP API names them', () => {
    const { template } = synthesize({ ...IAM_REST, throttleRateLimit: 20, throttleBurstLimit: 40 });

    template.hasResourceProperties('AWS::ApiGateway::Stage', {
      StageName: 'api',
      MethodSettings: [
        Match.objectLike({
          HttpMethod: '*',
          ResourcePath: '/*',
          ThrottlingRateLimit: 20,
          ThrottlingBurstLimit: 40,
          DataTraceEnabled: false,
        }),
      ],
      AccessLogSetting: { DestinationArn: Match.anyValue(), Format: Match.anyValue() },
    });
    expect(accessLogFormat(template)).toMatchObject({
      routeKey: '$context.httpMethod $context.resourcePath',
      status: '$context.status',
      integrationError: '$context.integration.error',
      callerArn: '$context.identity.userArn',
      callerAccountId: '$context.identity.accountId',
    });
  });

  it('traces the stage too with tracing=active', () => {
    synthesize({ ...REST, tracing: 'active' }).template.hasResourceProperties('AWS::ApiGateway::Stage', { TracingEnabled: true });
    open.template.hasResourceProperties('AWS::ApiGateway::Stage', { TracingEnabled: false });
  });

  it('outputs the stage URL and, with iam, the two method ARNs a caller needs execute-api:Invoke on', () => {
    const { template } = synthesize(IAM_REST);

    expect(JSON.stringify(template.findOutputs('ApiUrl'))).toContain('.execute-api.');
    expect(JSON.stringify(template.findOutputs('ApiUrl'))).toMatch(/"\/",\{"Ref":"RestApiDeploymentStageapi[0-9A-F]+"\},"\/"\]/);
    const invoke = JSON.stringify(template.findOutputs('InvokeResources'));
    expect(invoke).toContain('/api/POST/v1/oauth/token,');
    expect(invoke).toContain('/api/POST/oauth/token"');
    expect(Object.keys(template.findOutputs('*')).sort()).toEqual([
      'ApiUrl',
      'DashboardUrl',
      'InvokeResources',
      'TokenEndpoint',
      'TokenEndpointV1',
    ]);
  });

  it("alarms on the stage's own metrics: 5XXError and Latency by API name and stage", () => {
    const alarms = Object.values(open.template.findResources('AWS::CloudWatch::Alarm')) as { Properties: { Metrics?: unknown[] } }[];
    const metrics = JSON.stringify(alarms.map((alarm) => alarm.Properties.Metrics));

    expect(metrics).toContain('"MetricName":"5XXError"');
    expect(metrics).toContain('"MetricName":"Latency"');
    expect(metrics).toContain('{"Name":"Stage","Value":{"Ref":"RestApiDeploymentStageapi');
  });

  it('maps a custom domain to its stage', () => {
    const { template } = synthesize({
      ...REST,
      domainName: 'auth.example.com',
      certificateArn: `arn:aws:acm:eu-west-1:${ACCOUNT}:certificate/0b1c2d3e-aaaa-bbbb-cccc-1234567890ab`,
    });

    template.hasResourceProperties('AWS::ApiGatewayV2::ApiMapping', { ApiId: { Ref: Match.stringLikeRegexp('^RestApi') }, Stage: 'api' });
  });
});

describe("the REST API's resource policy", () => {
  it('admits the principals of callerAccounts to the token routes only, by their accounts (each still needs its own IAM policy)', () => {
    const statements = policy(synthesize({ ...IAM_REST, callerAccounts: [OTHER_ACCOUNT, OTHER_ACCOUNT] }).template);

    expect(statements).toEqual([
      {
        Sid: 'AdmitCallerAccounts',
        Effect: 'Allow',
        Principal: { AWS: { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, `:iam::${OTHER_ACCOUNT}:root`]] } },
        Action: 'execute-api:Invoke',
        Resource: TOKEN_ROUTES,
      },
    ]);
  });

  it('admits the principals of the organization callerOrgId, by aws:PrincipalOrgID', () => {
    const statements = policy(synthesize({ ...IAM_REST, callerOrgId: ORG }).template);

    expect(statements).toEqual([
      {
        Sid: 'AdmitCallerOrganization',
        Effect: 'Allow',
        Principal: '*',
        Action: 'execute-api:Invoke',
        Resource: TOKEN_ROUTES,
        Condition: { StringEquals: { 'aws:PrincipalOrgID': ORG } },
      },
    ]);
  });

  it('keeps the JWKS route open to anyone beside admitted callers: IdPs fetch it unsigned', () => {
    const statements = policy(synthesize({ ...IAM_REST, callerOrgId: ORG, storedCredentials: [KEYLESS] }).template);

    expect(statements?.map((statement) => statement.Sid)).toEqual(['AdmitCallerOrganization', 'PublishJwks']);
    expect(statements?.[1]).toMatchObject({ Principal: '*', Resource: 'execute-api:/api/GET/.well-known/jwks.json' });
  });
});

describe('a private REST API (endpoint=private)', () => {
  let iam: Template;

  beforeAll(() => {
    iam = synthesize({ ...PRIVATE, callerAuthorization: 'iam' }).template;
  });

  it('is a PRIVATE endpoint associated with the given execute-api VPC endpoints', () => {
    iam.hasResourceProperties('AWS::ApiGateway::RestApi', {
      EndpointConfiguration: { Types: ['PRIVATE'], VpcEndpointIds: [VPC_ENDPOINT] },
    });
  });

  it('refuses every request that does not come through those VPC endpoints, whoever signs it', () => {
    expect(policy(iam)?.at(-1)).toEqual({
      Sid: 'OnlyThroughVpcEndpoints',
      Effect: 'Deny',
      Principal: '*',
      Action: 'execute-api:Invoke',
      Resource: 'execute-api:/*',
      Condition: { StringNotEquals: { 'aws:SourceVpce': [VPC_ENDPOINT] } },
    });
  });

  it("admits the account's own principals with iam, and no other account's", () => {
    expect(policy(iam)?.[0]).toMatchObject({
      Sid: 'AdmitOwnAccount',
      Effect: 'Allow',
      Principal: { AWS: { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':iam::', { Ref: 'AWS::AccountId' }, ':root']] } },
      Resource: TOKEN_ROUTES,
    });
  });

  it('admits any caller inside with callerAuthorization none', () => {
    expect(policy(synthesize(PRIVATE).template)?.[0]).toMatchObject({
      Sid: 'AdmitAnyCallerInside',
      Principal: '*',
      Resource: TOKEN_ROUTES,
    });
  });

  it('names the VPC endpoint of each request in the access log', () => {
    expect(accessLogFormat(iam)).toMatchObject({ vpceId: '$context.identity.vpceId' });
  });

  it('warns that its JWKS URL answers only inside, when a key signs', () => {
    const { stack } = synthesize({ ...PRIVATE, callerAuthorization: 'iam', storedCredentials: [KEYLESS] });

    const warnings = stack.node.metadata.filter((entry) => entry.type === 'aws:cdk:warning').map((entry) => String(entry.data));
    expect(warnings).toEqual([expect.stringContaining('endpoint=private: the JWKS URL answers only through the VPC endpoints')]);
  });
});

describe('AWS WAF (webAclArn)', () => {
  it("associates the web ACL with the REST API's stage", () => {
    const { template } = synthesize({ ...REST, webAclArn: WEB_ACL });

    template.hasResourceProperties('AWS::WAFv2::WebACLAssociation', {
      WebACLArn: WEB_ACL,
      ResourceArn: { 'Fn::Join': ['', Match.arrayWith([':apigateway:', '::/restapis/', '/stages/'])] },
    });
    expect(accessLogFormat(template)).toMatchObject({ wafStatus: '$context.waf.status' });
  });

  it('associates none without one', () => {
    open.template.resourceCountIs('AWS::WAFv2::WebACLAssociation', 0);
  });
});

describe('the REST API and cdk-nag', () => {
  it.each<[string, TokenExchangeStackProps]>([
    ['open and regional', REST],
    [
      'with IAM callers of other accounts, WAF and a JWKS route',
      { ...IAM_REST, callerAccounts: [OTHER_ACCOUNT], callerOrgId: ORG, webAclArn: WEB_ACL, storedCredentials: [KEYLESS] },
    ],
    ['private', { ...PRIVATE, callerAuthorization: 'iam' }],
  ])('passes the AwsSolutions checks %s', (_case, props) => {
    expect(new AwsSolutionsChecks().validateScope(synthesize(props).stack).violations).toEqual([]);
  });

  it('acknowledges, each with its reason, only what is by design: request validation, execution logs, no WAF when none is given, open routes', () => {
    const rules = open.stack.node
      .findAll()
      .flatMap((construct) => construct.node.metadata)
      .filter((entry) => entry.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)
      .flatMap((entry) => Object.keys(entry.data as object).map((rule) => rule.replace(/^Annotation::/, '')));

    expect([...new Set(rules)].sort()).toEqual([
      'AwsSolutions-APIG2',
      'AwsSolutions-APIG3',
      'AwsSolutions-APIG4',
      'AwsSolutions-APIG6',
      'AwsSolutions-COG4',
    ]);
  });
});

describe('REST settings validation', () => {
  it.each<[string, TokenExchangeStackProps, RegExp]>([
    ['an api of another kind', { api: 'graphql' as 'rest' }, /api must be one of http, rest, got graphql/],
    ['endpoint with the HTTP API', { endpoint: 'private' }, /endpoint needs api=rest: an HTTP API is always on the internet/],
    [
      'vpcEndpointIds with the HTTP API',
      { vpcEndpointIds: [VPC_ENDPOINT] },
      /vpcEndpointIds needs api=rest: an HTTP API cannot be private/,
    ],
    [
      'callerAccounts with the HTTP API',
      { callerAuthorization: 'iam', callerAccounts: [OTHER_ACCOUNT] },
      /callerAccounts needs api=rest: an HTTP API has no resource policy/,
    ],
    ['callerOrgId with the HTTP API', { callerAuthorization: 'iam', callerOrgId: ORG }, /callerOrgId needs api=rest/],
    ['webAclArn with the HTTP API', { webAclArn: WEB_ACL }, /webAclArn needs api=rest: AWS WAF protects REST APIs, not HTTP APIs/],
    ['an endpoint of another kind', { api: 'rest', endpoint: 'edge' as 'private' }, /endpoint must be one of regional, private, got edge/],
    [
      'a private endpoint without VPC endpoints',
      { api: 'rest', endpoint: 'private' },
      /endpoint=private needs vpcEndpointIds: the execute-api interface VPC endpoints/,
    ],
    ['VPC endpoints of a regional endpoint', { api: 'rest', vpcEndpointIds: [VPC_ENDPOINT] }, /vpcEndpointIds needs endpoint=private/],
    [
      'a VPC endpoint id of another form',
      { ...PRIVATE, vpcEndpointIds: ['vpc-0123'] },
      /vpcEndpointIds entries must be VPC endpoint ids like vpce-0123456789abcdef0, got "vpc-0123"/,
    ],
    [
      'callerAccounts without IAM callers',
      { api: 'rest', callerAccounts: [OTHER_ACCOUNT] },
      /callerAccounts needs callerAuthorization=iam: the resource policy admits AWS principals/,
    ],
    ['callerOrgId without IAM callers', { api: 'rest', callerOrgId: ORG }, /callerOrgId needs callerAuthorization=iam/],
    ['an empty callerAccounts', { ...IAM_REST, callerAccounts: [] }, /callerAccounts must list at least one account when set/],
    [
      'an account id of another form',
      { ...IAM_REST, callerAccounts: ['1234'] },
      /callerAccounts entries must be 12-digit account ids, got "1234"/,
    ],
    [
      'an organization id of another form',
      { ...IAM_REST, callerOrgId: 'r-abcd' },
      /callerOrgId must be an AWS Organizations id like o-a1b2c3d4e5, got "r-abcd"/,
    ],
    [
      'a web ACL ARN of another kind',
      { ...REST, webAclArn: 'arn:aws:wafv2:eu-west-1:123456789012:global/webacl/x/a1b2c3d4-5678-90ab-cdef-0123456789ab' },
      /webAclArn must be a regional AWS WAF web ACL ARN/,
    ],
    [
      'CORS, whose answer headers a REST API leaves to the function',
      { ...REST, corsOrigins: ['https://app.example.com'] },
      /corsOrigins needs api=http: a REST API leaves the CORS headers/,
    ],
    [
      'a custom domain on a private API',
      {
        ...PRIVATE,
        domainName: 'auth.example.com',
        certificateArn: `arn:aws:acm:eu-west-1:${ACCOUNT}:certificate/0b1c2d3e-aaaa-bbbb-cccc-1234567890ab`,
      },
      /domainName needs endpoint=regional: a private API's own name is a private custom domain/,
    ],
  ])('refuses %s, naming the setting', (_case, props, message) => {
    expect(() => synthesize(props)).toThrow(message);
  });

  it("refuses a function timeout at the REST API's 29 s integration timeout", () => {
    expect(() => synthesize({ ...REST, functionTimeout: Duration.seconds(29) })).toThrow(
      /functionTimeout must be under the REST API's 29 s integration timeout, got 29 s/,
    );
  });

  it.each([
    [
      "of another region than the pinned stack's",
      `arn:aws:wafv2:us-east-1:${ACCOUNT}:regional/webacl/x/a1b2c3d4-5678-90ab-cdef-0123456789ab`,
      /webAclArn is in us-east-1, but the stack deploys to eu-west-1/,
    ],
    [
      "of another partition than the pinned stack's",
      `arn:aws-cn:wafv2:eu-west-1:${ACCOUNT}:regional/webacl/x/a1b2c3d4-5678-90ab-cdef-0123456789ab`,
      /webAclArn is in partition aws-cn, but the stack deploys to aws/,
    ],
  ])('refuses a web ACL %s', (_case, webAclArn, message) => {
    expect(() => synthesize({ ...REST, webAclArn, env: { account: ACCOUNT, region: 'eu-west-1' } })).toThrow(message);
  });

  it('is read from context, as `-c api=rest -c endpoint=private -c vpcEndpointIds=... -c callerAccounts=... -c callerOrgId=... -c webAclArn=...` give them', () => {
    const context = {
      allowAnyPublicTokenUrl: 'true',
      api: 'REST',
      endpoint: 'private',
      vpcEndpointIds: VPC_ENDPOINT,
      callerAuthorization: 'iam',
      callerAccounts: `${OTHER_ACCOUNT}, 444455556666`,
      callerOrgId: ORG,
      webAclArn: WEB_ACL,
    };

    const [stack] = buildApp(newApp({ bundle: false, context }));

    const statements = JSON.stringify(policy(Template.fromStack(stack)));
    expect(statements).toContain(`:iam::${OTHER_ACCOUNT}:root`);
    expect(statements).toContain(':iam::444455556666:root');
    expect(statements).toContain(ORG);
    expect(statements).toContain(VPC_ENDPOINT);
    expect(stack.api.kind).toBe('rest');
  });
});
