import fc from 'fast-check';
import { callerPattern, verifiedCaller } from '../../lambda/credentials/callers';
import { tokenEvent } from '../support/events';

// Who the caller is (the IAM principal API Gateway verified) and whether a `callers` pattern admits it.

describe('verifiedCaller', () => {
  it.each([
    ['arn:aws:sts::123456789012:assumed-role/orders-service/i-0abc', 'arn:aws:iam::123456789012:role/orders-service'],
    ['arn:aws-cn:sts::123456789012:assumed-role/orders/session@example.com', 'arn:aws-cn:iam::123456789012:role/orders'],
    ['arn:aws:iam::123456789012:user/ops/alice', 'arn:aws:iam::123456789012:user/ops/alice'],
    ['arn:aws:sts::123456789012:federated-user/bob', 'arn:aws:sts::123456789012:federated-user/bob'],
  ])('reads %s as the principal %s', (arn, principal) => {
    expect(verifiedCaller(tokenEvent({}, { iamCaller: arn }))).toEqual({ arn, principal });
  });

  it('finds no caller in an event without IAM authorization', () => {
    expect(verifiedCaller(tokenEvent({}))).toBeUndefined();
  });

  it.each([
    ['a number', 42],
    ['no ARN', 'AROAEXAMPLE:session'],
    ['an ARN with a line break', 'arn:aws:iam::123456789012:user/a\nb'],
    ['an ARN too long', `arn:${'a'.repeat(2045)}`],
  ])('finds no caller when userArn is %s', (_case, userArn) => {
    // Prepare
    const event = tokenEvent({});
    Object.assign(event.requestContext, { authorizer: { iam: { userArn } } });

    // Act & Assess
    expect(verifiedCaller(event)).toBeUndefined();
  });

  it.each([null, 'x', [], { iam: 'x' }, { iam: null }])('finds no caller when the authorizer is %p', (authorizer) => {
    // Prepare
    const event = tokenEvent({});
    Object.assign(event.requestContext, { authorizer });

    // Act & Assess
    expect(verifiedCaller(event)).toBeUndefined();
  });

  it.each([
    ['a session ARN with more after its session name', 'arn:aws:sts::123456789012:assumed-role/orders/i-0abc/more'],
    [
      'an ARN that ends in a session ARN of another account',
      'arn:aws:iam::111111111111:user/x:arn:aws:sts::123456789012:assumed-role/orders/s',
    ],
  ])('reads %s as itself, never as a role', (_case, arn) => {
    expect(verifiedCaller(tokenEvent({}, { iamCaller: arn }))).toEqual({ arn, principal: arn });
  });

  it('finds no caller in a userArn that only contains an ARN', () => {
    // Prepare
    const event = tokenEvent({});
    Object.assign(event.requestContext, { authorizer: { iam: { userArn: 'user arn:aws:iam::123456789012:user/alice' } } });

    // Act & Assess
    expect(verifiedCaller(event)).toBeUndefined();
  });

  it.each([undefined, null, 'event', { requestContext: 'x' }])('finds no caller in %p', (event) => {
    expect(verifiedCaller(event)).toBeUndefined();
  });
});

describe('callerPattern', () => {
  const matches = (pattern: string, principal: string) => callerPattern(pattern).matches(principal);

  it.each([
    ['arn:aws:iam::123456789012:role/orders', 'arn:aws:iam::123456789012:role/orders', true],
    ['arn:aws:iam::123456789012:role/orders', 'arn:aws:iam::123456789012:role/orders-admin', false],
    ['arn:aws:iam::123456789012:role/orders-*', 'arn:aws:iam::123456789012:role/orders-api', true],
    ['arn:aws:iam::123456789012:role/orders-*', 'arn:aws:iam::123456789012:role/orders', false],
    ['arn:aws:iam::*:role/orders', 'arn:aws:iam::999999999999:role/orders', true],
    ['arn:aws:iam::*:role/orders', 'arn:aws:iam::999999999999:role/billing', false],
    ['arn:aws:iam::123456789012:*', 'arn:aws:iam::123456789012:user/alice', true],
    ['arn:*:iam::*:role/*-reader', 'arn:aws:iam::1:role/a-reader', true],
    ['arn:*:iam::*:role/*-reader', 'arn:aws:iam::1:role/a-reader-x', false],
    ['arn:a*b*c', 'arn:abc', true],
    ['arn:a*bc*bc', 'arn:abc', false],
    ['arn:a*bc*bc', 'arn:abcbc', true],
  ])('%s admits %s: %s', (pattern, principal, admitted) => {
    expect(matches(pattern, principal)).toBe(admitted);
  });

  it('treats every other character literally, regular expression syntax included', () => {
    expect(matches('arn:aws:iam::1:role/a.b', 'arn:aws:iam::1:role/a.b')).toBe(true);
    expect(matches('arn:aws:iam::1:role/a.b', 'arn:aws:iam::1:role/axb')).toBe(false);
    expect(matches('arn:aws:iam::1:role/a+', 'arn:aws:iam::1:role/aa')).toBe(false);
  });

  it('admits exactly what a * glob admits, for any pattern and principal', () => {
    const text = (chars: string[], minLength: number) =>
      fc.array(fc.constantFrom(...chars), { minLength, maxLength: 12 }).map((parts) => parts.join(''));
    fc.assert(
      fc.property(text(['a', 'b', '/', ':', '*'], 1), text(['a', 'b', '/', ':'], 0), (pattern, principal) => {
        const glob = new RegExp(`^arn:${pattern.replaceAll('*', '.*')}$`);
        expect(matches(`arn:${pattern}`, `arn:${principal}`)).toBe(glob.test(`arn:${principal}`));
      }),
      { seed: 7, numRuns: 2000 },
    );
  });

  it('matches a long principal against many stars in time linear in its length', () => {
    // A backtracking matcher takes exponential time on this pair; this one scans once per star.
    const pattern = `arn:${'*a'.repeat(30)}b`;
    const principal = `arn:${'a'.repeat(2000)}`;
    expect(matches(pattern, principal)).toBe(false);
  });
});
