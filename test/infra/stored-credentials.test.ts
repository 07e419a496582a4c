import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Token, Validations } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import { buildApp, propsFromContext } from '../../infra/app';
import type { StoredCredentialProps } from '../../infra/stored-credentials';
import { TokenExchangeStack, type TokenExchangeStackProps } from '../../infra/token-exchange-stack';
import { newApp } from './stack-fixture';

// The stack with stored credentials: a KMS key per `key: "kms"` credential, grants to exactly those
// keys and secrets, STORED_CREDENTIALS as the function reads it, the public JWKS route and its URL.

const EXAMPLE_FILE = join(__dirname, '..', '..', 'infra', 'credentials.example.json');
const ROLE = 'arn:aws:iam::123456789012:role/orders-service';
const SECRET_ARN = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:billing/client-secret-AbC123';
const KEY_ARN = 'arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab';

const keyless = (overrides: Partial<StoredCredentialProps> = {}): StoredCredentialProps => ({
  name: 'orders-api',
  clientId: '0oa8keyless',
  tokenUrl: 'https://example.okta.com/oauth2/default/v1/token',
  method: 'private_key_jwt',
  key: 'kms',
  callers: [ROLE],
  ...overrides,
});
const withSecret = (overrides: Partial<StoredCredentialProps> = {}): StoredCredentialProps => ({
  name: 'billing-api',
  clientId: 'billing',
  issuer: 'https://example.eu.auth0.com/',
  method: 'client_secret_post',
  secretName: 'billing/client-secret',
  callers: [ROLE],
  ...overrides,
});

function stackWith(credentials: readonly unknown[], props: TokenExchangeStackProps = {}): TokenExchangeStack {
  return new TokenExchangeStack(newApp({ bundle: false }), 'CredentialsTest', {
    allowAnyPublicTokenUrl: true,
    callerAuthorization: 'iam',
    storedCredentials: credentials as StoredCredentialProps[],
    ...props,
  });
}

const templateWith = (credentials: readonly unknown[], props: TokenExchangeStackProps = {}) =>
  Template.fromStack(stackWith(credentials, props));

/** The entries the stack packages with the function, as it staged them for the bundling to copy. */
function packagedEntries(stack: TokenExchangeStack): Record<string, unknown>[] {
  return JSON.parse(readFileSync(stack.storedCredentials?.stagedFile as string, 'utf8')) as Record<string, unknown>[];
}

type Statement = { Sid?: string; Effect: string; Action: string | string[]; Principal?: unknown; Resource: unknown; Condition?: unknown };

/** The key policy of the only key the stack created. */
function keyPolicy(template: Template): Statement[] {
  const [key] = Object.values(template.findResources('AWS::KMS::Key')) as { Properties: { KeyPolicy: { Statement: Statement[] } } }[];
  return key?.Properties.KeyPolicy.Statement ?? [];
}

/** Every statement of the managed policies the role has. */
function managedStatements(template: Template): Statement[] {
  return Object.values(template.findResources('AWS::IAM::ManagedPolicy')).flatMap(
    (policy) => (policy as { Properties: { PolicyDocument: { Statement: Statement[] } } }).Properties.PolicyDocument.Statement,
  );
}

const FUNCTION_ROLE = { AWS: { 'Fn::GetAtt': [expect.stringMatching(/^FunctionRole/), 'Arn'] } };

