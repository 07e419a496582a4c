import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { buildApp } from '../../infra/app';
import type { StoredCredentialProps } from '../../infra/stored-credentials';
import { TokenExchangeStack, type TokenExchangeStackProps } from '../../infra/token-exchange-stack';
import { newApp, projectContext } from './stack-fixture';

// keyRegions: every region signs with the same key material under the same kid, so one JWKS URL
// (a latency-routed name) publishes one key set whichever region answers.

const EXAMPLE_FILE = join(__dirname, '..', '..', 'infra', 'credentials.example.json');
const ACCOUNT = '123456789012';
const MRK = `arn:aws:kms:eu-west-1:${ACCOUNT}:key/mrk-0123456789abcdef0123456789abcdef`;
const certificate = (region: string) => `arn:aws:acm:${region}:${ACCOUNT}:certificate/0b1c2d3e-aaaa-bbbb-cccc-1234567890ab`;
const KEYLESS: StoredCredentialProps = {
  name: 'orders-api',
  clientId: 'orders',
  tokenUrl: 'https://example.okta.com/oauth2/default/v1/token',
  method: 'private_key_jwt',
  key: 'kms',
  callers: [`arn:aws:iam::${ACCOUNT}:role/orders-service`],
};

const CONTEXT = {
  allowAnyPublicTokenUrl: 'true',
  callerAuthorization: 'iam',
  credentialsFile: EXAMPLE_FILE,
  keyRegions: 'eu-west-1,us-east-1',
  domainName: 'auth.example.com',
  hostedZoneId: 'Z0123456789ABCDEFGHIJ',
  certificateArn: `${certificate('us-east-1')},${certificate('eu-west-1')}`,
};

let stacks: TokenExchangeStack[];
let app: App;

beforeAll(() => {
  app = newApp({ bundle: false, context: CONTEXT });
  stacks = buildApp(app);
});

const templateIn = (region: string) => Template.fromStack(stacks.find((stack) => stack.region === region) as TokenExchangeStack);
const packaged = (stack: TokenExchangeStack) => readFileSync(stack.storedCredentials?.stagedFile as string, 'utf8');

/** A stack of one region as a construct user builds it. */
function stackIn(region: string, props: TokenExchangeStackProps): TokenExchangeStack {
  const scope = new App({ context: { ...projectContext(), 'aws:cdk:bundling-stacks': [] } });
  return new TokenExchangeStack(scope, `Keys-${region}`, {
    allowAnyPublicTokenUrl: true,
    callerAuthorization: 'iam',
    env: { account: ACCOUNT, region },
    ...props,
  });
}

