import { readFileSync } from 'node:fs';
import { App, Duration, Validations } from 'aws-cdk-lib';
import type { RetentionDays } from 'aws-cdk-lib/aws-logs';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { LogLevel, TokenCacheMode } from '../lambda/config';
import { unknownContextKeyProblems } from './context-keys';
import { arnPlace } from './regions';
import type { EndpointType } from './rest-token-api';
import { InvalidSettingsError, type SettingName } from './setting-problems';
import type { StoredCredentialProps } from './stored-credentials';
import type { ApiKind } from './token-api';
import { type CallerAuthorization, TokenExchangeStack, type TokenExchangeStackProps, type TracingMode } from './token-exchange-stack';

/** How a context key is read (`-c key=value` gives strings, cdk.json may give JSON values). */
type ContextReader = (key: string) => unknown;

const DECIMAL = /^\s*[-+]?(\d+(\.\d*)?|\.\d+)\s*$/;

/**
 * The stack's props from CDK context, the only place the deployment is configured. Keys left out
 * take the stack's defaults. Throws a message naming the key for a value of the wrong shape; the
 * stack then checks ranges and combinations.
 */
export function propsFromContext(read: ContextReader): TokenExchangeStackProps {
  const value = (key: string): unknown => {
    const raw = read(key);
    return typeof raw === 'string' && raw.trim() === '' ? undefined : raw;
  };
  const text = (key: string): string | undefined => {
    const raw = value(key);
    if (raw === undefined) return undefined;
    if (typeof raw !== 'string') throw new Error(`Context key "${key}" must be a string, got ${JSON.stringify(raw)}`);
    return raw.trim();
  };
  const number = (key: string): number | undefined => {
    const raw = value(key);
    if (raw === undefined) return undefined;
    // Any decimal number, negative too: the stack's range check then says which values the setting takes.
    const parsed = typeof raw === 'number' ? raw : typeof raw === 'string' && DECIMAL.test(raw) ? Number(raw) : Number.NaN;
    if (Number.isNaN(parsed)) throw new Error(`Context key "${key}" must be a number, got ${JSON.stringify(raw)}`);
    return parsed;
  };
  const list = (key: string): string[] | undefined => {
    const raw = value(key);
    if (raw === undefined) return undefined;
    const items = Array.isArray(raw) ? raw : typeof raw === 'string' ? raw.split(',') : undefined;
    if (!items?.every((item) => typeof item === 'string')) {
      throw new Error(`Context key "${key}" must be a comma-separated string or an array of strings, got ${JSON.stringify(raw)}`);
    }
    return items.map((item) => item.trim()).filter((item) => item !== '');
  };
  const onOff = (key: string): boolean | undefined => {
    const raw = value(key);
    if (raw === undefined) return undefined;
    const normalized = String(raw).trim().toLowerCase();
    if (['on', 'true'].includes(normalized)) return true;
    if (['off', 'false'].includes(normalized)) return false;
    throw new Error(`Context key "${key}" must be on/off or true/false, got ${JSON.stringify(raw)}`);
  };

  // `-c tags=team=platform,cost-center=42`, or an object of strings in cdk.json.
  const tagMap = (key: string): Record<string, string> | undefined => {
    const raw = value(key);
    if (raw === undefined) return undefined;
    const pairs =
      typeof raw === 'string'
        ? raw
            .split(',')
            .filter((pair) => pair.trim() !== '')
            .map((pair) => {
              const at = pair.indexOf('=');
              if (at < 1)
                throw new Error(`Context key "${key}" must be key=value pairs separated by commas, got ${JSON.stringify(pair.trim())}`);
              return [pair.slice(0, at).trim(), pair.slice(at + 1).trim()];
            })
        : typeof raw === 'object' && raw !== null && !Array.isArray(raw) && Object.values(raw).every((item) => typeof item === 'string')
          ? Object.entries(raw as Record<string, string>)
          : undefined;
    if (pairs === undefined)
      throw new Error(
        `Context key "${key}" must be key=value pairs separated by commas, or an object of strings, got ${JSON.stringify(raw)}`,
      );
    return Object.fromEntries(pairs);
  };

  // `on`/`off` (and true/false) were this key's values before the shared tier: they keep their meaning.
  const cacheMode = (key: string): TokenCacheMode | undefined => {
    const raw = value(key);
    if (raw === undefined) return undefined;
    const normalized = String(raw).trim().toLowerCase();
    if (['memory', 'on', 'true'].includes(normalized)) return 'memory';
    if (['off', 'false'].includes(normalized)) return 'off';
    if (normalized === 'shared') return 'shared';
    throw new Error(`Context key "${key}" must be off, memory or shared (on and true mean memory), got ${JSON.stringify(raw)}`);
  };

  // A JSON file of stored credentials (docs/CREDENTIALS.md); the stack checks each entry.
  const credentialsFile = (key: string): StoredCredentialProps[] | undefined => {
    const path = text(key);
    if (path === undefined) return undefined;
    let entries: unknown;
    try {
      entries = JSON.parse(readFileSync(path, 'utf8'));
    } catch (error) {
      const why = (error as NodeJS.ErrnoException).code ?? 'it is not JSON';
      throw new Error(`Context key "${key}": cannot read the credentials file ${path} (${why})`);
    }
    if (!Array.isArray(entries))
      throw new Error(`Context key "${key}": the credentials file ${path} must hold a JSON array of credential entries`);
    return entries as StoredCredentialProps[];
  };

  const functionTimeoutSeconds = number('functionTimeoutSeconds');
  const alarmThresholds = withoutUndefined({
    functionErrors: number('alarmFunctionErrors'),
    functionThrottles: number('alarmFunctionThrottles'),
    serverErrorPercent: number('alarmServerErrorPercent'),
    idpFailurePercent: number('alarmIdpFailurePercent'),
    latencyP99Ms: number('alarmLatencyP99Ms'),
    internalErrors: number('alarmInternalErrors'),
    cacheErrors: number('alarmCacheErrors'),
    tableErrors: number('alarmTableErrors'),
    tableThrottles: number('alarmTableThrottles'),
    minRequests: number('alarmMinRequests'),
  });
  return {
    allowedTokenUrls: list('allowedTokenUrls'),
    allowAnyPublicTokenUrl: onOff('allowAnyPublicTokenUrl'),
    allowCleartextTokenUrls: onOff('allowCleartextTokenUrls'),
    callerAuthorization: text('callerAuthorization')?.toLowerCase() as CallerAuthorization | undefined,
    api: text('api')?.toLowerCase() as ApiKind | undefined,
    endpoint: text('endpoint')?.toLowerCase() as EndpointType | undefined,
    vpcEndpointIds: list('vpcEndpointIds'),
    callerAccounts: list('callerAccounts'),
    callerOrgId: text('callerOrgId'),
    webAclArn: text('webAclArn'),
    keyRegions: list('keyRegions'),
    upstreamTimeoutMs: number('upstreamTimeoutMs'),
    tokenCache: cacheMode('tokenCache'),
    tokenCacheKmsKeyArn: text('tokenCacheKmsKeyArn'),
    logLevel: text('logLevel')?.toUpperCase() as LogLevel | undefined,
    metricsNamespace: text('metricsNamespace'),
    memorySize: number('memorySize'),
    functionTimeout: functionTimeoutSeconds === undefined ? undefined : Duration.seconds(functionTimeoutSeconds),
    throttleRateLimit: number('throttleRateLimit'),
    throttleBurstLimit: number('throttleBurstLimit'),
    logRetention: number('logRetentionDays') as RetentionDays | undefined,
    reservedConcurrency: number('reservedConcurrency'),
    corsOrigins: list('corsOrigins'),
    sourceMapStackTraces: onOff('sourceMapStackTraces'),
    monitoring: onOff('monitoring'),
    alarmEmail: text('alarmEmail'),
    alarmTopicArn: text('alarmTopicArn'),
    alarmThresholds: Object.keys(alarmThresholds).length > 0 ? alarmThresholds : undefined,
    vpcId: text('vpcId'),
    vpcSubnetIds: list('vpcSubnetIds'),
    vpcSecurityGroupIds: list('vpcSecurityGroupIds'),
    domainName: text('domainName')?.toLowerCase(),
    certificateArn: text('certificateArn'),
    hostedZoneId: text('hostedZoneId'),
    disableExecuteApiEndpoint: onOff('disableExecuteApiEndpoint'),
    tracing: text('tracing')?.toLowerCase() as TracingMode | undefined,
    tags: tagMap('tags'),
    storedCredentials: credentialsFile('credentialsFile'),
  };
}

