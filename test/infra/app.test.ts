import { Duration, Token } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { RetentionDays } from 'aws-cdk-lib/aws-logs';
import { ALARM_THRESHOLD_DEFAULTS } from '../../infra/alarms';
import { buildApp, contextKeyOf, propsFromContext, settingContextKeys } from '../../infra/app';
import { newApp } from './stack-fixture';

const reader =
  (context: Record<string, unknown>) =>
  (key: string): unknown =>
    context[key];

describe('propsFromContext', () => {
  it('reads every prop from `-c key=value` strings', () => {
    // Prepare
    const context = {
      allowedTokenUrls: 'https://login.example.com, https://*.auth0.com',
      upstreamTimeoutMs: '8000',
      tokenCache: 'shared',
      tokenCacheKmsKeyArn: 'arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab',
      logLevel: 'warn',
      metricsNamespace: 'Acme/TokenExchange',
      memorySize: '512',
      functionTimeoutSeconds: '12',
      throttleRateLimit: '20.5',
      throttleBurstLimit: '40',
      logRetentionDays: '90',
      reservedConcurrency: '10',
      corsOrigins: 'https://app.example.com',
      sourceMapStackTraces: 'true',
    };

    // Act
    const props = propsFromContext(reader(context));

    // Assess
    expect({ ...props, functionTimeout: props.functionTimeout?.toSeconds() }).toEqual({
      allowedTokenUrls: ['https://login.example.com', 'https://*.auth0.com'],
      upstreamTimeoutMs: 8000,
      tokenCache: 'shared',
      tokenCacheKmsKeyArn: 'arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab',
      logLevel: 'WARN',
      metricsNamespace: 'Acme/TokenExchange',
      memorySize: 512,
      functionTimeout: 12,
      throttleRateLimit: 20.5,
      throttleBurstLimit: 40,
      logRetention: RetentionDays.THREE_MONTHS,
      reservedConcurrency: 10,
      corsOrigins: ['https://app.example.com'],
      sourceMapStackTraces: true,
    });
  });

  it('reads JSON values as cdk.json holds them', () => {
    const props = propsFromContext(reader({ allowedTokenUrls: ['https://login.example.com'], memorySize: 1024, tokenCache: false }));

    expect(props).toMatchObject({ allowedTokenUrls: ['https://login.example.com'], memorySize: 1024, tokenCache: 'off' });
  });

  it.each([
    ['on', 'memory'],
    [true, 'memory'],
    ['memory', 'memory'],
    ['OFF', 'off'],
    ['shared', 'shared'],
  ])('reads tokenCache %p as %p', (value, mode) => {
    expect(propsFromContext(reader({ tokenCache: value })).tokenCache).toBe(mode);
  });

  it('leaves out what the context does not set (or sets empty), so the stack defaults apply', () => {
    const props = propsFromContext(reader({ logLevel: '', corsOrigins: ' ' }));

    expect(Object.values(props).filter((value) => value !== undefined)).toEqual([]);
  });

  it.each([
    ['-1', -1],
    [' 2.5 ', 2.5],
    ['+7', 7],
    ['.5', 0.5],
  ])('reads the number %p as %p, negative too, so the range check can name its rule', (text, expected) => {
    expect(propsFromContext(reader({ throttleRateLimit: text })).throttleRateLimit).toBe(expected);
  });

  it.each([
    ['memorySize', 'lots', /Context key "memorySize" must be a number, got "lots"/],
    ['memorySize', '1e3', /Context key "memorySize" must be a number, got "1e3"/],
    ['memorySize', '--1', /Context key "memorySize" must be a number, got "--1"/],
    ['upstreamTimeoutMs', '5s', /Context key "upstreamTimeoutMs" must be a number, got "5s"/],
    ['tokenCache', 'yes', /Context key "tokenCache" must be off, memory or shared \(on and true mean memory\), got "yes"/],
    ['corsOrigins', [1, 2], /Context key "corsOrigins" must be a comma-separated string or an array of strings/],
    ['logLevel', 3, /Context key "logLevel" must be a string, got 3/],
  ])('names the key when %s is malformed', (key, value, message) => {
    const act = () => propsFromContext(reader({ [key]: value }));

    expect(act).toThrow(message);
  });
});

describe('buildApp', () => {
  const saved = { account: process.env.CDK_DEPLOY_ACCOUNT, region: process.env.CDK_DEPLOY_REGION };
  afterEach(() => {
    for (const [name, value] of [
      ['CDK_DEPLOY_ACCOUNT', saved.account],
      ['CDK_DEPLOY_REGION', saved.region],
    ] as const) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  });

  it('names the stack from context and passes the context on as props', () => {
    const app = newApp({ bundle: false, context: { stackName: 'AcmeTokens', memorySize: '1024', functionTimeoutSeconds: '15' } });

    const [stack] = buildApp(app);

    expect(stack.stackName).toBe('AcmeTokens');
    Template.fromStack(stack).hasResourceProperties('AWS::Lambda::Function', { MemorySize: 1024, Timeout: 15 });
    expect(stack.handler.timeout).toEqual(Duration.seconds(15));
  });

  it('is environment-agnostic unless CDK_DEPLOY_ACCOUNT and CDK_DEPLOY_REGION pin it', () => {
    delete process.env.CDK_DEPLOY_ACCOUNT;
    delete process.env.CDK_DEPLOY_REGION;
    const [agnostic] = buildApp(newApp({ bundle: false }));
    process.env.CDK_DEPLOY_ACCOUNT = '123456789012';
    process.env.CDK_DEPLOY_REGION = 'eu-west-1';
    const [pinned] = buildApp(newApp({ bundle: false }));

    expect(Token.isUnresolved(agnostic.region)).toBe(true);
    expect(Token.isUnresolved(agnostic.account)).toBe(true);
    expect([pinned.account, pinned.region]).toEqual(['123456789012', 'eu-west-1']);
  });
});

