import { Validations } from 'aws-cdk-lib';
import { Match, type Template } from 'aws-cdk-lib/assertions';
import type { TokenExchangeStack, TokenExchangeStackProps } from '../../infra/token-exchange-stack';
import { synthesize } from './stack-fixture';

type Resource = { Properties: Record<string, unknown>; DeletionPolicy?: string; UpdateReplacePolicy?: string };

let shared: { stack: TokenExchangeStack; template: Template };

beforeAll(() => {
  shared = synthesize({ tokenCache: 'shared' });
});

function only(template: Template, type: string): { id: string; resource: Resource } {
  const found = Object.entries(template.findResources(type));
  expect(found).toHaveLength(1);
  const [id, resource] = found[0] as [string, Resource];
  return { id, resource };
}

function rolePolicy(template: Template, name: string): unknown {
  const { resource } = only(template, 'AWS::IAM::Role');
  return (resource.Properties.Policies as { PolicyName: string; PolicyDocument: unknown }[]).find((policy) => policy.PolicyName === name)
    ?.PolicyDocument;
}

describe("the shared cache's pepper", () => {
  it('is one Secrets Manager secret of 64 random letters and digits, described as the pepper', () => {
    shared.template.resourceCountIs('AWS::SecretsManager::Secret', 1);
    shared.template.hasResourceProperties('AWS::SecretsManager::Secret', {
      Description: Match.stringLikeRegexp('^Pepper of the shared token cache'),
      GenerateSecretString: { PasswordLength: 64, ExcludePunctuation: true, IncludeSpace: false, RequireEachIncludedType: true },
    });
  });

  it('is deleted with the stack, as the table is', () => {
    const secret = only(shared.template, 'AWS::SecretsManager::Secret').resource;
    const table = only(shared.template, 'AWS::DynamoDB::Table').resource;

    expect([secret.DeletionPolicy, secret.UpdateReplacePolicy]).toEqual([table.DeletionPolicy, table.UpdateReplacePolicy]);
    expect(secret.DeletionPolicy).toBe('Delete');
  });

  it("reaches the function as TOKEN_CACHE_PEPPER_SECRET, the secret's ARN", () => {
    const { id } = only(shared.template, 'AWS::SecretsManager::Secret');

    shared.template.hasResourceProperties('AWS::Lambda::Function', {
      Environment: { Variables: Match.objectLike({ TOKEN_CACHE_PEPPER_SECRET: { Ref: id } }) },
    });
  });

  it('may be read by the function, that secret only, with GetSecretValue only', () => {
    const { id } = only(shared.template, 'AWS::SecretsManager::Secret');

    expect(rolePolicy(shared.template, 'ReadTokenCachePepper')).toEqual({
      Version: '2012-10-17',
      Statement: [{ Effect: 'Allow', Action: 'secretsmanager:GetSecretValue', Resource: { Ref: id } }],
    });
  });

  it('acknowledges cdk-nag SMG4 (rotation) on the secret alone, saying why nothing rotates into a pepper', () => {
    const acknowledged = shared.stack.node
      .findAll()
      .flatMap((construct) =>
        construct.node.metadata
          .filter((entry) => entry.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)
          .map((entry) => [construct.node.path, entry.data as Record<string, string>] as const),
      )
      .filter(([, rules]) => Object.keys(rules).some((rule) => rule.endsWith('SMG4')));

    expect(acknowledged.map(([path]) => path)).toEqual(['TokenExchangeTest/TokenCachePepper/Secret']);
    expect(Object.values(acknowledged[0]?.[1] ?? {})[0]).toMatch(/nothing can be rotated into it/);
  });

  it.each<[string, TokenExchangeStackProps]>([
    ['off', {}],
    ['memory', { tokenCache: 'memory' }],
  ])('does not exist with tokenCache %s', (_mode, props) => {
    const { template } = synthesize(props);

    template.resourceCountIs('AWS::SecretsManager::Secret', 0);
    expect(rolePolicy(template, 'ReadTokenCachePepper')).toBeUndefined();
    expect(JSON.stringify(template.toJSON())).not.toContain('TOKEN_CACHE_PEPPER_SECRET');
  });
});