/** The context keys whose names differ from the props they set; the alarm thresholds follow one rule. */
const CONTEXT_KEY_OF_PROP: Readonly<Record<string, string>> = {
  logRetention: 'logRetentionDays',
  functionTimeout: 'functionTimeoutSeconds',
  storedCredentials: 'credentialsFile',
};

/** A prop as the user of `cdk synth -c KEY=...` names it: `alarmThresholds.functionErrors` is `alarmFunctionErrors`. */
export const contextKeyOf: SettingName = (prop) => {
  const threshold = /^alarmThresholds\.(\w)(\w*)$/.exec(prop);
  if (threshold) return `alarm${(threshold[1] as string).toUpperCase()}${threshold[2] as string}`;
  return CONTEXT_KEY_OF_PROP[prop] ?? prop;
};

function withoutUndefined<T extends object>(values: T): Partial<T> {
  return Object.fromEntries(Object.entries(values).filter(([, value]) => value !== undefined)) as Partial<T>;
}

/**
 * Every context key that is a setting of this app: the keys `propsFromContext` reads, found by
 * letting it read an empty context (so the list cannot drift from the reader), and `stackName`.
 */
export function settingContextKeys(): string[] {
  const keys = ['stackName'];
  propsFromContext((key) => {
    keys.push(key);
    return undefined;
  });
  return keys;
}