describe('stored credentials in the stack', () => {
  it('creates one RSA_2048 signing key per credential that asks for one, named by an alias of the stack', () => {
    // Act
    const template = templateWith([
      keyless(),
      keyless({ name: 'inventory.api' }),
      keyless({ name: 'given', key: undefined, keyId: KEY_ARN }),
      withSecret(),
    ]);

    // Assess
    template.resourceCountIs('AWS::KMS::Key', 2);
    template.resourcePropertiesCountIs('AWS::KMS::Key', { KeySpec: 'RSA_2048', KeyUsage: 'SIGN_VERIFY' }, 2);
    template.hasResourceProperties('AWS::KMS::Alias', { AliasName: 'alias/CredentialsTest/orders-api' });
    template.hasResourceProperties('AWS::KMS::Alias', { AliasName: 'alias/CredentialsTest/inventory_api' });
    template.hasResource('AWS::KMS::Key', { DeletionPolicy: 'Retain', UpdateReplacePolicy: 'Retain' });
  });

  it('packages the entries with the function, each key by its alias or ARN and each secret by its name or ARN', () => {
    // Act
    const entries = packagedEntries(
      stackWith([
        keyless({ scopes: ['orders.read'] }),
        keyless({ name: 'given', key: undefined, keyId: KEY_ARN }),
        withSecret(),
        withSecret({ name: 'by-arn', secretName: undefined, secretId: SECRET_ARN }),
      ]),
    );

    // Assess
    expect(entries).toEqual([
      {
        name: 'orders-api',
        clientId: '0oa8keyless',
        tokenUrl: 'https://example.okta.com/oauth2/default/v1/token',
        method: 'private_key_jwt',
        scopes: ['orders.read'],
        callers: [ROLE],
        keyId: 'alias/CredentialsTest/orders-api',
      },
      {
        name: 'given',
        clientId: '0oa8keyless',
        tokenUrl: 'https://example.okta.com/oauth2/default/v1/token',
        method: 'private_key_jwt',
        callers: [ROLE],
        keyId: KEY_ARN,
      },
      {
        name: 'billing-api',
        clientId: 'billing',
        issuer: 'https://example.eu.auth0.com/',
        method: 'client_secret_post',
        callers: [ROLE],
        secretId: 'billing/client-secret',
      },
      {
        name: 'by-arn',
        clientId: 'billing',
        issuer: 'https://example.eu.auth0.com/',
        method: 'client_secret_post',
        callers: [ROLE],
        secretId: SECRET_ARN,
      },
    ]);
  });

  it('names the file in STORED_CREDENTIALS_FILE, under the task root, and no longer puts the entries in the environment', () => {
    // Act
    const template = templateWith([keyless(), withSecret()]);

    // Assess
    template.hasResourceProperties('AWS::Lambda::Function', {
      Environment: {
        Variables: Match.objectLike({ STORED_CREDENTIALS_FILE: '/var/task/stored-credentials.json', STORED_CREDENTIALS: Match.absent() }),
      },
    });
  });

  it("lets only the function's role sign with a key it created, with RS256's algorithm over raw messages, and read its public key", () => {
    // Act
    const policy = keyPolicy(templateWith([keyless()]));

    // Assess
    const signers = policy.filter((statement) => [statement.Action].flat().some((action) => action === 'kms:Sign' || action === 'kms:*'));
    expect(signers).toEqual([
      {
        Sid: 'FunctionSignsOnly',
        Effect: 'Allow',
        Action: 'kms:Sign',
        Principal: FUNCTION_ROLE,
        Resource: '*',
        Condition: { StringEquals: { 'kms:SigningAlgorithm': 'RSASSA_PKCS1_V1_5_SHA_256', 'kms:MessageType': 'RAW' } },
      },
    ]);
    expect(policy).toContainEqual({
      Sid: 'FunctionReadsPublicKey',
      Effect: 'Allow',
      Action: 'kms:GetPublicKey',
      Principal: FUNCTION_ROLE,
      Resource: '*',
    });
  });

  it('leaves the account only the administration of a key it created: no signing or other use, and no grants to hand them out', () => {
    // Act
    const policy = keyPolicy(templateWith([keyless()]));

    // Assess
    const account = policy.find((statement) => statement.Sid === 'AccountAdministersOnly');
    const actions = [account?.Action].flat() as string[];
    expect(JSON.stringify(account?.Principal)).toContain(':root');
    expect(actions).toEqual(
      expect.arrayContaining(['kms:PutKeyPolicy', 'kms:ScheduleKeyDeletion', 'kms:CancelKeyDeletion', 'kms:DescribeKey']),
    );
    const uses = /^kms:(Sign|Verify|Encrypt|Decrypt|ReEncrypt|GenerateDataKey|GenerateMac|VerifyMac|DeriveSharedSecret|CreateGrant|\*)/;
    expect(actions.filter((action) => uses.test(action) || action.includes('*'))).toEqual([]);
    expect(policy.map((statement) => statement.Sid)).toEqual(['AccountAdministersOnly', 'FunctionSignsOnly', 'FunctionReadsPublicKey']);
  });

  it('creates the function only once its keys, their aliases and its grants exist', () => {
    // Act
    const template = templateWith([keyless(), withSecret()]);

    // Assess
    const [fn] = Object.values(template.findResources('AWS::Lambda::Function')) as { DependsOn: string[] }[];
    const parts = Object.keys({
      ...template.findResources('AWS::KMS::Key'),
      ...template.findResources('AWS::KMS::Alias'),
      ...template.findResources('AWS::IAM::ManagedPolicy'),
    });
    expect(parts).toHaveLength(3);
    expect(fn?.DependsOn).toEqual(expect.arrayContaining(parts));
  });

  it('grants the role nothing on a key it created: the key policy alone lets it sign', () => {
    // Act
    const template = templateWith([keyless()]);

    // Assess
    expect(JSON.stringify(template.findResources('AWS::IAM::Role'))).not.toContain('kms:');
    template.resourceCountIs('AWS::IAM::ManagedPolicy', 0);
  });

  it('lets the function read those secrets, sign with those keys of yours as it signs, and read their public keys, nothing more', () => {
    // Act
    const template = templateWith([
      keyless(),
      keyless({ name: 'given', key: undefined, keyId: KEY_ARN }),
      withSecret(),
      withSecret({ name: 'by-arn', secretName: undefined, secretId: SECRET_ARN }),
    ]);

    // Assess
    const secretByName = {
      'Fn::Join': [
        '',
        [
          'arn:',
          { Ref: 'AWS::Partition' },
          ':secretsmanager:',
          { Ref: 'AWS::Region' },
          ':',
          { Ref: 'AWS::AccountId' },
          ':secret:billing/client-secret-??????',
        ],
      ],
    };
    expect(managedStatements(template)).toEqual([
      { Effect: 'Allow', Action: 'secretsmanager:GetSecretValue', Resource: [SECRET_ARN, secretByName] },
      {
        Effect: 'Allow',
        Action: 'kms:Sign',
        Resource: KEY_ARN,
        Condition: { StringEquals: { 'kms:SigningAlgorithm': ['RSASSA_PKCS1_V1_5_SHA_256', 'ECDSA_SHA_256'], 'kms:MessageType': 'RAW' } },
      },
      { Effect: 'Allow', Action: 'kms:GetPublicKey', Resource: KEY_ARN },
    ]);
    const [policy] = Object.keys(template.findResources('AWS::IAM::ManagedPolicy'));
    template.hasResourceProperties('AWS::IAM::Role', {
      ManagedPolicyArns: [{ Ref: policy }],
      Description: Match.stringLikeRegexp("uses its stored credentials' keys and secrets$"),
    });
  });

  it('serves GET /.well-known/jwks.json without caller authentication, the only such route, and outputs its URL', () => {
    // Act
    const template = templateWith([keyless()]);

    // Assess
    template.resourceCountIs('AWS::ApiGatewayV2::Route', 3);
    template.hasResourceProperties('AWS::ApiGatewayV2::Route', { RouteKey: 'GET /.well-known/jwks.json', AuthorizationType: 'NONE' });
    template.resourcePropertiesCountIs('AWS::ApiGatewayV2::Route', { AuthorizationType: 'AWS_IAM' }, 2);
    template.hasOutput('JwksUrl', {
      Value: { 'Fn::Join': ['', Match.arrayWith([Match.stringLikeRegexp('/\\.well-known/jwks\\.json$')])] },
    });
  });

  it('has no JWKS route and no JWKS URL when no credential signs with a key', () => {
    // Act
    const template = templateWith([withSecret()]);

    // Assess
    template.resourceCountIs('AWS::ApiGatewayV2::Route', 2);
    expect(Object.keys(template.findOutputs('JwksUrl'))).toEqual([]);
    template.resourceCountIs('AWS::KMS::Key', 0);
  });

  it('graphs requests by credential on the dashboard', () => {
    // Act
    const template = templateWith([keyless()]);

    // Assess
    const [dashboard] = Object.values(template.findResources('AWS::CloudWatch::Dashboard')) as { Properties: { DashboardBody: unknown } }[];
    expect(JSON.stringify(dashboard?.Properties.DashboardBody)).toContain('MetricName=\\\\\\"CredentialRequests\\\\\\"');
  });

  it('is clean of cdk-nag findings, acknowledging only the public JWKS route', () => {
    // Prepare
    const stack = stackWith([keyless(), withSecret()]);

    // Act
    const findings = new AwsSolutionsChecks().validateScope(stack).violations.map((violation) => violation.ruleName);

    // Assess
    expect(findings).toEqual([]);
    const acknowledged = stack.node
      .findAll()
      .filter((construct: IConstruct) =>
        construct.node.metadata.some((entry) => entry.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY),
      )
      .map((construct) => construct.node.path);
    expect(acknowledged).toEqual(['CredentialsTest/HttpApi/Api/GET--.well-known--jwks.json']);
  });
});