describe('-c keyRegions=eu-west-1,us-east-1', () => {
  it('builds one stack per region, the first region first, each named as the stack is and pinned to its region', () => {
    expect(stacks.map((stack) => [stack.node.id, stack.stackName, stack.region])).toEqual([
      ['TokenExchange-eu-west-1', 'TokenExchange', 'eu-west-1'],
      ['TokenExchange-us-east-1', 'TokenExchange', 'us-east-1'],
    ]);
  });

  it('makes each key the first region creates a multi-Region primary', () => {
    templateIn('eu-west-1').hasResourceProperties('AWS::KMS::Key', { MultiRegion: true, KeySpec: 'RSA_2048', KeyUsage: 'SIGN_VERIFY' });
    templateIn('eu-west-1').resourceCountIs('AWS::KMS::ReplicaKey', 0);
  });

  it("replicates it in the other region, reading the primary's ARN from the first region's stack at deploy", () => {
    const replica = templateIn('us-east-1');

    replica.resourceCountIs('AWS::KMS::Key', 0);
    replica.hasResourceProperties('AWS::KMS::ReplicaKey', {
      PrimaryKeyArn: { 'Fn::GetStackOutput': { StackName: 'TokenExchange', Region: 'eu-west-1', OutputName: Match.anyValue() } },
    });
    replica.hasResource('AWS::KMS::ReplicaKey', { DeletionPolicy: 'Retain', UpdateReplacePolicy: 'Retain' });
  });

  it("deploys the replica's stack after the primary's, with no custom resource in between", () => {
    const [primary, replica] = stacks;

    expect(replica?.dependencies).toEqual([primary]);
    for (const stack of stacks)
      expect(JSON.stringify(Template.fromStack(stack).toJSON())).not.toMatch(/Custom::|ExportsWriter|ExportsReader/);
  });

  it("lets only each region's own function role sign with its replica", () => {
    const [replica] = Object.values(templateIn('us-east-1').findResources('AWS::KMS::ReplicaKey')) as {
      Properties: { KeyPolicy: { Statement: { Sid: string; Principal: unknown }[] } };
    }[];

    expect(replica?.Properties.KeyPolicy.Statement.map((statement) => statement.Sid)).toEqual([
      'AccountAdministersOnly',
      'FunctionSignsOnly',
      'FunctionReadsPublicKey',
    ]);
    expect(replica?.Properties.KeyPolicy.Statement[1]?.Principal).toEqual({
      AWS: { 'Fn::GetAtt': [expect.stringMatching(/^FunctionRole/), 'Arn'] },
    });
  });

  it('names the key by the same alias in every region, so every region packages the same entries', () => {
    const [primary, replica] = stacks as [TokenExchangeStack, TokenExchangeStack];

    expect(packaged(replica)).toBe(packaged(primary));
    expect(packaged(primary)).toContain('"keyId":"alias/TokenExchange/orders-api"');
    templateIn('us-east-1').hasResourceProperties('AWS::KMS::Alias', { AliasName: 'alias/TokenExchange/orders-api' });
  });

  it('gives each region the certificate of its region from the list', () => {
    for (const region of ['eu-west-1', 'us-east-1']) {
      templateIn(region).hasResourceProperties('AWS::ApiGatewayV2::DomainName', {
        DomainNameConfigurations: [Match.objectLike({ CertificateArn: certificate(region) })],
      });
    }
  });

  it('writes a latency record for each region under the one name, and warns of nothing', () => {
    for (const stack of stacks) {
      Template.fromStack(stack).hasResourceProperties('AWS::Route53::RecordSet', { Name: 'auth.example.com.', Region: stack.region });
      expect(Annotations.fromStack(stack).findWarning('*', Match.anyValue())).toEqual([]);
    }
  });

  it('passes the AwsSolutions checks in every region', () => {
    for (const stack of stacks) expect(new AwsSolutionsChecks().validateScope(stack).violations).toEqual([]);
  });

  it('refuses a region without a certificate of its own in the list', () => {
    const act = () => buildApp(newApp({ bundle: false, context: { ...CONTEXT, certificateArn: certificate('eu-west-1') } }));

    expect(act).toThrow(/settings of the stack in us-east-1 .*\n- certificateArn is in eu-west-1, but the stack deploys to us-east-1/);
  });

  it.each(['vpcId', 'vpcEndpointIds'])('refuses %s, an id of one region, for several regions', (key) => {
    const act = () => buildApp(newApp({ bundle: false, context: { ...CONTEXT, [key]: 'vpc-0123456789abcdef0' } }));

    expect(act).toThrow(`${key} names a network of one region, and keyRegions deploys 2: deploy such regions as separate apps`);
  });

  it('refuses CDK_DEPLOY_REGION beside keyRegions, which names the regions itself', () => {
    process.env.CDK_DEPLOY_REGION = 'eu-west-1';
    try {
      expect(() => buildApp(newApp({ bundle: false, context: CONTEXT }))).toThrow(
        'CDK_DEPLOY_REGION pins one region, and keyRegions deploys a stack to each',
      );
    } finally {
      delete process.env.CDK_DEPLOY_REGION;
    }
  });
});

