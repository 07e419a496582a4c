import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { TokenExchangeStack, type TokenExchangeStackProps } from '../../infra/token-exchange-stack';
import { projectContext, synthesize } from './stack-fixture';

// A second region (or a second stack) in the same account must be able to deploy beside the first,
// and destroying one must never take anything of the other's.

const ACCOUNT = '123456789012';

/** Every resource of the stack, as many as it can create. The certificate is in the stack's region, as it must be. */
const everything = (region: string): TokenExchangeStackProps => ({
  env: { account: ACCOUNT, region },
  allowedTokenUrls: ['https://login.example.com'],
  tokenCache: 'shared',
  tokenCacheKmsKeyArn: `arn:aws:kms:${region}:${ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab`,
  callerAuthorization: 'iam',
  alarmEmail: 'ops@example.com',
  vpcId: 'vpc-0123456789abcdef0',
  vpcSubnetIds: ['subnet-0123456789abcdef0'],
  domainName: 'auth.example.com',
  certificateArn: `arn:aws:acm:${region}:${ACCOUNT}:certificate/0b1c2d3e-aaaa-bbbb-cccc-1234567890ab`,
  hostedZoneId: 'Z0123456789ABCDEFGHIJ',
  tracing: 'active',
  tags: { team: 'platform' },
});

type Scope = 'account' | 'region';

/**
 * The properties that give a resource its name, by type, and where that name must be unique: in the
 * whole account, or in one region of it. A name left out is made by CloudFormation from the stack's
 * name and a random suffix, so it cannot collide.
 */
const NAMING_PROPERTIES: Record<string, { scope: Scope; names: (properties: Record<string, unknown>) => unknown[] }> = {
  'AWS::CloudWatch::Dashboard': { scope: 'account', names: (p) => [p.DashboardName] },
  'AWS::IAM::Role': { scope: 'account', names: (p) => [p.RoleName] },
  // A record is one per zone, name, type and set identifier; the zone is the account's, not a region's.
  'AWS::Route53::RecordSet': { scope: 'account', names: (p) => [JSON.stringify([p.HostedZoneId, p.Name, p.Type, p.SetIdentifier])] },
  'AWS::CloudWatch::Alarm': { scope: 'region', names: (p) => [p.AlarmName] },
  'AWS::DynamoDB::Table': { scope: 'region', names: (p) => [p.TableName] },
  'AWS::Lambda::Function': { scope: 'region', names: (p) => [p.FunctionName] },
  'AWS::Logs::LogGroup': { scope: 'region', names: (p) => [p.LogGroupName] },
  'AWS::SecretsManager::Secret': { scope: 'region', names: (p) => [p.Name] },
  'AWS::SNS::Topic': { scope: 'region', names: (p) => [p.TopicName] },
  'AWS::KMS::Alias': { scope: 'region', names: (p) => [p.AliasName] },
  'AWS::EC2::SecurityGroup': { scope: 'region', names: (p) => [p.GroupName] },
  'AWS::ApiGatewayV2::DomainName': { scope: 'region', names: (p) => [p.DomainName] },
};

/** Types whose names are labels within something else, or not unique anywhere: none can collide. */
const UNNAMED_TYPES = new Set([
  'AWS::ApiGatewayV2::Api', // Name is a label; APIs are told apart by id
  'AWS::ApiGatewayV2::Stage', // within its API
  'AWS::ApiGatewayV2::Route',
  'AWS::ApiGatewayV2::Integration',
  'AWS::ApiGatewayV2::ApiMapping',
  'AWS::IAM::Policy', // PolicyName is within its role
  'AWS::Lambda::Permission',
  'AWS::Logs::QueryDefinition', // Name is a label; definitions are told apart by id
  'AWS::SNS::Subscription',
  'AWS::SNS::TopicPolicy',
  'AWS::KMS::Key',
  'AWS::KMS::ReplicaKey',
  'AWS::CDK::Metadata',
  'AWS::ApiGateway::RestApi', // Name is a label, as the HTTP API's
  'AWS::ApiGateway::Deployment',
  'AWS::ApiGateway::Stage', // within its API
  'AWS::ApiGateway::Resource',
  'AWS::ApiGateway::Method',
  'AWS::WAFv2::WebACLAssociation',
  'AWS::IAM::ManagedPolicy', // ManagedPolicyName left out: CloudFormation makes one
]);

const templateOf = (id: string, props: TokenExchangeStackProps) =>
  Template.fromStack(new TokenExchangeStack(new App({ context: { ...projectContext(), 'aws:cdk:bundling-stacks': [] } }), id, props));

const resources = (template: Template) =>
  Object.values(template.toJSON().Resources as Record<string, { Type: string; Properties?: Record<string, unknown> }>);

/** The names the template gives, those unique in the account only, or all of them. */
function physicalNames(template: Template, scopes: readonly Scope[] = ['account', 'region']): string[] {
  return resources(template).flatMap(({ Type, Properties = {} }) => {
    const naming = NAMING_PROPERTIES[Type];
    if (!naming || !scopes.includes(naming.scope)) return [];
    return naming.names(Properties).flatMap((name) => (name === undefined ? [] : [JSON.stringify(name)]));
  });
}

