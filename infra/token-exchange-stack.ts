import { Annotations, type CfnElement, CfnOutput, CfnResource, Stack } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { JWKS_PATH } from '../lambda/request/routes';
import { ALARM_THRESHOLD_DEFAULTS, type AlarmThresholds } from './alarms';
import { consoleUrl } from './console-links';
import { CustomDomain } from './custom-domain';
import { egressRules, FunctionNetwork, warnOfUnreachableEntries } from './function-network';
import { HttpTokenApi } from './http-token-api';
import { logicalIdWithoutGroupings } from './logical-ids';
import { Monitoring } from './monitoring';
import { tagResources } from './resource-tags';
import { RestTokenApi } from './rest-token-api';
import { isOpenRelayByAccident, OPEN_RELAY_REFUSAL, type Settings, type TokenExchangeStackProps, validateSettings } from './stack-settings';
import { STORED_CREDENTIALS_FILE_PATH, StoredCredentials } from './stored-credentials';
import type { TokenApi } from './token-api';
import { TokenCachePepper } from './token-cache-pepper';
import { TokenCacheTable } from './token-cache-table';
import { type FunctionGrant, TokenFunction } from './token-function';

export {
  CALLER_AUTHORIZATIONS,
  type CallerAuthorization,
  OPEN_RELAY_REFUSAL,
  TOKEN_EXCHANGE_DEFAULTS,
  type TokenExchangeStackProps,
  TRACING_MODES,
  type TracingMode,
} from './stack-settings';
export { FUNCTION_RUNTIME } from './token-function';

/** CloudFormation takes at most this many resources in one stack. */
const MAX_RESOURCES = 500;

/**
 * The token exchange service: one arm64 Node.js function behind an API Gateway HTTP API or REST API,
 * with what the settings add around it. The constructor is the list of parts, each a construct that
 * owns its resources and grants.
 */
export class TokenExchangeStack extends Stack {
  /** The API's base URL (the stage's, or the custom domain's), ending with `/`. */
  public readonly apiUrl: string;
  public readonly tokenFunction: TokenFunction;
  public readonly handler: TokenFunction['handler'];
  public readonly api: TokenApi;
  /** With `tokenCache: 'shared'`: the table every instance shares. */
  public readonly tokenCacheTable?: TokenCacheTable;
  /** With `tokenCache: 'shared'`: the secret pepper mixed into the table's item keys. */
  public readonly tokenCachePepper?: TokenCachePepper;
  /** With `storedCredentials`: their keys, their grants and the function's packaged file. */
  public readonly storedCredentials?: StoredCredentials;
  /** With `vpcId`: the function's subnets and security groups. */
  public readonly network?: FunctionNetwork;
  /** With `domainName`: the API's own name. */
  public readonly customDomain?: CustomDomain;
  public readonly monitoring?: Monitoring;

  constructor(scope: Construct, id: string, props: TokenExchangeStackProps = {}) {
    super(scope, id, props);
    const settings = validateSettings(props, {
      deployable: this.bundlingRequired,
      stackName: this.stackName,
      region: this.region,
      partition: this.partition,
    });
    this.warnOfWhatSynthCannotCheck(settings);

    if (settings.tokenCache === 'shared') {
      this.tokenCacheTable = new TokenCacheTable(this, 'TokenCache', { kmsKeyArn: settings.tokenCacheKmsKeyArn });
      this.tokenCachePepper = new TokenCachePepper(this, 'TokenCachePepper', { removalPolicy: this.tokenCacheTable.removalPolicy });
    }
    if (settings.storedCredentials?.length) {
      this.storedCredentials = new StoredCredentials(this, 'StoredCredentials', {
        credentials: settings.storedCredentials,
        stackName: this.stackName,
        region: this.region,
        keys: settings.keys,
      });
    }
    if (settings.vpcId !== undefined) {
      this.network = new FunctionNetwork(this, 'Network', {
        vpcId: settings.vpcId,
        subnetIds: settings.vpcSubnetIds ?? [],
        securityGroupIds: settings.vpcSecurityGroupIds,
        egress: egressRules(settings.allowlist, this.tokenCacheTable !== undefined || this.storedCredentials !== undefined),
      });
    }

    this.tokenFunction = new TokenFunction(this, 'Function', {
      environment: this.functionEnvironment(settings),
      memorySize: settings.memorySize,
      timeout: settings.functionTimeout,
      reservedConcurrency: settings.reservedConcurrency,
      tracing: settings.tracing === 'active',
      logRetention: settings.logRetention,
      grants: this.functionGrants(),
      packagedFile: this.storedCredentials?.stagedFile,
    });
    this.handler = this.tokenFunction.handler;
    this.network?.attach(this.handler);
    if (this.storedCredentials) {
      this.storedCredentials.letSign(this.tokenFunction.role);
      // The function reads its keys' public halves as it starts: not before the keys and aliases exist.
      this.handler.node.addDependency(this.storedCredentials);
    }

    this.api = this.createApi(settings);
    if (settings.domainName !== undefined) {
      this.customDomain = new CustomDomain(this, 'CustomDomain', {
        api: this.api,
        domainName: settings.domainName,
        certificateArn: settings.certificateArn as string,
        hostedZoneId: settings.hostedZoneId,
      });
    }
    if (settings.monitoring) this.monitoring = this.createMonitoring(settings);

    this.apiUrl = this.customDomain?.url ?? this.api.url;
    this.addOutputs(settings);
    tagResources(this, props.tags ?? {});
    this.node.addValidation({ validate: () => this.resourceCountProblems() });
  }