describe('context keys', () => {
  it('stops on a misspelt setting, naming the setting meant: -c tokencache=shared', () => {
    const act = () => buildApp(newApp({ bundle: false, context: { tokencache: 'shared' } }));

    expect(act).toThrow('Unknown context key "tokencache": did you mean "tokenCache"?');
  });

  it('stops on a setting missing a letter: -c allowedTokenUrl=...', () => {
    const act = () => buildApp(newApp({ bundle: false, context: { allowedTokenUrl: 'https://login.example.com' } }));

    expect(act).toThrow('Unknown context key "allowedTokenUrl": did you mean "allowedTokenUrls"?');
  });

  it('names every unknown key, one per line', () => {
    const act = () => buildApp(newApp({ bundle: false, context: { memorysize: '512', logLevl: 'WARN' } }));

    expect(act).toThrow(
      /^Unknown context key "memorysize": did you mean "memorySize"\?\nUnknown context key "logLevl": did you mean "logLevel"\?$/,
    );
  });

  it("accepts cdk.json's feature flags and the keys the CDK itself sets", () => {
    // Prepare: beside cdk.json's context (newApp): the CLI's own keys, `cdk acknowledge`'s, a cached lookup
    const context = {
      'aws:cdk:enable-path-metadata': true,
      'aws:cdk:bundling-stacks': [],
      'acknowledged-issue-numbers': [12345],
      'availability-zones:account=123456789012:region=eu-west-1': ['eu-west-1a'],
      '@aws-cdk/core:bootstrapQualifier': 'hnb659fds',
      stackName: 'AcmeTokens',
    };

    // Act
    const [stack] = buildApp(newApp({ bundle: false, context }));

    // Assess
    expect(stack.stackName).toBe('AcmeTokens');
  });

  it('knows every key propsFromContext reads, and stackName', () => {
    expect(settingContextKeys()).toEqual(
      expect.arrayContaining([
        'stackName',
        'allowedTokenUrls',
        'allowAnyPublicTokenUrl',
        'tokenCache',
        'functionTimeoutSeconds',
        'logRetentionDays',
      ]),
    );
  });

  it.each([
    [
      { logRetentionDays: '10' },
      /^Invalid settings \(-c KEY=VALUE or cdk.json\):\n- logRetentionDays must be one of 1, 3, 5, .* days, got 10$/,
    ],
    [{ functionTimeoutSeconds: '2.5' }, /- functionTimeoutSeconds must be whole seconds, got 2.5 s/],
    [{ functionTimeoutSeconds: '5' }, /- functionTimeoutSeconds \(5 s\) must be longer than upstreamTimeoutMs \(5000 ms\)/],
    [{ alarmFunctionErrors: '0' }, /- alarmFunctionErrors must be a whole number of at least 1, got 0/],
    [{ monitoring: 'off', alarmLatencyP99Ms: '100' }, /- alarmLatencyP99Ms needs monitoring on \(it is off\)/],
    [{ vpcSubnetIds: 'subnet-0123456789abcdef0' }, /- vpcSubnetIds needs vpcId, the VPC they belong to/],
    [{ credentialsFile: 'infra/credentials.example.json' }, /- credentialsFile needs callerAuthorization=iam/],
    [
      {
        credentialsFile: 'infra/credentials.example.json',
        callerAuthorization: 'iam',
        allowAnyPublicTokenUrl: 'false',
        allowedTokenUrls: 'https://login.example.com',
      },
      /- credentialsFile: the function would not start: the entry "orders-api" has a tokenUrl the token URL policy refuses: it is not in the allowlist/,
    ],
  ])('names the context key the user typed, not the prop it becomes: %p', (context, message) => {
    const act = () => buildApp(newApp({ bundle: false, context }));

    expect(act).toThrow(message);
  });

  it('has a context key for every prop a refusal can name', () => {
    const props = [
      ...Object.keys(propsFromContext(() => undefined)).filter((prop) => prop !== 'alarmThresholds'),
      ...Object.keys(ALARM_THRESHOLD_DEFAULTS).map((threshold) => `alarmThresholds.${threshold}`),
    ];

    expect(props.map(contextKeyOf).filter((key) => !settingContextKeys().includes(key))).toEqual([]);
    expect(contextKeyOf('logRetention')).toBe('logRetentionDays');
  });

  it('lists every problem of the API, the network and the keys in one refusal, each by the key typed', () => {
    // Prepare: REST-only settings with the HTTP API, a VPC without subnets, a key region that is none
    const context = {
      webAclArn: 'arn:aws:wafv2:eu-west-1:123456789012:regional/webacl/x/a1b2c3d4-5678-90ab-cdef-0123456789ab',
      callerOrgId: 'o-a1b2c3d4e5',
      vpcId: 'vpc-0123456789abcdef0',
      keyRegions: 'mars',
    };

    // Act
    const act = () => buildApp(newApp({ bundle: false, context }));

    // Assess
    expect(act).toThrow(
      /^Invalid settings of the stack in mars \(-c KEY=VALUE or cdk.json\):\n- vpcId needs vpcSubnetIds: .*\n- callerOrgId needs api=rest: .*\n- webAclArn needs api=rest: .*\n- keyRegions entries must be regions like eu-west-1, got "mars"\n- webAclArn is in eu-west-1, but the stack deploys to mars.*$/,
    );
  });

  it('says that -c throttleRateLimit=-1 must be above 0, not that it is no number', () => {
    const act = () => buildApp(newApp({ bundle: false, context: { throttleRateLimit: '-1' } }));

    expect(act).toThrow('throttleRateLimit must be a number of requests per second above 0, got -1');
  });
});
