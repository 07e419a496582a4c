import { Validations } from 'aws-cdk-lib';
import { Match, type Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import type { TokenExchangeStack, TokenExchangeStackProps } from '../../infra/token-exchange-stack';
import { createTableInput } from '../../lambda/cache/table-schema';
import { newApp, synthesize } from './stack-fixture';
import { TokenExchangeStack as Stack } from '../../infra/token-exchange-stack';

const KEY_ARN = 'arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab';

type Resource = { Properties: Record<string, unknown>; DeletionPolicy?: string; UpdateReplacePolicy?: string };

let shared: { stack: TokenExchangeStack; template: Template };
let sharedWithKey: { stack: TokenExchangeStack; template: Template };

beforeAll(() => {
  shared = synthesize({ tokenCache: 'shared' });
  sharedWithKey = synthesize({ tokenCache: 'shared', tokenCacheKmsKeyArn: KEY_ARN });
});

function only(template: Template, type: string): { id: string; resource: Resource } {
  const found = Object.entries(template.findResources(type));
  expect(found).toHaveLength(1);
  const [id, resource] = found[0] as [string, Resource];
  return { id, resource };
}

function cachePolicy(template: Template): unknown {
  const { resource } = only(template, 'AWS::IAM::Role');
  return (resource.Properties.Policies as { PolicyName: string; PolicyDocument: unknown }[]).find(
    (policy) => policy.PolicyName === 'UseTokenCacheTable',
  )?.PolicyDocument;
}

describe("tokenCache: 'shared'", () => {
  it('adds one on-demand table keyed by the partition key alone, with DynamoDB TTL on the expiry attribute', () => {
    const { resource } = only(shared.template, 'AWS::DynamoDB::Table');

    expect(resource.Properties).toMatchObject({
      BillingMode: 'PAY_PER_REQUEST',
      KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
      AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
      TimeToLiveSpecification: { AttributeName: 'expires', Enabled: true },
    });
    expect(resource.Properties.GlobalSecondaryIndexes).toBeUndefined();
  });

  it('creates the table the local server creates: one definition for both', () => {
    const { resource } = only(shared.template, 'AWS::DynamoDB::Table');
    const local = createTableInput('any');

    expect(resource.Properties.KeySchema).toEqual(local.KeySchema);
    expect(resource.Properties.AttributeDefinitions).toEqual(local.AttributeDefinitions);
    expect(resource.Properties.BillingMode).toBe(local.BillingMode);
  });

  it('is deleted with the stack: it is a cache', () => {
    const { resource } = only(shared.template, 'AWS::DynamoDB::Table');

    expect([resource.DeletionPolicy, resource.UpdateReplacePolicy]).toEqual(['Delete', 'Delete']);
  });

  it('is encrypted at rest with an AWS owned key by default', () => {
    const { resource } = only(shared.template, 'AWS::DynamoDB::Table');

    // DynamoDB always encrypts at rest; SSEEnabled false means with a key AWS owns, not with KMS.
    expect(resource.Properties.SSESpecification).toEqual({ SSEEnabled: false });
  });

  it('is encrypted with the customer-managed key given by tokenCacheKmsKeyArn', () => {
    sharedWithKey.template.hasResourceProperties('AWS::DynamoDB::Table', {
      SSESpecification: { SSEEnabled: true, SSEType: 'KMS', KMSMasterKeyId: KEY_ARN },
    });
  });

  it('tells the function to use it: TOKEN_CACHE=shared and the table name', () => {
    const { id } = only(shared.template, 'AWS::DynamoDB::Table');

    shared.template.hasResourceProperties('AWS::Lambda::Function', {
      Environment: { Variables: Match.objectLike({ TOKEN_CACHE: 'shared', TOKEN_CACHE_TABLE: { Ref: id } }) },
    });
  });

  it('lets the function get and put items of that table and nothing else: it never deletes one', () => {
    const { id } = only(shared.template, 'AWS::DynamoDB::Table');

    expect(cachePolicy(shared.template)).toEqual({
      Version: '2012-10-17',
      Statement: [
        {
          Effect: 'Allow',
          Action: ['dynamodb:GetItem', 'dynamodb:PutItem'],
          Resource: { 'Fn::GetAtt': [id, 'Arn'] },
        },
      ],
    });
    shared.template.resourceCountIs('AWS::IAM::Policy', 0);
  });

  it('lets the function use the customer-managed key only through DynamoDB', () => {
    const statements = (cachePolicy(sharedWithKey.template) as { Statement: Record<string, unknown>[] }).Statement;

    expect(statements[1]).toEqual({
      Effect: 'Allow',
      Action: ['kms:Decrypt', 'kms:Encrypt', 'kms:GenerateDataKey'],
      Resource: KEY_ARN,
      Condition: {
        StringEquals: { 'kms:ViaService': { 'Fn::Join': ['', ['dynamodb.', { Ref: 'AWS::Region' }, '.', { Ref: 'AWS::URLSuffix' }]] } },
      },
    });
  });

  it.each<[string, TokenExchangeStackProps]>([
    ['off', {}],
    ['memory', { tokenCache: 'memory' }],
  ])('adds no table and no permission with tokenCache %s', (_mode, props) => {
    const { template } = synthesize(props);

    template.resourceCountIs('AWS::DynamoDB::Table', 0);
    expect(cachePolicy(template)).toBeUndefined();
    expect(JSON.stringify(template.toJSON())).not.toContain('TOKEN_CACHE_TABLE');
  });
});

describe("tokenCache: 'shared' and cdk-nag", () => {
  const findings = (scope: IConstruct): string[] =>
    new AwsSolutionsChecks().validateScope(scope).violations.map((violation) => violation.ruleName);

  it.each([
    ['an AWS owned key', () => shared.stack],
    ['a customer-managed key', () => sharedWithKey.stack],
  ])('finds no unacknowledged error or warning with %s', (_case, stack) => {
    expect(findings(stack())).toEqual([]);
  });

  it('acknowledges point-in-time recovery (DDB3) on the table alone, with its reason', () => {
    const acknowledged = shared.stack.node
      .findAll()
      .flatMap((construct) =>
        construct.node.metadata
          .filter((entry) => entry.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)
          .map((entry) => [construct.node.path, entry.data as Record<string, string>] as const),
      )
      .filter(([, rules]) => Object.keys(rules).some((rule) => rule.endsWith('DDB3')));

    expect(acknowledged.map(([path]) => path)).toEqual(['TokenExchangeTest/TokenCache/Table']);
    expect(Object.values(acknowledged[0]?.[1] ?? {})[0]).toMatch(/cache/);
  });
});

describe('tokenCacheKmsKeyArn validation', () => {
  const construct = (props: TokenExchangeStackProps) => () => new Stack(newApp({ bundle: false }), 'KeyTest', props);

  it('refuses a key without the shared cache', () => {
    expect(construct({ tokenCacheKmsKeyArn: KEY_ARN, tokenCache: 'memory' })).toThrow(
      /tokenCacheKmsKeyArn needs tokenCache 'shared', got memory/,
    );
  });

  it('refuses something that is not a KMS key ARN', () => {
    expect(construct({ tokenCache: 'shared', tokenCacheKmsKeyArn: 'alias/token-cache' })).toThrow(
      /tokenCacheKmsKeyArn must be a KMS key ARN/,
    );
  });

  it('refuses an unknown cache mode from JavaScript callers', () => {
    expect(construct({ tokenCache: 'dynamo' as TokenExchangeStackProps['tokenCache'] })).toThrow(
      /tokenCache must be one of off, memory, shared, got dynamo/,
    );
  });
});