  /** Resources moved into constructs of their own keep the logical ids deployed stacks know them by. */
  protected override allocateLogicalId(element: CfnElement): string {
    return logicalIdWithoutGroupings(this, element) ?? super.allocateLogicalId(element);
  }

  /** The contract's configuration variables, and the metrics' namespace (or their absence). Never `DEBUG`. */
  private functionEnvironment(settings: Settings): Record<string, string> {
    const table = this.tokenCacheTable;
    const pepper = this.tokenCachePepper;
    return {
      TOKEN_URL_ALLOWLIST: settings.allowedTokenUrls.join(','),
      UPSTREAM_TIMEOUT_MS: String(settings.upstreamTimeoutMs),
      TOKEN_CACHE: settings.tokenCache,
      ...(table && pepper ? { TOKEN_CACHE_TABLE: table.table.tableName, TOKEN_CACHE_PEPPER_SECRET: pepper.secret.secretArn } : {}),
      ...(this.storedCredentials ? { STORED_CREDENTIALS_FILE: STORED_CREDENTIALS_FILE_PATH } : {}),
      LOG_LEVEL: settings.logLevel,
      POWERTOOLS_METRICS_NAMESPACE: settings.metricsNamespace,
      // Without monitoring nothing reads the custom metrics, which CloudWatch bills as long as they are published.
      ...(settings.monitoring ? {} : { POWERTOOLS_METRICS_DISABLED: 'true' }),
      ...(settings.sourceMapStackTraces ? { NODE_OPTIONS: '--enable-source-maps' } : {}),
    };
  }

  /** What each part lets the function do. */
  private functionGrants(): FunctionGrant[] {
    const grants: FunctionGrant[] = [];
    if (this.tokenCacheTable && this.tokenCachePepper) {
      grants.push({
        duty: 'reads and writes items of its token cache table, reads the cache pepper',
        inlinePolicies: {
          UseTokenCacheTable: this.tokenCacheTable.accessStatements(),
          ReadTokenCachePepper: this.tokenCachePepper.accessStatements(),
        },
      });
    }
    if (this.storedCredentials) {
      grants.push({ duty: "uses its stored credentials' keys and secrets", managedPolicies: this.storedCredentials.accessPolicies });
    }
    if (this.network) grants.push(this.network.functionGrant());
    return grants;
  }

  private createApi(settings: Settings): TokenApi {
    const common = {
      handler: this.handler,
      callerAuthorization: settings.callerAuthorization,
      throttle: { rateLimit: settings.throttleRateLimit, burstLimit: settings.throttleBurstLimit },
      logRetention: settings.logRetention,
      disableExecuteApiEndpoint: settings.disableExecuteApiEndpoint,
      servesJwks: this.storedCredentials?.publishesKeys ?? false,
    };
    const { api } = settings;
    if (api.kind === 'http') return new HttpTokenApi(this, 'HttpApi', { ...common, corsOrigins: settings.corsOrigins });
    return new RestTokenApi(this, 'RestApi', { ...common, ...api, tracing: settings.tracing === 'active' });
  }