/** Settings whose values belong to one region: with several keyRegions, one of each per region, or none. */
const REGIONAL_ARN_KEYS = ['certificateArn', 'tokenCacheKmsKeyArn', 'webAclArn'] as const;
const REGIONAL_ID_KEYS = ['vpcId', 'vpcSubnetIds', 'vpcSecurityGroupIds', 'vpcEndpointIds'] as const;

/**
 * The CDK app: one stack, named by context `stackName`; with `keyRegions`, one per region (ids
 * `NAME-REGION`, each CloudFormation stack named NAME in its region), the first region's holding the
 * primary keys, which the others replicate by reading its outputs (so they deploy after it).
 * Every stack is checked against the AwsSolutions rules at every synth. A context key that is no
 * setting and not the CDK's stops it, naming the nearest setting.
 */
export function buildApp(app: App = new App()): [TokenExchangeStack, ...TokenExchangeStack[]] {
  const read: ContextReader = (key) => app.node.tryGetContext(key);
  const unknownKeys = unknownContextKeyProblems(Object.keys(app.node.getAllContext() as object), settingContextKeys());
  if (unknownKeys.length > 0) throw new Error(unknownKeys.join('\n'));
  const stackName = read('stackName') ?? 'TokenExchange';
  if (typeof stackName !== 'string') throw new Error(`Context key "stackName" must be a string, got ${JSON.stringify(stackName)}`);
  const props = {
    ...propsFromContext(read),
    description: 'OAuth 2.0 client-credentials token exchange (Lambda behind API Gateway)',
  };
  const account = process.env.CDK_DEPLOY_ACCOUNT || undefined;
  const regions = props.keyRegions;
  let stacks: [TokenExchangeStack, ...TokenExchangeStack[]];
  if (regions === undefined) {
    // Environment-agnostic unless pinned: nothing here looks anything up, so one template deploys to
    // whichever account and region `cdk deploy` targets. (CDK_DEFAULT_REGION would pin it to whatever
    // region synth happened to guess, us-east-1 without AWS configuration.)
    stacks = [
      named(
        '',
        () => new TokenExchangeStack(app, stackName, { ...props, env: { account, region: process.env.CDK_DEPLOY_REGION || undefined } }),
      ),
    ];
  } else {
    const problems = multiRegionProblems(props, regions);
    if (problems.length > 0) throw new Error(`Invalid settings (-c KEY=VALUE or cdk.json):\n- ${problems.join('\n- ')}`);
    const [primaryRegion, ...replicaRegions] = regions;
    const stackIn = (region: string, primaryKeyArns?: Readonly<Record<string, string>>) =>
      named(
        ` of the stack in ${region}`,
        () =>
          new TokenExchangeStack(app, `${stackName}-${region}`, {
            ...props,
            ...regionalArns(props, region),
            stackName,
            primaryKeyArns,
            env: { account, region },
          }),
      );
    const primary = stackIn(primaryRegion as string);
    const keyArns = primary.storedCredentials?.createdKeyArns ?? {};
    stacks = [primary, ...replicaRegions.map((region) => stackIn(region, Object.keys(keyArns).length > 0 ? keyArns : undefined))];
  }
  // cdk-nag 3 is a policy validation plugin: an unacknowledged finding fails synth, and so deploy.
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  return stacks;
}

/** Build a stack; a refusal names the context keys the user typed, not the props they became. */
function named(whose: string, build: () => TokenExchangeStack): TokenExchangeStack {
  try {
    return build();
  } catch (error) {
    if (error instanceof InvalidSettingsError) throw new Error(error.describe(`settings${whose} (-c KEY=VALUE or cdk.json)`, contextKeyOf));
    throw error;
  }
}

/**
 * With keyRegions every region's stack gets the same context. An ARN of one region is given once per
 * region (comma-separated) and each stack takes its own; an id of one region's network has no
 * counterpart elsewhere, so more than one region cannot share it.
 */
function multiRegionProblems(props: TokenExchangeStackProps, regions: readonly string[]): string[] {
  const problems: string[] = [];
  if (process.env.CDK_DEPLOY_REGION) {
    problems.push('CDK_DEPLOY_REGION pins one region, and keyRegions deploys a stack to each of its regions: unset one of them');
  }
  if (regions.length > 1) {
    for (const key of REGIONAL_ID_KEYS.filter((key) => props[key] !== undefined)) {
      problems.push(`${key} names a network of one region, and keyRegions deploys ${regions.length}: deploy such regions as separate apps`);
    }
  }
  return problems;
}

/** Each regional ARN setting as the one in `region` (or, if there is none, the first, which the stack then refuses by region). */
function regionalArns(props: TokenExchangeStackProps, region: string): Partial<TokenExchangeStackProps> {
  return Object.fromEntries(
    REGIONAL_ARN_KEYS.flatMap((key) => {
      const value = props[key];
      if (value === undefined) return [];
      const arns = value.split(',').map((arn) => arn.trim());
      return [[key, arns.find((arn) => arnPlace(arn)?.region === region) ?? arns[0]]];
    }),
  );
}

if (require.main === module) {
  try {
    const app = new App();
    buildApp(app);
    app.synth();
  } catch (error) {
    // A refused setting is a message for whoever runs `cdk synth`, not a stack trace to dig through.
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  }
}