describe('synth refuses stored credentials it cannot deploy', () => {
  it('without callerAuthorization=iam, saying why', () => {
    expect(() => stackWith([keyless()], { callerAuthorization: 'none' })).toThrow(
      'storedCredentials needs callerAuthorization=iam: a stored credential is handed to the IAM principal API Gateway verified',
    );
  });

  it.each<[string, unknown, string]>([
    [
      'both key and keyId',
      keyless({ keyId: KEY_ARN }),
      'the entry "orders-api" must have exactly one of key: "kms" and keyId with private_key_jwt',
    ],
    [
      'neither key nor keyId',
      keyless({ key: undefined }),
      'the entry "orders-api" must have exactly one of key: "kms" and keyId with private_key_jwt',
    ],
    [
      'a key other than kms',
      { ...keyless(), key: 'hsm' },
      'the entry "orders-api" must have key "kms" (the stack creates the key), got "hsm"',
    ],
    [
      'a keyId that is no key ARN',
      keyless({ key: undefined, keyId: 'alias/orders' }),
      'the entry "orders-api" must have keyId as a KMS key ARN',
    ],
    [
      'both secretName and secretId',
      withSecret({ secretId: SECRET_ARN }),
      'the entry "billing-api" must have exactly one of secretName and secretId with client_secret_post',
    ],
    [
      'a secretId that is no complete ARN',
      withSecret({ secretName: undefined, secretId: 'billing/client-secret' }),
      'the entry "billing-api" must have secretId as a secret\'s complete ARN (with its six-character suffix), or name it with secretName',
    ],
    [
      'a secretName with a space',
      withSecret({ secretName: 'billing secret' }),
      'the entry "billing-api" must have secretName as a Secrets Manager secret name',
    ],
    ['a field no entry has', { ...keyless(), scope: 'read' }, 'the entry "orders-api" has fields no entry has: scope'],
    ['an entry that is no object', 'orders-api', 'the entry at index 0 must have exactly one of secretName and secretId'],
  ])('an entry with %s, naming it', (_case, entry, message) => {
    expect(() => stackWith([entry])).toThrow(`storedCredentials: ${message}`);
  });

  it("a key of yours in another region than the stack's, naming the entry", () => {
    const act = () => stackWith([keyless({ key: undefined, keyId: KEY_ARN })], { env: { account: '123456789012', region: 'us-east-1' } });

    expect(act).toThrow('storedCredentials: the entry "orders-api" keyId is in eu-west-1, but the stack deploys to us-east-1');
  });

  it('a value known only at deploy, which a packaged file cannot hold', () => {
    // Prepare: a secret's ARN from another construct is a CloudFormation reference until deploy
    const secretId = Token.asString({ Ref: 'SomeSecret' });

    // Act
    const act = () => stackWith([withSecret({ secretName: undefined, secretId })]);

    // Assess
    expect(act).toThrow('storedCredentials: the entry "billing-api" has secretId known only at deploy');
  });

  it('more secrets and keys of yours than ten managed policies can grant', () => {
    // Prepare: 1000 secrets by long names, each about 280 characters of a policy
    const secrets = Array.from({ length: 1000 }, (_, index) =>
      withSecret({ name: `client-${index}`, secretName: `${'s'.repeat(200)}/${index}` }),
    );

    // Act
    const act = () => stackWith(secrets);

    // Assess
    expect(act).toThrow(
      /storedCredentials names more secrets and keys of yours than 10 IAM managed policies can grant \(it would take \d+\)/,
    );
  });

  it("refuses what the function would refuse at its start, in the function's words", () => {
    expect(() => stackWith([keyless({ tokenUrl: 'http://example.okta.com/token' })])).toThrow(
      'storedCredentials: the function would not start: the entry "orders-api" has a tokenUrl the token URL policy refuses: it must use https',
    );
    expect(() => stackWith([keyless()], { allowedTokenUrls: ['https://login.example.com'], allowAnyPublicTokenUrl: undefined })).toThrow(
      'has a tokenUrl the token URL policy refuses: it is not in the allowlist',
    );
  });
});

