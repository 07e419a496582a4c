import { editDistance, isCdkOwnedContextKey, unknownContextKeyProblems } from '../../infra/context-keys';

describe('editDistance', () => {
  it.each([
    ['tokenCache', 'tokenCache', 0],
    ['allowedTokenUrl', 'allowedTokenUrls', 1],
    ['tokneCache', 'tokenCache', 1],
    ['memorySize', 'memorySzie', 1],
    ['kitten', 'sitting', 3],
    ['', 'abc', 3],
  ])('puts %p at %p from %p', (a, b, distance) => {
    expect(editDistance(a, b)).toBe(distance);
  });
});

describe('isCdkOwnedContextKey', () => {
  it.each([
    'aws:cdk:bundling-stacks',
    'cli-telemetry',
    'acknowledged-issue-numbers',
    '@aws-cdk/aws-lambda:recognizeVersionProps',
    'ssm:account=1:parameterName=x:region=y',
  ])('leaves %p to the CDK', (key) => {
    expect(isCdkOwnedContextKey(key)).toBe(true);
  });

  it.each(['tokencache', 'aws:cdkx', 'ssmParameter', 'cdk-nag'])('does not claim %p for the CDK', (key) => {
    expect(isCdkOwnedContextKey(key)).toBe(false);
  });
});

describe('unknownContextKeyProblems', () => {
  const SETTINGS = ['tokenCache', 'logLevel', 'memorySize'];

  it('suggests the setting a typo is nearest to, whatever its case', () => {
    expect(unknownContextKeyProblems(['TOKENCACHE'], SETTINGS)).toEqual(['Unknown context key "TOKENCACHE": did you mean "tokenCache"?']);
  });

  it('only hints at the nearest setting for a key that is no typo of any', () => {
    expect(unknownContextKeyProblems(['region'], SETTINGS)).toEqual([
      'Unknown context key "region": not a setting of this app, a CDK feature flag or a key the CDK owns (the nearest setting is "logLevel")',
    ]);
  });

  it('says nothing of settings and CDK keys', () => {
    expect(unknownContextKeyProblems(['tokenCache', 'aws:cdk:version-reporting'], SETTINGS)).toEqual([]);
  });
});
