import { CfnResource, TagManager } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { buildApp, propsFromContext } from '../../infra/app';
import type { TokenExchangeStack } from '../../infra/token-exchange-stack';
import { newApp, synthesize } from './stack-fixture';

const TAGS = { team: 'platform', 'cost-center': '42', 'data:classification': 'internal' };

/** Every resource of the stack that CloudFormation can tag, with the tags its template gives it (a list, or a map). */
function taggableResources(stack: TokenExchangeStack): { type: string; tags: Record<string, string> }[] {
  const template = Template.fromStack(stack).toJSON().Resources as Record<string, { Properties?: { Tags?: unknown } }>;
  return stack.node
    .findAll()
    .filter(
      (construct): construct is CfnResource =>
        CfnResource.isCfnResource(construct) && (TagManager.isTaggable(construct) || TagManager.isTaggableV2(construct)),
    )
    .map((resource) => {
      const tags = template[stack.resolve(resource.logicalId) as string]?.Properties?.Tags ?? {};
      const pairs = Array.isArray(tags)
        ? (tags as { Key: string; Value: string }[]).map(({ Key, Value }) => [Key, Value])
        : Object.entries(tags);
      return { type: resource.cfnResourceType, tags: Object.fromEntries(pairs) as Record<string, string> };
    });
}

describe('tags', () => {
  it('go on every taggable resource with the service tag, whatever the stack holds (but the dashboard, for cfn-lint)', () => {
    // Prepare: as many kinds of resource as the stack can create
    const { stack } = synthesize({
      tags: TAGS,
      tokenCache: 'shared',
      alarmEmail: 'ops@example.com',
      vpcId: 'vpc-0123456789abcdef0',
      vpcSubnetIds: ['subnet-0123456789abcdef0'],
      domainName: 'auth.example.com',
      certificateArn: 'arn:aws:acm:eu-west-1:123456789012:certificate/0b1c2d3e-aaaa-bbbb-cccc-1234567890ab',
      hostedZoneId: 'Z0123456789ABCDEFGHIJ',
    });

    // Act
    const resources = taggableResources(stack);

    // Assess
    const untagged = resources.filter(
      ({ tags }) => !Object.entries({ ...TAGS, service: 'token-exchange' }).every(([key, value]) => tags[key] === value),
    );
    expect(untagged.map(({ type }) => type)).toEqual(['AWS::CloudWatch::Dashboard']);
    expect(new Set(resources.map(({ type }) => type)).size).toBeGreaterThanOrEqual(12);
  });

  it("are the stack's tags too, so CloudFormation puts them on what it creates itself", () => {
    const { stack } = synthesize({ tags: TAGS });

    expect(stack.tags.tagValues()).toEqual(TAGS);
  });

  it('are read from context as -c tags=key=value,... (a value may hold =), or as an object in cdk.json', () => {
    expect(propsFromContext((key) => (key === 'tags' ? 'team=platform, note=a=b ,empty=' : undefined)).tags).toEqual({
      team: 'platform',
      note: 'a=b',
      empty: '',
    });
    expect(propsFromContext((key) => (key === 'tags' ? { team: 'platform' } : undefined)).tags).toEqual({ team: 'platform' });
  });

  it.each([
    ['a pair without =', 'team', /Context key "tags" must be key=value pairs separated by commas, got "team"/],
    ['an empty key', '=platform', /Context key "tags" must be key=value pairs separated by commas, got "=platform"/],
    ['an object of numbers', { team: 1 }, /Context key "tags" must be key=value pairs separated by commas, or an object of strings/],
  ])('refuses %s in context, naming the key', (_case, value, message) => {
    expect(() => propsFromContext((key) => (key === 'tags' ? value : undefined))).toThrow(message);
  });

  it.each([
    ['a key AWS reserves', { 'aws:owner': 'x' }, /tags keys must be 1 to 128 letters.*not starting with aws:, got "aws:owner"/],
    ['a key of characters AWS refuses', { 'team!': 'x' }, /tags keys must be .* got "team!"/],
    ['a key over 128 characters', { ['k'.repeat(129)]: 'x' }, /tags keys must be 1 to 128/],
    ['a value over 256 characters', { team: 'v'.repeat(257) }, /tags value of "team" must be at most 256/],
    ['a value of characters AWS refuses', { team: 'a,b' }, /tags value of "team" must be at most 256 letters/],
    [
      'more tags than a resource holds beside the service tag',
      Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`k${i}`, 'v'])),
      /tags may hold at most 49 tags, got 50/,
    ],
  ])('refuses %s', (_case, tags, message) => {
    expect(() => synthesize({ tags })).toThrow(message);
  });

  it('refuses a bad tag from `-c tags=...` naming the context key', () => {
    const act = () => buildApp(newApp({ bundle: false, context: { tags: 'aws:owner=x' } }));

    expect(act).toThrow(/^Invalid settings \(-c KEY=VALUE or cdk.json\):\n- tags keys must be/);
  });
});