describe('-c credentialsFile=PATH', () => {
  const directory = mkdtempSync(join(tmpdir(), 'credentials-'));
  const file = (name: string, text: string): string => {
    const path = join(directory, name);
    writeFileSync(path, text);
    return path;
  };

  it('reads the entries of the file as the stack prop', () => {
    const props = propsFromContext((key) => (key === 'credentialsFile' ? EXAMPLE_FILE : undefined));
    expect(props.storedCredentials).toEqual(JSON.parse(readFileSync(EXAMPLE_FILE, 'utf8')));
  });

  it.each([
    ['a file that does not exist', () => join(directory, 'missing.json'), 'cannot read the credentials file', '(ENOENT)'],
    ['a file that is not JSON', () => file('broken.json', '[{'), 'cannot read the credentials file', '(it is not JSON)'],
    ['a file of one object', () => file('object.json', '{"name":"x"}'), 'must hold a JSON array of credential entries', ''],
  ])('stops on %s, naming the key and the path', (_case, path, message, why) => {
    const at = path();
    expect(() => propsFromContext((key) => (key === 'credentialsFile' ? at : undefined))).toThrow(`Context key "credentialsFile": `);
    expect(() => propsFromContext((key) => (key === 'credentialsFile' ? at : undefined))).toThrow(`${message}`);
    expect(() => propsFromContext((key) => (key === 'credentialsFile' ? at : undefined))).toThrow(at);
    if (why) expect(() => propsFromContext((key) => (key === 'credentialsFile' ? at : undefined))).toThrow(why);
  });

  it('synthesizes the example file, which holds no secret, with IAM callers', () => {
    // Act
    const [stack] = buildApp(newApp({ bundle: false, context: { credentialsFile: EXAMPLE_FILE, callerAuthorization: 'iam' } }));
    const template = Template.fromStack(stack);

    // Assess
    template.resourceCountIs('AWS::KMS::Key', 1);
    expect(packagedEntries(stack).map((entry) => entry.name)).toEqual(['orders-api', 'billing-api']);
    // A secret is named, never held: the file has no field a secret's value could be in.
    const fields = (JSON.parse(readFileSync(EXAMPLE_FILE, 'utf8')) as Record<string, unknown>[]).flatMap((entry) => Object.keys(entry));
    expect(new Set(fields)).toEqual(
      new Set(['name', 'clientId', 'tokenUrl', 'issuer', 'method', 'key', 'secretName', 'scopes', 'audience', 'callers']),
    );
  });
});
