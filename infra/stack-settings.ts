import { Duration, type StackProps, Token } from 'aws-cdk-lib';
import { RetentionDays } from 'aws-cdk-lib/aws-logs';
import {
  CONFIG_DEFAULTS,
  LOG_LEVELS,
  type LogLevel,
  MAX_UPSTREAM_TIMEOUT_MS,
  TOKEN_CACHE_MODES,
  type TokenCacheMode,
} from '../lambda/config';
import { type AllowlistEntry, parseAllowlist } from '../lambda/policy/token-url-policy';
import { type AlarmThresholds } from './alarms';
import { type KeyPlacement } from './credential-keys';
import { customDomainProblems } from './custom-domain';
import { namesPrivateAddress, networkSettingProblems } from './function-network';
import { type CallerAuthorization } from './http-token-api';
import { monitoringSettingProblems } from './monitoring';
import { REGION_NAME, arnPlace, type RegionalArn, regionProblems } from './regions';
import { tagProblems } from './resource-tags';
import { type AdmittedCallers, type EndpointType, type RestEndpoint, restApiSettingProblems } from './rest-token-api';
import { InvalidSettingsError, type SettingName, type SettingProblem } from './setting-problems';
import { credentialRegionalArns, type StoredCredentialProps, storedCredentialProblems } from './stored-credentials';
import { type ApiKind, INTEGRATION_LIMITS } from './token-api';

export type { CallerAuthorization } from './http-token-api';
export const CALLER_AUTHORIZATIONS: readonly CallerAuthorization[] = ['none', 'iam'];

/** Lambda's X-Ray tracing of the function (and with a REST API, of its stage): none, or a trace of every invocation. */
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
   * `http`: an API Gateway HTTP API, always on the internet. `rest`: a REST API, which can be
   * private (`endpoint`), admit other accounts (`callerAccounts`, `callerOrgId`) and sit behind AWS
   * WAF (`webAclArn`). The same routes and answers on both.
   * @default 'http'
   */
  readonly api?: ApiKind;
  /**
   * With `api: 'rest'`: `regional` (reached from the internet) or `private` (only through the
   * `execute-api` interface VPC endpoints of `vpcEndpointIds`).
   * @default 'regional'
   */
  readonly endpoint?: EndpointType;
  /**
   * With `endpoint: 'private'`: the `execute-api` interface VPC endpoints callers come through; the
   * resource policy refuses every other way in.
   * @default - none; required with endpoint private
   */
  readonly vpcEndpointIds?: readonly string[];
  /**
   * With `api: 'rest'` and `callerAuthorization: 'iam'`: other accounts whose IAM principals the
   * resource policy admits to the token routes (each still needs its own `execute-api:Invoke`).
   * @default - the stack's account only
   */
  readonly callerAccounts?: readonly string[];
  /**
   * With `api: 'rest'` and `callerAuthorization: 'iam'`: an AWS Organization (`o-...`) whose
   * accounts' IAM principals the resource policy admits (`aws:PrincipalOrgID`).
   * @default - none
   */
  readonly callerOrgId?: string;
  /**
   * With `api: 'rest'`: a regional AWS WAF web ACL of the stack's region, associated with the stage.
   * @default - none
   */
  readonly webAclArn?: string;
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
   * (egress to the allowlist's ports and addresses only, and 443 when it calls AWS).
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
   * overhead) and the role may write traces; a REST API's stage is traced too.
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
   * With `tokenCache: 'shared'`: ARN of a customer-managed KMS key of the stack's region to encrypt the table at rest.
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
   * contract's 504 rather than a Lambda timeout) and under the API's integration limit (HTTP 30 s, REST 29 s).
   * @default Duration.seconds(10)
   */
  readonly functionTimeout?: Duration;
  /**
   * Steady-state requests per second allowed on the stage before API Gateway answers 429.
   * @default 50
   */
  readonly throttleRateLimit?: number;
  /**
   * Burst (token bucket size) allowed on the stage, a whole number of requests.
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
   * Origins allowed to call the HTTP API from a browser (`https://app.example.com`, or `*` alone);
   * the HTTP API then answers CORS preflights itself.
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
   * docs/CREDENTIALS.md), packaged with the function as a file. Needs `callerAuthorization: 'iam'`. A
   * credential with `key: 'kms'` gets a KMS signing key, whose public key the unauthenticated
   * `GET /.well-known/jwks.json` serves.
   * @default - none
   */
  readonly storedCredentials?: readonly StoredCredentialProps[];
  /**
   * The regions the service runs in, this stack's among them (its region must be known at synth):
   * each key the stack creates is then a multi-Region key, primary in the first region, replicated
   * in the others, so every region signs under the same `kid` and publishes the same JWKS.
   * @default - keys of this region only
   */
  readonly keyRegions?: readonly string[];
  /**
   * In a stack of a later region of `keyRegions`: the primary key of each credential with
   * `key: 'kms'`, by credential name (the first region's stack's `storedCredentials.createdKeyArns`,
   * or the ARNs themselves).
   * @default - none; required in every region but the first
   */
  readonly primaryKeyArns?: Readonly<Record<string, string>>;
}

