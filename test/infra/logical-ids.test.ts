import { App, CfnResource, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { Construct } from 'constructs';
import { uniqueId } from '../../infra/logical-ids';
import { TokenExchangeStack, type TokenExchangeStackProps } from '../../infra/token-exchange-stack';
import deployed from './fixtures/deployed-logical-ids.json';
import { projectContext } from './stack-fixture';

// A resource's logical id is its identity in a deployed stack: a new id is a new API (a new URL), a
// second alarm of the same name, a route key taken twice. The fixture holds the resources of stacks
// synthesized before the function and the HTTP API became constructs of their own; an update of
// such a stack must find every one of them where it was.

const CREDENTIALS = [
  {
    name: 'orders-api',
    clientId: '0oa8examplekeyless',
    tokenUrl: 'https://example.okta.com/oauth2/default/v1/token',
    method: 'private_key_jwt',
    key: 'kms',
    scopes: ['orders.read', 'orders.write'],
    callers: ['arn:aws:iam::123456789012:role/orders-service'],
  },
  {
    name: 'billing-api',
    clientId: 'billing-service',
    issuer: 'https://example.eu.auth0.com/',
    method: 'client_secret_post',
    secretName: 'token-exchange/billing-client-secret',
    audience: 'https://billing.example.com',
    callers: ['arn:aws:iam::123456789012:role/billing-*'],
  },
] as const;

/** The props the fixture's stacks were synthesized with. */
const VARIANTS: Record<keyof typeof deployed, TokenExchangeStackProps> = {
  defaults: { allowAnyPublicTokenUrl: true },
  everything: {
    env: { account: '123456789012', region: 'eu-west-1' },
    allowedTokenUrls: ['https://example.okta.com', 'https://*.auth0.com', 'https://10.0.0.5:8443/oauth2/'],
    callerAuthorization: 'iam',
    corsOrigins: ['https://app.example.com'],
    tokenCache: 'shared',
    tokenCacheKmsKeyArn: 'arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab',
    alarmEmail: 'ops@example.com',
    vpcId: 'vpc-0123456789abcdef0',
    vpcSubnetIds: ['subnet-0123456789abcdef0', 'subnet-0123456789abcdef1'],
    domainName: 'auth.example.com',
    certificateArn: 'arn:aws:acm:eu-west-1:123456789012:certificate/0b1c2d3e-aaaa-bbbb-cccc-1234567890ab',
    hostedZoneId: 'Z0123456789ABCDEFGHIJ',
    disableExecuteApiEndpoint: true,
    tracing: 'active',
    tags: { team: 'platform' },
    storedCredentials: CREDENTIALS,
    reservedConcurrency: 5,
  },
};

const bareApp = () => new App({ context: { ...projectContext(), 'aws:cdk:bundling-stacks': [] } });

describe('an update of a deployed stack', () => {
  it.each(Object.keys(VARIANTS) as (keyof typeof deployed)[])(
    'finds every resource of the %s stack under its logical id and type',
    (variant) => {
      const resources = Template.fromStack(new TokenExchangeStack(bareApp(), 'TokenExchange', VARIANTS[variant])).toJSON()
        .Resources as Record<string, { Type: string }>;

      const lost = Object.entries(deployed[variant]).filter(([id, type]) => resources[id]?.Type !== type);
      expect(lost).toEqual([]);
    },
  );
});

describe('uniqueId', () => {
  it.each([
    [['FunctionLogs', 'Resource']],
    [['Api', 'POST--v1--oauth--token', 'TokenIntegration', 'Resource']],
    [['StoredCredentials', 'Keyorders-api', 'Alias', 'Resource']],
    [['Default', 'Only']],
    [['Monitoring', 'Monitoring', 'Resource']],
  ])("is aws-cdk-lib's logical id of the path %p", (path) => {
    // Prepare: a resource at that path of a stack of its own
    const stack = new Stack(bareApp(), 'Paths');
    let scope: Construct = stack;
    for (const id of path.slice(0, -1)) scope = new Construct(scope, id);
    const resource = new CfnResource(scope, path.at(-1) as string, { type: 'Test::Path' });

    // Act / Assess
    expect(uniqueId(path)).toBe(stack.resolve(resource.logicalId));
  });
});