let ireland: Template;
let virginia: Template;

beforeAll(() => {
  ireland = templateOf('TokenExchange', everything('eu-west-1'));
  virginia = templateOf('TokenExchange', everything('us-east-1'));
});

/** The REST API's variant, with every resource it adds: a web ACL, stored credentials with a multi-Region key replica. */
const restReplica = (region: string): TokenExchangeStackProps => ({
  ...everything(region),
  api: 'rest',
  corsOrigins: undefined,
  callerAccounts: ['111122223333'],
  webAclArn: `arn:aws:wafv2:${region}:${ACCOUNT}:regional/webacl/token-exchange/a1b2c3d4-5678-90ab-cdef-0123456789ab`,
  keyRegions: ['eu-central-1', region],
  primaryKeyArns: { 'orders-api': `arn:aws:kms:eu-central-1:${ACCOUNT}:key/mrk-0123456789abcdef0123456789abcdef` },
  storedCredentials: [
    {
      name: 'orders-api',
      clientId: 'orders',
      tokenUrl: 'https://login.example.com/oauth2/token',
      method: 'private_key_jwt',
      key: 'kms',
      callers: [`arn:aws:iam::${ACCOUNT}:role/orders`],
    },
    {
      name: 'billing-api',
      clientId: 'billing',
      tokenUrl: 'https://login.example.com/oauth2/token',
      method: 'client_secret_post',
      secretName: 'billing',
      callers: [`arn:aws:iam::${ACCOUNT}:role/billing`],
    },
  ],
});

describe('physical names', () => {
  it('are known for every resource type the stack can create', () => {
    const types = new Set(
      [...resources(ireland), ...resources(templateOf('TokenExchange', restReplica('eu-west-1')))].map(({ Type }) => Type),
    );

    expect([...types].filter((type) => !(type in NAMING_PROPERTIES) && !UNNAMED_TYPES.has(type))).toEqual([]);
  });

  it('of the REST variant are not shared by two regions of one account either', () => {
    const [ireland, virginia] = ['eu-west-1', 'us-east-1'].map((region) => templateOf('TokenExchange', restReplica(region))) as [
      Template,
      Template,
    ];

    expect(physicalNames(ireland, ['account']).filter((name) => physicalNames(virginia, ['account']).includes(name))).toEqual([]);
  });

  it('unique across an account are not shared by two regions of it: the dashboard names its region, each DNS record is its own', () => {
    const accountWide = physicalNames(ireland, ['account']);

    expect(accountWide.filter((name) => physicalNames(virginia, ['account']).includes(name))).toEqual([]);
    expect(accountWide).toEqual(expect.arrayContaining([JSON.stringify('TokenExchange-eu-west-1')]));
  });

  it('are not shared by two stacks of one region', () => {
    const { domainName: _, certificateArn: __, hostedZoneId: ___, ...separate } = everything('eu-west-1');
    const staging = templateOf('TokenExchangeStaging', separate);

    expect(physicalNames(staging).filter((name) => physicalNames(ireland).includes(name))).toEqual([]);
  });
});

/** Evaluate the output as CloudFormation would in a partition: Fn::If on the stack's conditions, Fn::Join, the pseudo parameters. */
function outputIn(template: Template, output: string, partition: string): string {
  const json = template.toJSON() as { Conditions: Record<string, unknown>; Outputs: Record<string, { Value: unknown }> };
  const evaluate = (node: unknown): unknown => {
    if (typeof node === 'string' || typeof node === 'boolean') return node;
    const [[fn, args]] = Object.entries(node as Record<string, unknown>) as [[string, unknown]];
    if (fn === 'Ref') return { 'AWS::Partition': partition, 'AWS::Region': 'REGION' }[args as string] ?? `<${String(args)}>`;
    if (fn === 'Fn::Join') return ((args as [string, unknown[]])[1].map(evaluate) as string[]).join((args as [string])[0]);
    if (fn === 'Fn::Equals') return (args as unknown[]).map(evaluate).every((value, _, all) => value === all[0]);
    if (fn === 'Fn::If') {
      const [condition, yes, no] = args as [string, unknown, unknown];
      return evaluate(json.Conditions[condition]) ? evaluate(yes) : evaluate(no);
    }
    throw new Error(`no evaluator for ${fn}`);
  };
  return String(evaluate(json.Outputs[output]?.Value));
}

describe('the console link', () => {
  const agnostic = () => synthesize().template;

  it.each([
    ['aws', 'https://console.aws.amazon.com/cloudwatch/'],
    ['aws-cn', 'https://console.amazonaws.cn/cloudwatch/'],
    ['aws-us-gov', 'https://console.amazonaws-us-gov.com/cloudwatch/'],
  ])("is the %s partition's console when deployed there", (partition, start) => {
    expect(outputIn(agnostic(), 'DashboardUrl', partition)).toMatch(
      new RegExp(`^${start.replaceAll('.', '\\.')}home\\?region=REGION#dashboards/dashboard/<`),
    );
  });
});