  private createMonitoring(settings: Settings): Monitoring {
    const monitoring = new Monitoring(this, 'Monitoring', {
      metricsNamespace: settings.metricsNamespace,
      handler: this.handler,
      api: this.api.metrics,
      functionLogs: this.tokenFunction.logs,
      accessLogs: this.api.accessLogs,
      tokenCache: settings.tokenCache,
      callerAuthorization: settings.callerAuthorization,
      table: this.tokenCacheTable?.table,
      thresholds: alarmThresholds(settings),
      alarmEmail: settings.alarmEmail,
      alarmTopicArn: settings.alarmTopicArn,
    });
    this.storedCredentials?.addToDashboard(monitoring.dashboard, settings.metricsNamespace);
    return monitoring;
  }

  private addOutputs(settings: Settings): void {
    const kind = this.api.kind === 'http' ? 'HTTP' : 'REST';
    new CfnOutput(this, 'ApiUrl', { value: this.apiUrl, description: `Base URL of the ${kind} API` });
    new CfnOutput(this, 'TokenEndpointV1', { value: `${this.apiUrl}v1/oauth/token`, description: 'POST client credentials here' });
    new CfnOutput(this, 'TokenEndpoint', { value: `${this.apiUrl}oauth/token`, description: 'Same operation, unversioned path' });
    if (this.storedCredentials?.publishesKeys) {
      new CfnOutput(this, 'JwksUrl', {
        value: `${this.apiUrl}${JWKS_PATH.slice(1)}`,
        description: 'Register keyless clients at the IdP by this JWKS URL',
      });
    }
    if (settings.callerAuthorization === 'iam') {
      new CfnOutput(this, 'InvokeResources', {
        value: this.api.invokeArns.join(','),
        description: 'Route ARNs a caller needs execute-api:Invoke on (comma-separated)',
      });
    }
    if (this.monitoring) {
      new CfnOutput(this, 'DashboardUrl', {
        value: consoleUrl(this, `cloudwatch/home?region=${this.region}#dashboards/dashboard/${this.monitoring.dashboard.dashboardName}`),
        description: "The service's CloudWatch dashboard",
      });
    }
  }

  /** What synth cannot refuse, because it may be what the deployment wants: said once, as warnings. */
  private warnOfWhatSynthCannotCheck(settings: Settings): void {
    if (!this.bundlingRequired && isOpenRelayByAccident(settings)) {
      // Loaded by a CDK command that deploys nothing of this stack (bootstrap, ls, flags, destroy...):
      // no token URL choice is needed to answer it. The assembly it leaves behind still says no, so a
      // `cdk deploy --app cdk.out` of it stops with the refusal.
      Annotations.of(this).addError(OPEN_RELAY_REFUSAL);
    }
    if (settings.vpcId === undefined) warnOfUnreachableEntries(this, settings.allowlist);
    const createsKeys = settings.storedCredentials?.some((credential) => credential.key === 'kms') ?? false;
    if (createsKeys && settings.hostedZoneId !== undefined && settings.keys.kind === 'single-region') {
      Annotations.of(this).addWarningV2(
        'token-exchange:keys-of-one-region-behind-a-shared-name',
        `hostedZoneId writes a latency record, so ${settings.domainName} can serve several regions; without keyRegions each region creates keys of its own, and one JWKS URL would publish a different key set in each: set keyRegions (docs/DEPLOY.md)`,
      );
    }
    const publishes = settings.storedCredentials?.some((credential) => credential.method === 'private_key_jwt') ?? false;
    if (publishes && settings.api.kind === 'rest' && settings.api.endpoint.type === 'private') {
      Annotations.of(this).addWarningV2(
        'token-exchange:jwks-only-inside',
        'endpoint=private: the JWKS URL answers only through the VPC endpoints, so an IdP outside your network cannot fetch it; register those clients by their public key instead (docs/CREDENTIALS.md)',
      );
    }
  }

  private resourceCountProblems(): string[] {
    const count = this.node.findAll().filter((construct) => CfnResource.isCfnResource(construct)).length;
    return count > MAX_RESOURCES
      ? [
          `TokenExchangeStack: the template holds ${count} resources and CloudFormation takes ${MAX_RESOURCES}: fewer stored credentials with key "kms" (each is a key and an alias)`,
        ]
      : [];
  }
}

/** The alarm thresholds given, over their defaults; the latency alarm's follows the upstream deadline. */
function alarmThresholds(settings: Settings): Required<AlarmThresholds> {
  return {
    ...ALARM_THRESHOLD_DEFAULTS,
    latencyP99Ms: Math.max(1, Math.floor(settings.upstreamTimeoutMs / 2)),
    ...Object.fromEntries(Object.entries(settings.alarmThresholds ?? {}).filter(([, value]) => value !== undefined)),
  };
}
