import * as path from 'node:path';
import { type Duration, Token, Validations } from 'aws-cdk-lib';
import { type IManagedPolicy, PolicyDocument, PolicyStatement, Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { Architecture, type CfnFunction, Runtime, Tracing } from 'aws-cdk-lib/aws-lambda';
import { LogLevel as EsbuildLogLevel, NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import { LogGroup, type RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { loadConfig } from '../lambda/config';
import { LAMBDA_ENTRY, lambdaBuildOptions } from './bundling';
import { keepLogicalIdsOfChildren } from './logical-ids';
import { STORED_CREDENTIALS_FILE_NAME } from './stored-credentials';

/**
 * The function's runtime: the newest Node.js this aws-cdk-lib offers, which is also what cdk-nag's
 * AwsSolutions-L1 demands. Fixed (not `NODEJS_LATEST`) so an aws-cdk-lib upgrade never changes the
 * runtime of a deployed function behind our back.
 */
export const FUNCTION_RUNTIME = Runtime.NODEJS_24_X;

/** Lambda refuses a function whose environment variables, names and values together, pass 4 KB. */
export const ENVIRONMENT_LIMIT_BYTES = 4096;

/**
 * What a part of the stack lets the function do: in the role's inline policies (by name), in managed
 * policies (grants too large for the role's inline limit), and in words, for the role's description.
 */
export interface FunctionGrant {
  readonly duty: string;
  readonly inlinePolicies?: Readonly<Record<string, readonly PolicyStatement[]>>;
  readonly managedPolicies?: readonly IManagedPolicy[];
  /** Why some of these grants are on `*` (actions that name no resource), for cdk-nag. */
  readonly onAnyResourceBecause?: string;
}

export interface TokenFunctionProps {
  /** The function's environment: the contract's configuration variables. */
  readonly environment: Readonly<Record<string, string>>;
  readonly memorySize: number;
  readonly timeout: Duration;
  readonly reservedConcurrency?: number;
  readonly tracing: boolean;
  readonly logRetention: RetentionDays;
  /** What the other parts let the function do. */
  readonly grants: readonly FunctionGrant[];
  /** A file to package beside the code (the stored credentials), staged where the bundling can copy it. */
  readonly packagedFile?: string;
}

/**
 * The token exchange function: one arm64 Node.js function built by esbuild from lambda/handler.ts,
 * its own log group, and its own role, which may write to that log group and do what the other
 * parts grant it, nothing else. Its resources keep the logical ids they had when the stack made them.
 */
export class TokenFunction extends Construct {
  readonly handler: NodejsFunction;
  readonly role: Role;
  readonly logs: LogGroup;

  constructor(scope: Construct, id: string, props: TokenFunctionProps) {
    super(scope, id);
    keepLogicalIdsOfChildren(this);
    assertFunctionWouldStart(props.environment);
    this.logs = new LogGroup(this, 'FunctionLogs', { retention: props.logRetention });
    // Instead of AWSLambdaBasicExecutionRole (logs:CreateLogGroup and writes to every group in the
    // account): the function may only write to its own log group.
    const { grants } = props;
    const duties = [...grants.map((grant) => grant.duty), ...(props.tracing ? ['writes X-Ray traces'] : [])];
    const managedPolicies = grants.flatMap((grant) => grant.managedPolicies ?? []);
    this.role = new Role(this, 'FunctionRole', {
      assumedBy: new ServicePrincipal('lambda.amazonaws.com'),
      description: `Token exchange function: writes its own logs, ${duties.join(', ') || 'nothing else'}`,
      inlinePolicies: {
        WriteOwnLogs: new PolicyDocument({
          statements: [new PolicyStatement({ actions: ['logs:CreateLogStream', 'logs:PutLogEvents'], resources: [this.logs.logGroupArn] })],
        }),
        ...Object.fromEntries(
          grants.flatMap((grant) =>
            Object.entries(grant.inlinePolicies ?? {}).map(([name, statements]) => [
              name,
              new PolicyDocument({ statements: [...statements] }),
            ]),
          ),
        ),
      },
      managedPolicies: managedPolicies.length > 0 ? managedPolicies : undefined,
    });

    this.handler = new NodejsFunction(this, 'TokenFunction', {
      description: 'OAuth 2.0 client-credentials token exchange',
      entry: LAMBDA_ENTRY,
      handler: 'handler',
      projectRoot: PROJECT_ROOT,
      depsLockFilePath: path.join(PROJECT_ROOT, 'package-lock.json'),
      runtime: FUNCTION_RUNTIME,
      architecture: Architecture.ARM_64,
      memorySize: props.memorySize,
      timeout: props.timeout,
      role: this.role,
      logGroup: this.logs,
      environment: { ...props.environment },
      reservedConcurrentExecutions: props.reservedConcurrency,
      bundling: bundlingOptions(props.packagedFile),
      tracing: props.tracing ? Tracing.ACTIVE : undefined,
    });
    const reasons = [
      ...grants.flatMap((grant) => grant.onAnyResourceBecause ?? []),
      ...(props.tracing ? [TRACE_WRITES_ON_ANY_RESOURCE] : []),
    ];
    if (reasons.length > 0) Validations.of(this.role).acknowledge({ id: 'AwsSolutions-IAM5[Resource::*]', reason: reasons.join(' ') });

    // The environment can still grow after construction (addEnvironment, an aspect): check what is
    // synthesized, so a NODE_DEBUG that would print secrets, or any setting the function would
    // refuse, never reaches a deploy.
    this.node.addValidation({
      validate: () => functionStartProblems(this.handler.stack.resolve((this.handler.node.defaultChild as CfnFunction).environment)),
    });
  }
}

const PROJECT_ROOT = path.join(__dirname, '..');

const TRACE_WRITES_ON_ANY_RESOURCE =
  'tracing=active: X-Ray takes trace segments and telemetry only with Resource "*" (those actions have no resource types); the role writes traces and reads none.';

/**
 * NodejsFunction's bundling, derived from `lambdaBuildOptions` so the deployed bundle is the one the
 * benchmarks and bundle tests build. Local esbuild only: synth never needs Docker. A packaged file is
 * copied beside the bundle by Node itself, so the hook is the same command in bash and in cmd.
 */
function bundlingOptions(packagedFile: string | undefined) {
  const esbuild = lambdaBuildOptions('index.js');
  const copy = (outputDir: string) =>
    `"${process.execPath}" -e "require('node:fs').copyFileSync(process.argv[1], process.argv[2])" "${packagedFile}" "${path.join(outputDir, STORED_CREDENTIALS_FILE_NAME)}"`;
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
    commandHooks: packagedFile
      ? { beforeBundling: () => [], beforeInstall: () => [], afterBundling: (_inputDir: string, outputDir: string) => [copy(outputDir)] }
      : undefined,
  };
}

/** Refuse at synth what the function would refuse at its start: a deploy that can only fail. */
function assertFunctionWouldStart(environment: Readonly<Record<string, string>>): void {
  const [problem] = functionStartProblems({ variables: environment });
  if (problem !== undefined) throw new Error(problem);
}

/** A value CloudFormation fills in at deploy (a table's name, a secret's ARN): at most this long. */
const DEPLOY_TIME_VALUE_BYTES = 256;

function functionStartProblems(environment: { variables?: Record<string, unknown> } | undefined): string[] {
  const entries = Object.entries(environment?.variables ?? {});
  const bytes = entries.reduce(
    (total, [name, value]) =>
      total +
      Buffer.byteLength(name) +
      (typeof value === 'string' && !Token.isUnresolved(value) ? Buffer.byteLength(value) : DEPLOY_TIME_VALUE_BYTES),
    0,
  );
  if (bytes > ENVIRONMENT_LIMIT_BYTES) {
    return [
      `TokenExchangeStack: the function's environment takes up to ${bytes} bytes, and Lambda refuses more than ${ENVIRONMENT_LIMIT_BYTES}`,
    ];
  }
  try {
    // A value CloudFormation fills in at deploy is a token until then: check a valid stand-in for it.
    // The stored credentials file is checked apart (it is not on this machine's /var/task).
    const variables = Object.fromEntries(
      entries
        .filter(([name]) => name !== 'STORED_CREDENTIALS_FILE')
        .map(([name, value]) => [name, typeof value === 'string' && !Token.isUnresolved(value) ? value : 'resolved-at-deploy']),
    );
    loadConfig(variables);
    return [];
  } catch (error) {
    return [`TokenExchangeStack: the function would not start: ${(error as Error).message}`];
  }
}
