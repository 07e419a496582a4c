import * as path from 'node:path';
import { Annotations, CfnOutput, Duration, Stack, type StackProps, Token, Validations } from 'aws-cdk-lib';
import { AccessLogFormat } from 'aws-cdk-lib/aws-apigateway';
import {
  CorsHttpMethod,
  HttpApi,
  HttpMethod,
  type HttpRoute,
  HttpStage,
  LogGroupLogDestination,
  PayloadFormatVersion,
} from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpIamAuthorizer } from 'aws-cdk-lib/aws-apigatewayv2-authorizers';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import { PolicyDocument, PolicyStatement, Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { Architecture, type CfnFunction, Runtime, Tracing } from 'aws-cdk-lib/aws-lambda';
import { LogLevel as EsbuildLogLevel, NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { Construct } from 'constructs';
import {
  CONFIG_DEFAULTS,
  LOG_LEVELS,
  type LogLevel,
  loadConfig,
  MAX_UPSTREAM_TIMEOUT_MS,
  TOKEN_CACHE_MODES,
  type TokenCacheMode,
} from '../lambda/config';
import { JWKS_PATH, TOKEN_PATHS } from '../lambda/request/routes';
import { type AllowlistEntry, parseAllowlist } from '../lambda/policy/token-url-policy';
import { LAMBDA_ENTRY, lambdaBuildOptions } from './bundling';
import { ALARM_THRESHOLD_DEFAULTS, type AlarmThresholds } from './alarms';
import { consoleUrl } from './console-links';
import { CustomDomain, customDomainProblems } from './custom-domain';
import { egressPorts, FunctionNetwork, namesPrivateAddress, networkSettingProblems, warnOfUnreachableEntries } from './function-network';
import { Monitoring, monitoringSettingProblems } from './monitoring';
import { tagProblems, tagResources } from './resource-tags';
import { InvalidSettingsError, type SettingProblem } from './setting-problems';
import { type StoredCredentialProps, storedCredentialProblems, StoredCredentials } from './stored-credentials';
import { TokenCachePepper } from './token-cache-pepper';
import { TokenCacheTable } from './token-cache-table';

/**
 * The function's runtime: the newest Node.js this aws-cdk-lib offers, which is also what cdk-nag's
 * AwsSolutions-L1 demands. Fixed (not `NODEJS_LATEST`) so an aws-cdk-lib upgrade never changes the
 * runtime of a deployed function behind our back.
 */
export const FUNCTION_RUNTIME = Runtime.NODEJS_24_X;

/** API Gateway answers 503 after 30 s whatever the function does, so the function must finish first. */
export const HTTP_API_INTEGRATION_LIMIT = Duration.seconds(30);

/** Who may call the token routes: anyone who can reach them, or SigV4-signed IAM principals. */
export type CallerAuthorization = 'none' | 'iam';
export const CALLER_AUTHORIZATIONS: readonly CallerAuthorization[] = ['none', 'iam'];

/** Lambda's X-Ray tracing of the function: none, or a trace of every invocation. */
export type TracingMode = 'off' | 'active';
export const TRACING_MODES: readonly TracingMode[] = ['off', 'active'];

/**
 * Everything a deployment can tune. All optional but one choice: which token URLs the function may
 * post secrets to (`allowedTokenUrls`, or `allowAnyPublicTokenUrl: true`).
 */
export interface TokenExchangeStackProps extends StackProps {
  /**
   * Token URL allowlist entries (`https://login.example.com`, `https://*.auth0.com`,
   * `https://idp.example.com/oauth2/`), set as `TOKEN_URL_ALLOWLIST` joined with commas. Required
   * unless `allowAnyPublicTokenUrl` is true: the stack refuses to be an open relay by accident.
   * @default [] - refused unless allowAnyPublicTokenUrl is true
   */
  readonly allowedTokenUrls?: readonly string[];
  /**
   * Accept, explicitly, any public https URL a caller names as its token URL (an empty
   * `TOKEN_URL_ALLOWLIST`): the function then posts client secrets wherever its callers say. Only
   * without `allowedTokenUrls`.
   * @default false
   */
  readonly allowAnyPublicTokenUrl?: boolean;
  /**
   * Accept `allowedTokenUrls` entries that send client secrets in cleartext: `http` to a host that
   * is not a loopback or private address literal. Without it, such an entry stops synth.
   * @default false
   */
  readonly allowCleartextTokenUrls?: boolean;
  /**
   * A VPC of yours to run the function in (with `vpcSubnetIds`): to reach an IdP inside your
   * network, or to leave from a fixed address through a NAT gateway.
   * @default - Lambda's own network: the internet only
   */
  readonly vpcId?: string;
  /**
   * With `vpcId`: the subnets the function runs in, private ones, in two or more availability zones.
   * @default - none; required with vpcId
   */
  readonly vpcSubnetIds?: readonly string[];
  /**
   * With `vpcId`: existing security groups for the function, instead of the one the stack creates
   * (egress to the allowlist's ports and 443 only).
   * @default - a security group of the stack's
   */
  readonly vpcSecurityGroupIds?: readonly string[];
  /**
   * A name of yours for the API (`auth.example.com`), with `certificateArn`.
   * @default - only the execute-api address
   */
  readonly domainName?: string;
  /**
   * With `domainName`: an ACM certificate for it, in the stack's region.
   * @default - none; required with domainName
   */
  readonly certificateArn?: string;
  /**
   * With `domainName`: the public Route 53 hosted zone it belongs to, where the stack writes its
   * alias record (latency-routed, one per region).
   * @default - no record: point the name at the `DomainTarget` output yourself
   */
  readonly hostedZoneId?: string;
  /**
   * Turn off the default `execute-api` address, so callers come only through `domainName`.
   * @default false
   */
  readonly disableExecuteApiEndpoint?: boolean;
  /**
   * `active`: Lambda records an X-Ray trace of every invocation (its initialisation, invocation and
   * overhead) and the role may write traces.
   * @default 'off'
   */
  readonly tracing?: TracingMode;
  /**
   * `none`: anyone who can reach the API may call it (the IdP judges the credentials). `iam`: both
   * routes take only SigV4-signed requests from principals allowed `execute-api:Invoke` on them.
   * @default 'none'
   */
  readonly callerAuthorization?: CallerAuthorization;
  /**
   * Deadline of the whole token request to the IdP, connect to last byte (`UPSTREAM_TIMEOUT_MS`), 1 to 29000.
   * @default 5000
   */
  readonly upstreamTimeoutMs?: number;
  /**
   * Reuse an unexpired token for identical requests (`TOKEN_CACHE`): `memory` within one function
   * instance; `shared` also across all instances, through a DynamoDB table the stack creates.
   * @default 'off'
   */
  readonly tokenCache?: TokenCacheMode;
  /**
   * With `tokenCache: 'shared'`: ARN of a customer-managed KMS key to encrypt the table at rest.
   * @default - an AWS owned key
   */
  readonly tokenCacheKmsKeyArn?: string;
  /**
   * Level of the structured JSON logs (`LOG_LEVEL`); no level ever logs a secret, token or body.
   * @default 'INFO'
   */
  readonly logLevel?: LogLevel;
  /**
   * CloudWatch namespace of the function's EMF metrics (`POWERTOOLS_METRICS_NAMESPACE`).
   * @default 'TokenExchange'
   */
  readonly metricsNamespace?: string;
  /**
   * Function memory in MiB, 128 to 10240. CPU share grows with it, and TLS handshakes are CPU-bound.
   * @default 256
   */
  readonly memorySize?: number;
  /**
   * Function timeout, whole seconds: longer than `upstreamTimeoutMs` (so a slow IdP gets the
   * contract's 504 rather than a Lambda timeout) and under the HTTP API's 30 s integration limit.
   * @default Duration.seconds(10)
   */
  readonly functionTimeout?: Duration;
  /**
   * Steady-state requests per second allowed on the `$default` stage before API Gateway answers 429.
   * @default 50
   */
  readonly throttleRateLimit?: number;
  /**
   * Burst (token bucket size) allowed on the `$default` stage, a whole number of requests.
   * @default 100
   */
  readonly throttleBurstLimit?: number;
  /**
   * Retention of the function's log group and of the API's access log group.
   * @default RetentionDays.ONE_MONTH
   */
  readonly logRetention?: RetentionDays;
  /**
   * Reserved concurrency of the function: a ceiling on parallel exchanges (and on the load put on
   * the IdPs) that also guarantees that much capacity.
   * @default - none: the function shares the account's unreserved concurrency
   */
  readonly reservedConcurrency?: number;
  /**
   * Origins allowed to call the API from a browser (`https://app.example.com`, or `*` alone); the
   * HTTP API then answers CORS preflights itself.
   * @default - no CORS: the API is for servers, browsers cannot call it cross-origin
   */
  readonly corsOrigins?: readonly string[];
  /**
   * Set `NODE_OPTIONS=--enable-source-maps` so stack traces point into the TypeScript sources. Off by
   * default: the service never logs a stack, and it costs cold-start time and memory on every start.
   * The source map ships in the asset either way.
   * @default false
   */
  readonly sourceMapStackTraces?: boolean;
  /**
   * A CloudWatch dashboard, alarms and saved Logs Insights queries for the service
   * (docs/OPERATIONS.md). Off leaves them out, and then no alarm setting is accepted.
   * @default true
   */
  readonly monitoring?: boolean;
  /**
   * Where the alarms go: the stack creates an SNS topic encrypted with a key of its own and subscribes
   * this address (AWS mails a confirmation first). Not with `alarmTopicArn`.
   * @default - no topic: the alarms show in CloudWatch only
   */
  readonly alarmEmail?: string;
  /**
   * An existing SNS topic every alarm notifies, when it fires and when it is OK again. Its policy (and
   * its KMS key, if encrypted) must let CloudWatch publish. Not with `alarmEmail`.
   * @default - no topic: the alarms show in CloudWatch only
   */
  readonly alarmTopicArn?: string;
  /**
   * When each alarm fires; each one left out takes its default.
   * @default - see AlarmThresholds
   */
  readonly alarmThresholds?: AlarmThresholds;
  /**
   * OAuth clients the service holds, which IAM callers get tokens of by name (`-c credentialsFile=PATH`,
   * docs/CREDENTIALS.md). Needs `callerAuthorization: 'iam'`. A credential with `key: 'kms'` gets a KMS
   * signing key, whose public key the unauthenticated `GET /.well-known/jwks.json` serves.
   * @default - none
   */
  readonly storedCredentials?: readonly StoredCredentialProps[];
}

/** The values the stack uses for props left out. */
export const TOKEN_EXCHANGE_DEFAULTS = {
  allowedTokenUrls: [] as readonly string[],
  allowAnyPublicTokenUrl: false,
  allowCleartextTokenUrls: false,
  disableExecuteApiEndpoint: false,
  tracing: 'off' as TracingMode,
  callerAuthorization: 'none' as CallerAuthorization,
  upstreamTimeoutMs: CONFIG_DEFAULTS.upstreamTimeoutMs,
  tokenCache: CONFIG_DEFAULTS.tokenCache as TokenCacheMode,
  logLevel: CONFIG_DEFAULTS.logLevel as LogLevel,
  metricsNamespace: 'TokenExchange',
  memorySize: 256,
  functionTimeout: Duration.seconds(10),
  throttleRateLimit: 50,
  throttleBurstLimit: 100,
  logRetention: RetentionDays.ONE_MONTH,
  sourceMapStackTraces: false,
  monitoring: true,
} as const;

/** The props that have no default value: left out, they are absent. */
type OptionalSetting =
  | 'reservedConcurrency'
  | 'corsOrigins'
  | 'tokenCacheKmsKeyArn'
  | 'alarmEmail'
  | 'alarmTopicArn'
  | 'alarmThresholds'
  | 'vpcId'
  | 'vpcSubnetIds'
  | 'vpcSecurityGroupIds'
  | 'domainName'
  | 'certificateArn'
  | 'hostedZoneId'
  | 'storedCredentials';
type Settings = Required<Omit<TokenExchangeStackProps, keyof StackProps | OptionalSetting>> &
  Pick<TokenExchangeStackProps, OptionalSetting>;

/**
 * The token exchange service: one arm64 Node.js function behind an API Gateway HTTP API with the
 * two token routes, JSON access logs and default-route throttling.
 */
export class TokenExchangeStack extends Stack {
  /** The `$default` stage's URL, ending with `/`. */
  public readonly apiUrl: string;
  public readonly handler: NodejsFunction;
  /** With `tokenCache: 'shared'`: the table every instance shares. */
  public readonly tokenCacheTable?: TokenCacheTable;
  /** With `tokenCache: 'shared'`: the secret pepper mixed into the table's item keys. */
  public readonly tokenCachePepper?: TokenCachePepper;
  /** With `vpcId`: the function's subnets and security groups. */
  public readonly network?: FunctionNetwork;
  /** With `domainName`: the API's own name. */
  public readonly customDomain?: CustomDomain;
  /** With `storedCredentials`: their keys, their grants and the function's STORED_CREDENTIALS. */
  public readonly storedCredentials?: StoredCredentials;

  constructor(scope: Construct, id: string, props: TokenExchangeStackProps = {}) {
    super(scope, id, props);
    const tags = props.tags ?? {};
    const settings = validateSettings({ ...TOKEN_EXCHANGE_DEFAULTS, ...withoutUndefined(props) }, this.bundlingRequired, this.region, tags);
    const allowlist = parseAllowlist(settings.allowedTokenUrls.join(','));
    if (!this.bundlingRequired && isOpenRelayByAccident(settings)) {
      // Loaded by a CDK command that deploys nothing of this stack (bootstrap, ls, flags, destroy...):
      // no token URL choice is needed to answer it. The assembly it leaves behind still says no, so a
      // `cdk deploy --app cdk.out` of it stops with the refusal.
      Annotations.of(this).addError(OPEN_RELAY_REFUSAL);
    }
    if (settings.tokenCache === 'shared') {
      this.tokenCacheTable = new TokenCacheTable(this, 'TokenCache', { kmsKeyArn: settings.tokenCacheKmsKeyArn });
      this.tokenCachePepper = new TokenCachePepper(this, 'TokenCachePepper', { removalPolicy: this.tokenCacheTable.removalPolicy });
    }
    if (settings.storedCredentials?.length) {
      this.storedCredentials = new StoredCredentials(this, 'StoredCredentials', { credentials: settings.storedCredentials });
    }
    const environment = {
      ...functionEnvironment(
        settings,
        this.tokenCacheTable &&
          this.tokenCachePepper && {
            tableName: this.tokenCacheTable.table.tableName,
            pepperSecretArn: this.tokenCachePepper.secret.secretArn,
          },
      ),
      ...(this.storedCredentials ? { STORED_CREDENTIALS: this.storedCredentials.variable } : {}),
    };
    assertFunctionWouldStart(environment);
    if (settings.vpcId !== undefined) {
      this.network = new FunctionNetwork(this, 'Network', {
        vpcId: settings.vpcId,
        subnetIds: settings.vpcSubnetIds ?? [],
        securityGroupIds: settings.vpcSecurityGroupIds,
        egressPorts: egressPorts(allowlist),
      });
    } else {
      warnOfUnreachableEntries(this, allowlist);
    }

    const functionLogs = new LogGroup(this, 'FunctionLogs', { retention: settings.logRetention });
    // Instead of AWSLambdaBasicExecutionRole (logs:CreateLogGroup and writes to every group in the
    // account): the function may only write to its own log group.
    const role = new Role(this, 'FunctionRole', {
      assumedBy: new ServicePrincipal('lambda.amazonaws.com'),
      description: `Token exchange function: writes its own logs, ${
        [
          ...(this.tokenCacheTable ? ['reads and writes items of its token cache table, reads the cache pepper'] : []),
          ...(this.storedCredentials ? ["uses its stored credentials' keys and secrets"] : []),
          ...(this.network ? ['manages its network interfaces in its VPC'] : []),
          ...(settings.tracing === 'active' ? ['writes X-Ray traces'] : []),
        ].join(', ') || 'nothing else'
      }`,
      inlinePolicies: {
        WriteOwnLogs: new PolicyDocument({
          statements: [
            new PolicyStatement({ actions: ['logs:CreateLogStream', 'logs:PutLogEvents'], resources: [functionLogs.logGroupArn] }),
          ],
        }),
        ...(this.tokenCacheTable
          ? { UseTokenCacheTable: new PolicyDocument({ statements: this.tokenCacheTable.accessStatements() }) }
          : {}),
        ...(this.tokenCachePepper
          ? { ReadTokenCachePepper: new PolicyDocument({ statements: this.tokenCachePepper.accessStatements() }) }
          : {}),
        ...(this.network ? { UseVpcNetworkInterfaces: new PolicyDocument({ statements: this.network.accessStatements() }) } : {}),
        ...(this.storedCredentials
          ? { UseStoredCredentials: new PolicyDocument({ statements: this.storedCredentials.accessStatements() }) }
          : {}),
      },
    });

    this.handler = new NodejsFunction(this, 'TokenFunction', {
      description: 'OAuth 2.0 client-credentials token exchange',
      entry: LAMBDA_ENTRY,
      handler: 'handler',
      projectRoot: PROJECT_ROOT,
      depsLockFilePath: path.join(PROJECT_ROOT, 'package-lock.json'),
      runtime: FUNCTION_RUNTIME,
      architecture: Architecture.ARM_64,
      memorySize: settings.memorySize,
      timeout: settings.functionTimeout,
      role,
      logGroup: functionLogs,
      environment,
      reservedConcurrentExecutions: settings.reservedConcurrency,
      bundling: bundlingOptions(),
      tracing: settings.tracing === 'active' ? Tracing.ACTIVE : undefined,
    });
    this.network?.attach(this.handler);
    acknowledgeGrantsOnAnyResource(role, [
      ...(this.network ? [FunctionNetwork.DESCRIBE_ON_ANY_RESOURCE] : []),
      ...(settings.tracing === 'active' ? [TRACE_WRITES_ON_ANY_RESOURCE] : []),
    ]);

    const accessLogs = new LogGroup(this, 'AccessLogs', { retention: settings.logRetention });
    const api = new HttpApi(this, 'Api', {
      apiName: this.stackName,
      description: 'OAuth 2.0 client-credentials token exchange',
      createDefaultStage: false,
      disableExecuteApiEndpoint: settings.disableExecuteApiEndpoint,
      corsPreflight: settings.corsOrigins && {
        allowOrigins: [...settings.corsOrigins],
        allowMethods: [CorsHttpMethod.POST],
        allowHeaders: corsAllowedHeaders(settings.callerAuthorization),
        maxAge: Duration.hours(1),
      },
    });
    const stage = new HttpStage(this, 'DefaultStage', {
      httpApi: api,
      stageName: '$default',
      autoDeploy: true,
      throttle: { rateLimit: settings.throttleRateLimit, burstLimit: settings.throttleBurstLimit },
      accessLogSettings: { destination: new LogGroupLogDestination(accessLogs), format: accessLogFormat(settings.callerAuthorization) },
    });
    if (settings.domainName !== undefined) {
      this.customDomain = new CustomDomain(this, 'CustomDomain', {
        api,
        stage,
        domainName: settings.domainName,
        certificateArn: settings.certificateArn as string,
        hostedZoneId: settings.hostedZoneId,
      });
    }

    const integration = new HttpLambdaIntegration('TokenIntegration', this.handler, {
      payloadFormatVersion: PayloadFormatVersion.VERSION_2_0,
    });
    // IAM: API Gateway checks the SigV4 signature and the caller's execute-api:Invoke permission
    // before the function runs; an unsigned or unpermitted request gets its 403 and costs nothing.
    const authorizer = settings.callerAuthorization === 'iam' ? new HttpIamAuthorizer() : undefined;
    for (const routePath of TOKEN_PATHS) api.addRoutes({ path: routePath, methods: [HttpMethod.POST], integration, authorizer });
    if (this.storedCredentials?.publishesKeys) {
      const [jwksRoute] = api.addRoutes({ path: JWKS_PATH, methods: [HttpMethod.GET], integration });
      this.storedCredentials.acknowledgePublicJwksRoute(jwksRoute as HttpRoute);
    }

    if (settings.monitoring) {
      const monitoring = new Monitoring(this, 'Monitoring', {
        metricsNamespace: settings.metricsNamespace,
        handler: this.handler,
        api,
        functionLogs,
        accessLogs,
        tokenCache: settings.tokenCache,
        callerAuthorization: settings.callerAuthorization,
        table: this.tokenCacheTable?.table,
        thresholds: alarmThresholds(settings),
        alarmEmail: settings.alarmEmail,
        alarmTopicArn: settings.alarmTopicArn,
      });
      this.storedCredentials?.addToDashboard(monitoring.dashboard, settings.metricsNamespace);
      new CfnOutput(this, 'DashboardUrl', {
        value: consoleUrl(this, `cloudwatch/home?region=${this.region}#dashboards/dashboard/${monitoring.dashboard.dashboardName}`),
        description: "The service's CloudWatch dashboard",
      });
    }

    this.apiUrl = this.customDomain?.url ?? stage.url;
    new CfnOutput(this, 'ApiUrl', { value: this.apiUrl, description: 'Base URL of the HTTP API' });
    new CfnOutput(this, 'TokenEndpointV1', { value: `${this.apiUrl}v1/oauth/token`, description: 'POST client credentials here' });
    new CfnOutput(this, 'TokenEndpoint', { value: `${this.apiUrl}oauth/token`, description: 'Same operation, unversioned path' });
    if (this.storedCredentials?.publishesKeys) {
      new CfnOutput(this, 'JwksUrl', {
        value: `${this.apiUrl}${JWKS_PATH.slice(1)}`,
        description: 'Register keyless clients at the IdP by this JWKS URL',
      });
    }
    if (authorizer) {
      new CfnOutput(this, 'InvokeResources', {
        value: TOKEN_PATHS.map((routePath) => api.arnForExecuteApi('POST', routePath, stage.stageName)).join(','),
        description: 'Route ARNs a caller needs execute-api:Invoke on (comma-separated)',
      });
    }

    tagResources(this, tags);
    if (!authorizer) acknowledgePublicRoutes(api);
    // The environment can still grow after construction (addEnvironment, an aspect): check what is
    // synthesized, so a NODE_DEBUG that would print secrets, or any setting the function would
    // refuse, never reaches a deploy.
    this.node.addValidation({
      validate: () => functionStartProblems(this.resolve((this.handler.node.defaultChild as CfnFunction).environment)),
    });
  }
}

const PROJECT_ROOT = path.join(__dirname, '..');

/**
 * One JSON object per request: who called which route, what came back, and what the function and
 * API Gateway reported; with IAM callers, the principal API Gateway verified. No headers, query or
 * body, so nothing a caller sent can leak into the logs.
 */
function accessLogFormat(callerAuthorization: CallerAuthorization): AccessLogFormat {
  const caller =
    callerAuthorization === 'iam' ? { callerArn: '$context.identity.userArn', callerAccountId: '$context.identity.accountId' } : {};
  return AccessLogFormat.custom(JSON.stringify({ ...ACCESS_LOG_FIELDS, ...caller }));
}

const ACCESS_LOG_FIELDS = {
  requestId: '$context.requestId',
  requestTime: '$context.requestTime',
  sourceIp: '$context.identity.sourceIp',
  userAgent: '$context.identity.userAgent',
  protocol: '$context.protocol',
  httpMethod: '$context.httpMethod',
  routeKey: '$context.routeKey',
  status: '$context.status',
  responseLength: '$context.responseLength',
  responseLatency: '$context.responseLatency',
  integrationStatus: '$context.integration.status',
  integrationLatency: '$context.integration.latency',
  integrationError: '$context.integration.error',
  errorMessage: '$context.error.message',
};

/**
 * NodejsFunction's bundling, derived from `lambdaBuildOptions` so the deployed bundle is the one the
 * benchmarks and bundle tests build. Local esbuild only: synth never needs Docker.
 */
function bundlingOptions() {
  const esbuild = lambdaBuildOptions('index.js');
  return {
    forceDockerBundling: false,
    format: esbuild.format === 'cjs' ? OutputFormat.CJS : OutputFormat.ESM,
    target: esbuild.target,
    minify: esbuild.minify,
    sourceMap: esbuild.sourcemap,
    // Nothing external: the function calls AWS through lambda/aws/, not the SDK (NodejsFunction would leave `@aws-sdk/*` out).
    externalModules: [],
    logLevel: EsbuildLogLevel.WARNING,
    // The alias keeps `debug` (and so `DEBUG=simple-oauth2*`, which prints the Basic header) out of the bundle.
    esbuildArgs: Object.fromEntries(Object.entries(esbuild.alias).map(([name, target]) => [`--alias:${name}`, target])),
  };
}

/** The contract's configuration variables, and the metrics' namespace (or their absence). Never `DEBUG`. */
function functionEnvironment(
  settings: Settings,
  sharedCache: { tableName: string; pepperSecretArn: string } | undefined,
): Record<string, string> {
  return {
    TOKEN_URL_ALLOWLIST: settings.allowedTokenUrls.join(','),
    UPSTREAM_TIMEOUT_MS: String(settings.upstreamTimeoutMs),
    TOKEN_CACHE: settings.tokenCache,
    ...(sharedCache === undefined
      ? {}
      : { TOKEN_CACHE_TABLE: sharedCache.tableName, TOKEN_CACHE_PEPPER_SECRET: sharedCache.pepperSecretArn }),
    LOG_LEVEL: settings.logLevel,
    POWERTOOLS_METRICS_NAMESPACE: settings.metricsNamespace,
    // Without monitoring nothing reads the custom metrics, which CloudWatch bills as long as they are published.
    ...(settings.monitoring ? {} : { POWERTOOLS_METRICS_DISABLED: 'true' }),
    ...(settings.sourceMapStackTraces ? { NODE_OPTIONS: '--enable-source-maps' } : {}),
  };
}

/** Refuse at synth what the function would refuse at its start: a deploy that can only fail. */
function assertFunctionWouldStart(environment: Record<string, string>): void {
  const [problem] = functionStartProblems({ variables: environment });
  if (problem !== undefined) throw new Error(problem);
}

function functionStartProblems(environment: { variables?: Record<string, unknown> } | undefined): string[] {
  try {
    // A value CloudFormation fills in at deploy (the table's name) is a token until then: check a
    // valid stand-in for it.
    const variables = Object.fromEntries(
      Object.entries(environment?.variables ?? {}).map(([name, value]) => [
        name,
        typeof value === 'string' && !Token.isUnresolved(value) ? value : 'resolved-at-deploy',
      ]),
    );
    loadConfig(variables);
    return [];
  } catch (error) {
    return [`TokenExchangeStack: the function would not start: ${(error as Error).message}`];
  }
}

/** The alarm thresholds given, over their defaults; the latency alarm's follows the upstream deadline. */
function alarmThresholds(settings: Settings): Required<AlarmThresholds> {
  return {
    ...ALARM_THRESHOLD_DEFAULTS,
    latencyP99Ms: Math.max(1, Math.floor(settings.upstreamTimeoutMs / 2)),
    ...withoutUndefined(settings.alarmThresholds ?? {}),
  };
}

function withoutUndefined<T extends object>(props: T): Partial<T> {
  return Object.fromEntries(Object.entries(props).filter(([, value]) => value !== undefined)) as Partial<T>;
}

const RETENTION_DAYS: readonly number[] = Object.values(RetentionDays).filter((value): value is number => typeof value === 'number');
const KMS_KEY_ARN = /^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key\/[A-Za-z0-9-]+$/;
// CloudWatch's rule for namespaces: 1-255 of these characters, not starting with `AWS/`.
const METRICS_NAMESPACE = /^(?!AWS\/)(?=.*\S)[A-Za-z0-9.\-_/#: ]{1,255}$/;

/**
 * Check every setting; throws one error listing each problem with the prop's name. The token URL
 * choice is required only when the template is built to be deployed (`bundlingRequired`).
 *
 * Why `Stack.bundlingRequired` tells the commands apart: the CDK CLI runs the app for every command
 * that needs the stacks, and the only thing it tells the app about the command is the context key
 * `aws:cdk:bundling-stacks`: `["**"]` (or the stacks named with `--exclusively`) for synth, deploy,
 * diff, watch, import, publish-assets and refactor, `[]` for all the others (bootstrap, ls, flags,
 * destroy, metadata, gc...). Its environment (CDK_OUTDIR, CDK_CONTEXT_JSON, CDK_DEFAULT_REGION...)
 * is the same for all. `bundlingRequired` is aws-cdk-lib's own reading of that key for this stack
 * (glob patterns included) and the one that decides whether the function is built at all; run without
 * the CLI (`tsx infra/app.ts`, a test) it is true, so the refusal is the default.
 */
function validateSettings(
  settings: Settings,
  templateIsDeployable: boolean,
  region: string,
  tags: Readonly<Record<string, string>>,
): Settings {
  const problems: SettingProblem[] = [];
  const check = (ok: boolean, problem: SettingProblem) => {
    if (!ok) problems.push(problem);
  };
  const { upstreamTimeoutMs, functionTimeout } = settings;
  const functionTimeoutMs = functionTimeout.toMilliseconds();

  check(
    Number.isInteger(upstreamTimeoutMs) && upstreamTimeoutMs >= 1 && upstreamTimeoutMs <= MAX_UPSTREAM_TIMEOUT_MS,
    `upstreamTimeoutMs must be a whole number from 1 to ${MAX_UPSTREAM_TIMEOUT_MS}, got ${upstreamTimeoutMs}`,
  );
  // In seconds, as -c functionTimeoutSeconds sets it.
  const functionTimeoutSeconds = functionTimeoutMs / 1000;
  check(functionTimeoutMs % 1000 === 0, (name) => `${name('functionTimeout')} must be whole seconds, got ${functionTimeoutSeconds} s`);
  check(
    functionTimeoutMs < HTTP_API_INTEGRATION_LIMIT.toMilliseconds(),
    (name) => `${name('functionTimeout')} must be under the HTTP API's 30 s integration limit, got ${functionTimeoutSeconds} s`,
  );
  check(
    functionTimeoutMs > upstreamTimeoutMs,
    (name) =>
      `${name('functionTimeout')} (${functionTimeoutSeconds} s) must be longer than upstreamTimeoutMs (${upstreamTimeoutMs} ms), or a slow IdP ends in a Lambda timeout instead of a 504`,
  );
  check(
    Number.isInteger(settings.memorySize) && settings.memorySize >= 128 && settings.memorySize <= 10_240,
    `memorySize must be a whole number of MiB from 128 to 10240, got ${settings.memorySize}`,
  );
  check(
    Number.isFinite(settings.throttleRateLimit) && settings.throttleRateLimit > 0,
    `throttleRateLimit must be a number of requests per second above 0, got ${settings.throttleRateLimit}`,
  );
  check(
    Number.isInteger(settings.throttleBurstLimit) && settings.throttleBurstLimit >= 1,
    `throttleBurstLimit must be a whole number of at least 1, got ${settings.throttleBurstLimit}`,
  );
  check(
    RETENTION_DAYS.includes(settings.logRetention),
    (name) => `${name('logRetention')} must be one of ${RETENTION_DAYS.join(', ')} days, got ${settings.logRetention}`,
  );
  if (settings.reservedConcurrency !== undefined) {
    check(
      Number.isInteger(settings.reservedConcurrency) && settings.reservedConcurrency >= 1,
      `reservedConcurrency must be a whole number of at least 1 when set, got ${settings.reservedConcurrency}`,
    );
  }
  check(
    (LOG_LEVELS as readonly string[]).includes(settings.logLevel),
    `logLevel must be one of ${LOG_LEVELS.join(', ')}, got ${settings.logLevel}`,
  );
  check(
    METRICS_NAMESPACE.test(settings.metricsNamespace),
    `metricsNamespace must be 1-255 letters, digits, spaces or . - _ / # : and not start with AWS/, got "${settings.metricsNamespace}"`,
  );
  check(
    CALLER_AUTHORIZATIONS.includes(settings.callerAuthorization),
    `callerAuthorization must be one of ${CALLER_AUTHORIZATIONS.join(', ')}, got ${settings.callerAuthorization}`,
  );
  check(TRACING_MODES.includes(settings.tracing), `tracing must be one of ${TRACING_MODES.join(', ')}, got ${settings.tracing}`);
  problems.push(...tokenUrlChoiceProblems(settings).filter((problem) => templateIsDeployable || problem !== OPEN_RELAY_REFUSAL));
  check(
    (TOKEN_CACHE_MODES as readonly string[]).includes(settings.tokenCache),
    `tokenCache must be one of ${TOKEN_CACHE_MODES.join(', ')}, got ${settings.tokenCache}`,
  );
  if (settings.tokenCacheKmsKeyArn !== undefined) {
    check(settings.tokenCache === 'shared', `tokenCacheKmsKeyArn needs tokenCache 'shared', got ${settings.tokenCache}`);
    check(
      KMS_KEY_ARN.test(settings.tokenCacheKmsKeyArn),
      `tokenCacheKmsKeyArn must be a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID), got "${settings.tokenCacheKmsKeyArn}"`,
    );
  }
  problems.push(...monitoringSettingProblems(settings));
  problems.push(...storedCredentialProblems(settings.storedCredentials ?? [], settings.callerAuthorization));
  problems.push(...allowlistProblems(settings.allowedTokenUrls, settings.allowCleartextTokenUrls));
  if (settings.corsOrigins !== undefined) problems.push(...corsProblems(settings.corsOrigins));
  problems.push(...networkSettingProblems(settings));
  problems.push(...customDomainProblems(settings, region));
  problems.push(...tagProblems(tags));

  if (problems.length > 0) throw new InvalidSettingsError(problems);
  return settings;
}

/** Neither an allowlist nor the explicit opt-in to any public https token URL. */
function isOpenRelayByAccident({ allowedTokenUrls, allowAnyPublicTokenUrl }: Settings): boolean {
  return allowedTokenUrls.length === 0 && !allowAnyPublicTokenUrl;
}

/** An empty allowlist posts secrets to any public https URL a caller names: only when asked to, explicitly. */
function tokenUrlChoiceProblems(settings: Settings): string[] {
  const { allowedTokenUrls, allowAnyPublicTokenUrl } = settings;
  if (isOpenRelayByAccident(settings)) return [OPEN_RELAY_REFUSAL];
  if (allowedTokenUrls.length > 0 && allowAnyPublicTokenUrl) {
    return ['allowAnyPublicTokenUrl=true contradicts allowedTokenUrls: keep the list, or drop it to accept any public https token URL'];
  }
  return [];
}

/** Why synth stops with neither an allowlist nor the explicit opt-in, and the two ways forward. */
export const OPEN_RELAY_REFUSAL =
  'allowedTokenUrls is empty, so the function would post client secrets to any public https URL a caller names. ' +
  "Either list the IdPs it may call (-c 'allowedTokenUrls=https://login.example.com,https://*.auth0.com'), " +
  'or accept any public https token URL explicitly (-c allowAnyPublicTokenUrl=true)';

function allowlistProblems(entries: readonly string[], allowCleartext: boolean): SettingProblem[] {
  const problems: SettingProblem[] = [];
  const cleartext: AllowlistEntry[] = [];
  for (const entry of entries) {
    if (entry.trim() === '' || entry.includes(',')) {
      problems.push(`allowedTokenUrls entries must be non-empty and contain no comma, got "${entry}"`);
      continue;
    }
    try {
      cleartext.push(...parseAllowlist(entry).filter(sendsSecretsInCleartext));
    } catch (error) {
      problems.push(`allowedTokenUrls: ${(error as Error).message.replace(/^Environment variable TOKEN_URL_ALLOWLIST has /, '')}`);
    }
  }
  if (!allowCleartext) {
    for (const { text } of cleartext) {
      problems.push(
        (name) =>
          `${name('allowedTokenUrls')} entry "${text}" would send client secrets in cleartext over the network: use https, or say ${name('allowCleartextTokenUrls')}=true on purpose`,
      );
    }
  } else if (cleartext.length === 0) {
    problems.push(
      (name) => `${name('allowCleartextTokenUrls')}=true needs an http entry in ${name('allowedTokenUrls')} that is not a private address`,
    );
  }
  return problems;
}

/** http to anything but a loopback or private literal: secrets would cross networks nobody here controls, unencrypted. */
function sendsSecretsInCleartext(entry: AllowlistEntry): boolean {
  return entry.protocol === 'http:' && !namesPrivateAddress(entry);
}

const TRACE_WRITES_ON_ANY_RESOURCE =
  'tracing=active: X-Ray takes trace segments and telemetry only with Resource "*" (those actions have no resource types); the role writes traces and reads none.';

/** The role's grants on `*`, each there because its actions name no resource: cdk-nag is told why, once. */
function acknowledgeGrantsOnAnyResource(role: Role, reasons: readonly string[]): void {
  if (reasons.length === 0) return;
  Validations.of(role).acknowledge({ id: 'AwsSolutions-IAM5[Resource::*]', reason: reasons.join(' ') });
}

function corsProblems(origins: readonly string[]): string[] {
  if (origins.length === 0) return ['corsOrigins must list at least one origin when set (leave it out for no CORS)'];
  if (origins.includes('*')) return origins.length === 1 ? [] : ['corsOrigins: "*" must be the only origin'];
  return origins
    .filter((origin) => !isOrigin(origin))
    .map((origin) => `corsOrigins entries must be origins like https://app.example.com, got "${origin}"`);
}

/**
 * Request headers a browser may send cross-origin: the body's content type, and with IAM callers the
 * SigV4 headers a signing browser client adds (its signature, date, session token and body hash).
 */
function corsAllowedHeaders(callerAuthorization: CallerAuthorization): string[] {
  const sigV4 = ['authorization', 'x-amz-date', 'x-amz-security-token', 'x-amz-content-sha256'];
  return callerAuthorization === 'iam' ? ['content-type', ...sigV4] : ['content-type'];
}

function isOrigin(value: string): boolean {
  try {
    const url = new URL(value);
    return (url.protocol === 'https:' || url.protocol === 'http:') && url.origin === value;
  } catch {
    return false;
  }
}

/** The AwsSolutions rule (cdk-nag) that cannot apply when the routes are public by choice, with its reason. */
function acknowledgePublicRoutes(api: HttpApi): void {
  Validations.of(api).acknowledge({
    id: 'AwsSolutions-APIG4',
    reason:
      'callerAuthorization is none: the token routes are the authentication step itself. Callers present OAuth client credentials in the body and the IdP judges them; callerAuthorization=iam puts SigV4 in front.',
  });
}
