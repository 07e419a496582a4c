import { Duration } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import type { RetentionDays } from 'aws-cdk-lib/aws-logs';
import { TokenExchangeStack, type TokenExchangeStackProps } from '../../infra/token-exchange-stack';
import type { LogLevel } from '../../lambda/config';
import { newApp, withTokenUrlChoice } from './stack-fixture';

// Validation runs before any construct is made, so none of these tests bundles anything.
function construct(props: TokenExchangeStackProps): TokenExchangeStack {
  return new TokenExchangeStack(newApp({ bundle: false }), 'PropsTest', withTokenUrlChoice({ ...props }));
}

describe('TokenExchangeStack props validation', () => {
  it.each<[string, TokenExchangeStackProps, RegExp]>([
    ['an upstream timeout of 0', { upstreamTimeoutMs: 0 }, /upstreamTimeoutMs must be a whole number from 1 to 29000, got 0/],
    ['an upstream timeout over 29 s', { upstreamTimeoutMs: 29_001 }, /upstreamTimeoutMs must be a whole number from 1 to 29000, got 29001/],
    ['a fractional upstream timeout', { upstreamTimeoutMs: 1500.5 }, /upstreamTimeoutMs must be a whole number/],
    [
      'a function timeout no longer than the upstream timeout',
      { upstreamTimeoutMs: 10_000, functionTimeout: Duration.seconds(10) },
      /functionTimeout \(10 s\) must be longer than upstreamTimeoutMs \(10000 ms\)/,
    ],
    [
      'a function timeout at the 30 s integration limit',
      { functionTimeout: Duration.seconds(30) },
      /functionTimeout must be under the HTTP API's 30 s integration limit, got 30 s/,
    ],
    [
      'a function timeout in fractions of a second',
      { functionTimeout: Duration.millis(7500) },
      /functionTimeout must be whole seconds, got 7.5 s/,
    ],
    ['memory under 128 MiB', { memorySize: 64 }, /memorySize must be a whole number of MiB from 128 to 10240, got 64/],
    ['memory over 10240 MiB', { memorySize: 10_241 }, /memorySize must be a whole number of MiB from 128 to 10240, got 10241/],
    ['a throttle rate of 0', { throttleRateLimit: 0 }, /throttleRateLimit must be a number of requests per second above 0, got 0/],
    ['a throttle burst of 0', { throttleBurstLimit: 0 }, /throttleBurstLimit must be a whole number of at least 1, got 0/],
    [
      'a retention CloudWatch does not offer',
      { logRetention: 42 as RetentionDays },
      /logRetention must be one of 1, 3, 5, .* days, got 42/,
    ],
    ['a reserved concurrency of 0', { reservedConcurrency: 0 }, /reservedConcurrency must be a whole number of at least 1 when set, got 0/],
    [
      'an unknown log level',
      { logLevel: 'VERBOSE' as LogLevel },
      /logLevel must be one of TRACE, DEBUG, INFO, WARN, ERROR, CRITICAL, SILENT, got VERBOSE/,
    ],
    ['a metrics namespace in the AWS/ space', { metricsNamespace: 'AWS/Lambda' }, /metricsNamespace must be .* not start with AWS\//],
    ['an empty metrics namespace', { metricsNamespace: '' }, /metricsNamespace must be 1-255/],
    [
      'an allowlist entry holding a comma',
      { allowedTokenUrls: ['https://a.example,https://b.example'] },
      /allowedTokenUrls entries must be non-empty and contain no comma/,
    ],
    [
      'an allowlist entry the function would refuse',
      { allowedTokenUrls: ['ftp://idp.example.com'] },
      /allowedTokenUrls: an invalid entry "ftp:\/\/idp.example.com"/,
    ],
    ['an empty list of CORS origins', { corsOrigins: [] }, /corsOrigins must list at least one origin when set/],
    [
      'a CORS origin with a path',
      { corsOrigins: ['https://app.example.com/'] },
      /corsOrigins entries must be origins like https:\/\/app.example.com, got "https:\/\/app.example.com\/"/,
    ],
    [
      'a CORS wildcard beside other origins',
      { corsOrigins: ['*', 'https://app.example.com'] },
      /corsOrigins: "\*" must be the only origin/,
    ],
  ])('refuses %s with a message naming the prop', (_case, props, message) => {
    // Prepare: the props of the case

    // Act
    const act = () => construct(props);

    // Assess
    expect(act).toThrow(message);
  });

  it('lists every problem in one error', () => {
    const act = () => construct({ memorySize: 1, throttleBurstLimit: 0, corsOrigins: [] });

    expect(act).toThrow(/Invalid TokenExchangeStack props:\n- memorySize .*\n- throttleBurstLimit .*\n- corsOrigins /);
  });

  it('refuses an upstream timeout of 29000 ms, which no whole-second function timeout under 30 s can exceed', () => {
    const act = () => construct({ upstreamTimeoutMs: 29_000, functionTimeout: Duration.seconds(29) });

    expect(act).toThrow(/functionTimeout \(29 s\) must be longer than upstreamTimeoutMs \(29000 ms\)/);
  });

  it('accepts the longest consistent timeouts: 28999 ms upstream, 29 s function', () => {
    const stack = construct({ upstreamTimeoutMs: 28_999, functionTimeout: Duration.seconds(29) });

    Template.fromStack(stack).hasResourceProperties('AWS::Lambda::Function', {
      Timeout: 29,
      Environment: { Variables: { UPSTREAM_TIMEOUT_MS: '28999' } },
    });
  });

  it('accepts a CORS wildcard on its own', () => {
    const stack = construct({ corsOrigins: ['*'] });

    Template.fromStack(stack).hasResourceProperties('AWS::ApiGatewayV2::Api', { CorsConfiguration: { AllowOrigins: ['*'] } });
  });
});