/** The values the stack uses for props left out. */
export const TOKEN_EXCHANGE_DEFAULTS = {
  allowedTokenUrls: [] as readonly string[],
  allowAnyPublicTokenUrl: false,
  allowCleartextTokenUrls: false,
  api: 'http' as ApiKind,
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

/** The props that become the API's and the keys' shapes below. */
type ShapedSetting =
  'api' | 'endpoint' | 'vpcEndpointIds' | 'callerAccounts' | 'callerOrgId' | 'webAclArn' | 'keyRegions' | 'primaryKeyArns';

/** Which API fronts the function, and with REST, its endpoint, whom its policy admits and its web ACL. */
export type ApiSettings =
  | { readonly kind: 'http' }
  | { readonly kind: 'rest'; readonly endpoint: RestEndpoint; readonly admitted: AdmittedCallers; readonly webAclArn?: string };

/** The settings, checked: every default filled in, the API and the keys' placement as one value each. */
export type Settings = Required<Omit<TokenExchangeStackProps, keyof StackProps | OptionalSetting | ShapedSetting>> &
  Pick<TokenExchangeStackProps, OptionalSetting> & {
    readonly api: ApiSettings;
    readonly keys: KeyPlacement;
    /** The allowlist as the function parses it. */
    readonly allowlist: readonly AllowlistEntry[];
  };

/** What the stack knows of itself that the settings are checked against. */
export interface StackFacts {
  /** Whether the template is built to be deployed (see validateSettings). */
  readonly deployable: boolean;
  readonly stackName: string;
  /** The stack's region and partition: tokens when the stack is environment-agnostic. */
  readonly region: string;
  readonly partition: string;
}

const RETENTION_DAYS: readonly number[] = Object.values(RetentionDays).filter((value): value is number => typeof value === 'number');
const KMS_KEY_ARN = /^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key\/[A-Za-z0-9-]+$/;
const MULTI_REGION_KEY_ARN = /^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key\/mrk-[0-9a-f]{32}$/;
// CloudWatch's rule for namespaces: 1-255 of these characters, not starting with `AWS/`.
const METRICS_NAMESPACE = /^(?!AWS\/)(?=.*\S)[A-Za-z0-9.\-_/#: ]{1,255}$/;

/**
 * Check every setting; return them with the defaults filled in and the API and keys shaped, or throw
 * one error listing each problem, naming the props (the app words them as the context keys typed).
 * The token URL choice is required only when the template is built to be deployed (`deployable`).
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
export function validateSettings(props: TokenExchangeStackProps, facts: StackFacts): Settings {
  const given = { ...TOKEN_EXCHANGE_DEFAULTS, ...withoutUndefined(props) } as Required<Omit<TokenExchangeStackProps, keyof StackProps>>;
  const problems: SettingProblem[] = [];
  const check = (ok: boolean, problem: SettingProblem) => {
    if (!ok) problems.push(problem);
  };
  const { upstreamTimeoutMs, functionTimeout } = given;
  const functionTimeoutMs = functionTimeout.toMilliseconds();

  check(
    Number.isInteger(upstreamTimeoutMs) && upstreamTimeoutMs >= 1 && upstreamTimeoutMs <= MAX_UPSTREAM_TIMEOUT_MS,
    `upstreamTimeoutMs must be a whole number from 1 to ${MAX_UPSTREAM_TIMEOUT_MS}, got ${upstreamTimeoutMs}`,
  );
  // In seconds, as -c functionTimeoutSeconds sets it.
  const functionTimeoutSeconds = functionTimeoutMs / 1000;
  check(functionTimeoutMs % 1000 === 0, (name) => `${name('functionTimeout')} must be whole seconds, got ${functionTimeoutSeconds} s`);
  const integration = INTEGRATION_LIMITS[given.api] ?? INTEGRATION_LIMITS.http;
  check(
    functionTimeoutMs < integration.limit.toMilliseconds(),
    (name) => `${name('functionTimeout')} must be under ${integration.words}, got ${functionTimeoutSeconds} s`,
  );
  check(
    functionTimeoutMs > upstreamTimeoutMs,
    (name) =>
      `${name('functionTimeout')} (${functionTimeoutSeconds} s) must be longer than upstreamTimeoutMs (${upstreamTimeoutMs} ms), or a slow IdP ends in a Lambda timeout instead of a 504`,
  );
  check(
    Number.isInteger(given.memorySize) && given.memorySize >= 128 && given.memorySize <= 10_240,
    `memorySize must be a whole number of MiB from 128 to 10240, got ${given.memorySize}`,
  );
  check(
    Number.isFinite(given.throttleRateLimit) && given.throttleRateLimit > 0,
    `throttleRateLimit must be a number of requests per second above 0, got ${given.throttleRateLimit}`,
  );
  check(
    Number.isInteger(given.throttleBurstLimit) && given.throttleBurstLimit >= 1,
    `throttleBurstLimit must be a whole number of at least 1, got ${given.throttleBurstLimit}`,
  );
  check(
    RETENTION_DAYS.includes(given.logRetention),
    (name) => `${name('logRetention')} must be one of ${RETENTION_DAYS.join(', ')} days, got ${given.logRetention}`,
  );
  if (props.reservedConcurrency !== undefined) {
    check(
      Number.isInteger(props.reservedConcurrency) && props.reservedConcurrency >= 1,
      `reservedConcurrency must be a whole number of at least 1 when set, got ${props.reservedConcurrency}`,
    );
  }
  check(
    (LOG_LEVELS as readonly string[]).includes(given.logLevel),
    `logLevel must be one of ${LOG_LEVELS.join(', ')}, got ${given.logLevel}`,
  );
  check(
    METRICS_NAMESPACE.test(given.metricsNamespace),
    `metricsNamespace must be 1-255 letters, digits, spaces or . - _ / # : and not start with AWS/, got "${given.metricsNamespace}"`,
  );
  check(
    CALLER_AUTHORIZATIONS.includes(given.callerAuthorization),
    `callerAuthorization must be one of ${CALLER_AUTHORIZATIONS.join(', ')}, got ${given.callerAuthorization}`,
  );
  check(TRACING_MODES.includes(given.tracing), `tracing must be one of ${TRACING_MODES.join(', ')}, got ${given.tracing}`);
  problems.push(...tokenUrlChoiceProblems(given).filter((problem) => facts.deployable || problem !== OPEN_RELAY_REFUSAL));
  check(
    (TOKEN_CACHE_MODES as readonly string[]).includes(given.tokenCache),
    `tokenCache must be one of ${TOKEN_CACHE_MODES.join(', ')}, got ${given.tokenCache}`,
  );
  if (props.tokenCacheKmsKeyArn !== undefined) {
    check(given.tokenCache === 'shared', `tokenCacheKmsKeyArn needs tokenCache 'shared', got ${given.tokenCache}`);
    check(
      KMS_KEY_ARN.test(props.tokenCacheKmsKeyArn),
      `tokenCacheKmsKeyArn must be a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID), got "${props.tokenCacheKmsKeyArn}"`,
    );
  }
  problems.push(...monitoringSettingProblems(given));
  const allowlist = allowlistOrProblems(given.allowedTokenUrls, given.allowCleartextTokenUrls, problems);
  if (props.corsOrigins !== undefined) problems.push(...corsProblems(props.corsOrigins));
  problems.push(...networkSettingProblems(props));
  problems.push(...customDomainProblems({ ...props, disableExecuteApiEndpoint: given.disableExecuteApiEndpoint }));
  problems.push(...restApiSettingProblems(given, facts.partition));
  if (given.api === 'rest' && props.endpoint === 'private' && props.domainName !== undefined) {
    problems.push(
      (name) =>
        `${name('domainName')} needs ${name('endpoint')}=regional: a private API's own name is a private custom domain, which this stack does not create (callers use the VPC endpoint's names)`,
    );
  }
  const keys = keyPlacement(props, facts.region, problems);
  problems.push(
    ...storedCredentialProblems(props.storedCredentials ?? [], {
      callerAuthorization: given.callerAuthorization,
      allowlist,
      place: { stackName: facts.stackName, region: facts.region, keys },
    }),
  );
  problems.push(...regionProblems(regionalArns(props, keys), facts.region));
  problems.push(...tagProblems(props.tags ?? {}));

  if (problems.length > 0) throw new InvalidSettingsError(problems);
  const { api, endpoint, vpcEndpointIds, callerAccounts, callerOrgId, webAclArn, keyRegions: _, primaryKeyArns: __, ...flat } = given;
  return {
    ...flat,
    api:
      api === 'rest'
        ? {
            kind: 'rest',
            endpoint:
              endpoint === 'private' ? { type: 'private', vpcEndpointIds: vpcEndpointIds as readonly string[] } : { type: 'regional' },
            admitted: { accounts: [...new Set(callerAccounts ?? [])], orgId: callerOrgId },
            webAclArn,
          }
        : { kind: 'http' },
    keys,
    allowlist: allowlist ?? [],
  };
}

/** The region-bound ARNs among the settings: each must be of the stack's region. */
function regionalArns(props: TokenExchangeStackProps, keys: KeyPlacement): RegionalArn[] {
  const named = (prop: 'certificateArn' | 'tokenCacheKmsKeyArn' | 'webAclArn'): RegionalArn[] => {
    const arn = props[prop];
    return arn === undefined ? [] : [{ label: (name: SettingName) => name(prop), arn }];
  };
  return [
    ...named('certificateArn'),
    ...named('tokenCacheKmsKeyArn'),
    ...named('webAclArn'),
    ...credentialRegionalArns(props.storedCredentials ?? [], keys),
  ];
}

/**
 * Where the keys the stack creates live. With `keyRegions`, the stack must know its region (one of
 * them); the first region's stack makes the primaries, each other one replicates them from the
 * `primaryKeyArns` it is given.
 */
function keyPlacement(
  { keyRegions, primaryKeyArns, storedCredentials }: TokenExchangeStackProps,
  region: string,
  problems: SettingProblem[],
): KeyPlacement {
  if (keyRegions === undefined) {
    if (primaryKeyArns !== undefined) problems.push((name) => `${name('primaryKeyArns')} needs ${name('keyRegions')}`);
    return { kind: 'single-region' };
  }
  const regions = [...keyRegions];
  if (regions.length === 0) problems.push((name) => `${name('keyRegions')} must list at least one region when set`);
  for (const entry of regions.filter((entry) => !REGION_NAME.test(entry))) {
    problems.push((name) => `${name('keyRegions')} entries must be regions like eu-west-1, got "${entry}"`);
  }
  if (new Set(regions).size !== regions.length) problems.push((name) => `${name('keyRegions')} names a region twice`);
  if (Token.isUnresolved(region)) {
    problems.push(
      (name) => `${name('keyRegions')} needs the stack's region known at synth (env.region): each region's stack is built for it`,
    );
    return { kind: 'primary', regions };
  }
  if (!regions.includes(region)) problems.push((name) => `${name('keyRegions')} must include the stack's region, ${region}`);
  if (regions[0] === region || regions.length === 0) {
    if (primaryKeyArns !== undefined) {
      problems.push((name) => `${name('primaryKeyArns')} is for the stacks of the later regions: ${region} holds the primary keys`);
    }
    return { kind: 'primary', regions };
  }
  const primaries = primaryKeyArns ?? {};
  for (const { name: credential } of (storedCredentials ?? []).filter((entry) => entry?.key === 'kms')) {
    const arn = primaries[credential];
    if (arn === undefined) {
      problems.push((name) => `${name('primaryKeyArns')} must name the primary key of "${credential}" (created in ${regions[0]})`);
    } else if (!Token.isUnresolved(arn) && !(MULTI_REGION_KEY_ARN.test(arn) && arnPlace(arn)?.region === regions[0])) {
      problems.push(
        (name) => `${name('primaryKeyArns')} of "${credential}" must be a multi-Region key (key/mrk-...) in ${regions[0]}, got "${arn}"`,
      );
    }
  }
  return { kind: 'replica', regions, primaryKeyArns: primaries };
}

/** Neither an allowlist nor the explicit opt-in to any public https token URL. */
export function isOpenRelayByAccident({
  allowedTokenUrls,
  allowAnyPublicTokenUrl,
}: Pick<Settings, 'allowedTokenUrls' | 'allowAnyPublicTokenUrl'>): boolean {
  return allowedTokenUrls.length === 0 && !allowAnyPublicTokenUrl;
}

/** An empty allowlist posts secrets to any public https URL a caller names: only when asked to, explicitly. */
function tokenUrlChoiceProblems(settings: Pick<Settings, 'allowedTokenUrls' | 'allowAnyPublicTokenUrl'>): string[] {
  if (isOpenRelayByAccident(settings)) return [OPEN_RELAY_REFUSAL];
  if (settings.allowedTokenUrls.length > 0 && settings.allowAnyPublicTokenUrl) {
    return ['allowAnyPublicTokenUrl=true contradicts allowedTokenUrls: keep the list, or drop it to accept any public https token URL'];
  }
  return [];
}

/** Why synth stops with neither an allowlist nor the explicit opt-in, and the two ways forward. */
export const OPEN_RELAY_REFUSAL =
  'allowedTokenUrls is empty, so the function would post client secrets to any public https URL a caller names. ' +
  "Either list the IdPs it may call (-c 'allowedTokenUrls=https://login.example.com,https://*.auth0.com'), " +
  'or accept any public https token URL explicitly (-c allowAnyPublicTokenUrl=true)';

/** The allowlist as the function parses it, or undefined with its problems added. */
function allowlistOrProblems(
  entries: readonly string[],
  allowCleartext: boolean,
  problems: SettingProblem[],
): AllowlistEntry[] | undefined {
  const before = problems.length;
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
  return problems.length === before ? parseAllowlist(entries.join(',')) : undefined;
}

/** http to anything but a loopback or private literal: secrets would cross networks nobody here controls, unencrypted. */
function sendsSecretsInCleartext(entry: AllowlistEntry): boolean {
  return entry.protocol === 'http:' && !namesPrivateAddress(entry);
}

function corsProblems(origins: readonly string[]): string[] {
  if (origins.length === 0) return ['corsOrigins must list at least one origin when set (leave it out for no CORS)'];
  if (origins.includes('*')) return origins.length === 1 ? [] : ['corsOrigins: "*" must be the only origin'];
  return origins
    .filter((origin) => !isOrigin(origin))
    .map((origin) => `corsOrigins entries must be origins like https://app.example.com, got "${origin}"`);
}

function isOrigin(value: string): boolean {
  try {
    const url = new URL(value);
    return (url.protocol === 'https:' || url.protocol === 'http:') && url.origin === value;
  } catch {
    return false;
  }
}

function withoutUndefined<T extends object>(props: T): Partial<T> {
  return Object.fromEntries(Object.entries(props).filter(([, value]) => value !== undefined)) as Partial<T>;
}