describe('keys of yours with keyRegions', () => {
  const given: StoredCredentialProps = { ...KEYLESS, key: undefined, keyId: MRK };

  it("signs in each region with the region's replica of a multi-Region key: the same id, the region's ARN", () => {
    const stack = stackIn('us-east-1', { keyRegions: ['eu-west-1', 'us-east-1'], storedCredentials: [given] });

    const inRegion = MRK.replace(':eu-west-1:', ':us-east-1:');
    expect(packaged(stack)).toContain(`"keyId":"${inRegion}"`);
    expect(JSON.stringify(Template.fromStack(stack).findResources('AWS::IAM::ManagedPolicy'))).toContain(inRegion);
  });

  it('refuses a single-Region key, which cannot sign in the other regions', () => {
    const keyId = `arn:aws:kms:eu-west-1:${ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab`;

    expect(() => stackIn('eu-west-1', { keyRegions: ['eu-west-1', 'us-east-1'], storedCredentials: [{ ...given, keyId }] })).toThrow(
      'storedCredentials: the entry "orders-api" must have keyId as a multi-Region key (key/mrk-...) with keyRegions',
    );
  });
});

describe('keyRegions as props', () => {
  it.each<[string, string, TokenExchangeStackProps, string]>([
    [
      'a region that is not one',
      'eu-west-1',
      { keyRegions: ['eu-west-1', 'mars'] },
      'keyRegions entries must be regions like eu-west-1, got "mars"',
    ],
    ['a region twice', 'eu-west-1', { keyRegions: ['eu-west-1', 'eu-west-1'] }, 'keyRegions names a region twice'],
    ['an empty list', 'eu-west-1', { keyRegions: [] }, 'keyRegions must list at least one region when set'],
    [
      "a list without the stack's region",
      'eu-west-1',
      { keyRegions: ['us-east-1'] },
      "keyRegions must include the stack's region, eu-west-1",
    ],
    [
      'a later region without the primary keys',
      'us-east-1',
      { keyRegions: ['eu-west-1', 'us-east-1'], storedCredentials: [KEYLESS] },
      'primaryKeyArns must name the primary key of "orders-api" (created in eu-west-1)',
    ],
    [
      'a primary key that is no multi-Region key of the first region',
      'us-east-1',
      {
        keyRegions: ['eu-west-1', 'us-east-1'],
        storedCredentials: [KEYLESS],
        primaryKeyArns: { 'orders-api': MRK.replace('eu-west-1', 'eu-central-1') },
      },
      'primaryKeyArns of "orders-api" must be a multi-Region key (key/mrk-...) in eu-west-1',
    ],
    [
      'primary keys given to the first region',
      'eu-west-1',
      { keyRegions: ['eu-west-1', 'us-east-1'], primaryKeyArns: { 'orders-api': MRK } },
      'primaryKeyArns is for the stacks of the later regions: eu-west-1 holds the primary keys',
    ],
    ['primary keys without keyRegions', 'eu-west-1', { primaryKeyArns: { 'orders-api': MRK } }, 'primaryKeyArns needs keyRegions'],
  ])('refuses %s', (_case, region, props, message) => {
    expect(() => stackIn(region, props)).toThrow(message);
  });

  it("refuses keyRegions in a stack whose region synth does not know: each region's stack is built for it", () => {
    const scope = new App({ context: { ...projectContext(), 'aws:cdk:bundling-stacks': [] } });

    expect(() => new TokenExchangeStack(scope, 'Agnostic', { allowAnyPublicTokenUrl: true, keyRegions: ['eu-west-1'] })).toThrow(
      "keyRegions needs the stack's region known at synth (env.region)",
    );
  });

  it('replicates from a primary key given by its ARN, as a construct user who deployed it knows it', () => {
    const stack = stackIn('us-east-1', {
      keyRegions: ['eu-west-1', 'us-east-1'],
      storedCredentials: [KEYLESS],
      primaryKeyArns: { 'orders-api': MRK },
    });

    Template.fromStack(stack).hasResourceProperties('AWS::KMS::ReplicaKey', { PrimaryKeyArn: MRK });
  });
});

describe('keys of one region behind a name of several', () => {
  it('warns when a latency record could front several regions and each would create its own keys', () => {
    const stack = stackIn('eu-west-1', {
      storedCredentials: [KEYLESS],
      domainName: 'auth.example.com',
      certificateArn: certificate('eu-west-1'),
      hostedZoneId: 'Z0123456789ABCDEFGHIJ',
    });

    expect(
      Annotations.fromStack(stack).findWarning('*', Match.stringLikeRegexp('without keyRegions each region creates keys of its own')),
    ).toHaveLength(1);
  });
});
