import { writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { ArnFormat, Stack, Stage, Token } from 'aws-cdk-lib';
import { type Dashboard, GraphWidget, MathExpression } from 'aws-cdk-lib/aws-cloudwatch';
import { type IPrincipal, ManagedPolicy, PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import { parseStoredCredentials } from '../lambda/credentials/registry';
import type { AllowlistEntry } from '../lambda/policy/token-url-policy';
import { CredentialKey, type KeyPlacement, SIGNING_ALGORITHMS } from './credential-keys';
import { arnPlace, type RegionalArn } from './regions';
import { METRIC_PERIOD, SERVICE_NAME } from './service-metrics';
import type { SettingName, SettingProblem } from './setting-problems';

/**
 * One entry of a credentials file (`-c credentialsFile=PATH`): the function's stored credential
 * entry, except that a key or a secret can be named the way a deployment knows it. `key: "kms"`
 * makes the stack create an RSA_2048 signing key for the credential; `secretName` names an existing
 * secret by its name. Every other field passes to the function as it is, and the function's own
 * parser (run at synth) refuses what it would refuse at its start.
 */
export interface StoredCredentialProps {
  readonly name: string;
  readonly clientId: string;
  readonly tokenUrl?: string;
  readonly issuer?: string;
  readonly method: 'client_secret_basic' | 'client_secret_post' | 'private_key_jwt';
  /** `kms`: the stack creates the credential's signing key. */
  readonly key?: 'kms';
  /** An existing asymmetric KMS key's ARN. */
  readonly keyId?: string;
  /** An existing Secrets Manager secret, by name. */
  readonly secretName?: string;
  /** An existing Secrets Manager secret, by its complete ARN. */
  readonly secretId?: string;
  readonly scopes?: readonly string[];
  readonly audience?: string;
  readonly resource?: string;
  readonly callers: readonly string[];
}

/** The file's name in the function's package, and where the function finds it (`LAMBDA_TASK_ROOT`). */
export const STORED_CREDENTIALS_FILE_NAME = 'stored-credentials.json';
export const STORED_CREDENTIALS_FILE_PATH = `/var/task/${STORED_CREDENTIALS_FILE_NAME}`;

/** What places the function's entries: the stack's name (its keys' aliases), region and keys. */
export interface CredentialPlace {
  readonly stackName: string;
  readonly region: string;
  readonly keys: KeyPlacement;
}

export interface StoredCredentialsProps extends CredentialPlace {
  readonly credentials: readonly StoredCredentialProps[];
}

const FILE_FIELDS = [
  'name',
  'clientId',
  'tokenUrl',
  'issuer',
  'method',
  'key',
  'keyId',
  'secretName',
  'secretId',
  'scopes',
  'audience',
  'resource',
  'callers',
];
const KEY_ARN = /^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key\/[A-Za-z0-9-]+$/;
const MULTI_REGION_KEY_ARN = /^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key\/mrk-[0-9a-f]{32}$/;
const SECRET_ARN = /^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+-[A-Za-z0-9]{6}$/;
const SECRET_NAME = /^[A-Za-z0-9/_+=.@-]{1,512}$/;

/** A managed policy's size limit (IAM counts it without whitespace), and how many a role may have by default. */
const MANAGED_POLICY_CHARACTERS = 6144;
const MANAGED_POLICIES_PER_ROLE = 10;

/**
 * What is wrong with a credentials file's entries, one message per problem naming the entry: the
 * deploy-time fields (how a key or a secret is named), a key of another region, values unknown at
 * synth, more grants than a role can hold, and the rule that stored credentials need IAM callers.
 * When those pass, the function's own parser reads the entries the stack would package, with the
 * function's allowlist: what it would refuse at its start, synth refuses.
 */
export function storedCredentialProblems(
  entries: readonly unknown[],
  { callerAuthorization, allowlist, place }: { callerAuthorization: string; allowlist?: readonly AllowlistEntry[]; place: CredentialPlace },
): SettingProblem[] {
  if (entries.length === 0) return [];
  const problems: SettingProblem[] =
    callerAuthorization === 'iam'
      ? []
      : [
          (name) =>
            `${name('storedCredentials')} needs ${name('callerAuthorization')}=iam: a stored credential is handed to the IAM principal API Gateway verified, and without IAM authorization there is none`,
        ];
  for (const [index, raw] of entries.entries()) {
    const entry = (typeof raw === 'object' && raw !== null && !Array.isArray(raw) ? raw : {}) as Record<string, unknown>;
    const entryName = `the entry ${typeof entry.name === 'string' ? `"${entry.name}"` : `at index ${index}`}`;
    const label = (name: SettingName) => `${name('storedCredentials')}: ${entryName}`;
    problems.push(...entryProblems(entry, place.keys).map((problem) => (name: SettingName) => `${label(name)} ${problem}`));
  }
  if (problems.length > 0) return problems;
  const credentials = entries as readonly StoredCredentialProps[];
  const policies = grantChunks(credentials, place).length;
  if (policies > MANAGED_POLICIES_PER_ROLE) {
    problems.push(
      (name) =>
        `${name('storedCredentials')} names more secrets and keys of yours than ${MANAGED_POLICIES_PER_ROLE} IAM managed policies can grant (it would take ${policies}): give fewer per stack`,
    );
  }
  if (allowlist !== undefined) {
    try {
      parseStoredCredentials(JSON.stringify(credentialsFileEntries(credentials, place)), allowlist);
    } catch (error) {
      const why = (error as Error).message.replace(/^Environment variable STORED_CREDENTIALS\w*:? */, '');
      problems.push((name) => `${name('storedCredentials')}: the function would not start: ${why}`);
    }
  }
  return problems;
}

/** The problems of one entry, worded to follow its name. */
function entryProblems(entry: Record<string, unknown>, keys: KeyPlacement): string[] {
  const problems: string[] = [];
  const unknown = Object.keys(entry).filter((key) => !FILE_FIELDS.includes(key));
  if (unknown.length > 0) problems.push(`has fields no entry has: ${unknown.join(', ')}`);
  const unresolved = Object.keys(entry).filter(
    (key) => Token.isUnresolved(entry[key]) || JSON.stringify(entry[key] ?? null).includes('${Token['),
  );
  if (unresolved.length > 0) {
    problems.push(`has ${unresolved.join(', ')} known only at deploy: the packaged file needs values known at synth (ARNs, names)`);
  }
  if (entry.method === 'private_key_jwt') {
    const named = [entry.key !== undefined, entry.keyId !== undefined].filter(Boolean).length;
    if (named !== 1) problems.push('must have exactly one of key: "kms" and keyId with private_key_jwt');
    if (entry.key !== undefined && entry.key !== 'kms')
      problems.push(`must have key "kms" (the stack creates the key), got ${JSON.stringify(entry.key)}`);
    if (entry.keyId !== undefined && !KEY_ARN.test(String(entry.keyId))) problems.push('must have keyId as a KMS key ARN');
    else if (entry.keyId !== undefined && keys.kind !== 'single-region' && !MULTI_REGION_KEY_ARN.test(String(entry.keyId))) {
      problems.push(
        'must have keyId as a multi-Region key (key/mrk-...) with keyRegions: each region signs with its replica, which has the same id',
      );
    }
  } else {
    const named = [entry.secretName !== undefined, entry.secretId !== undefined].filter(Boolean).length;
    if (named !== 1) problems.push(`must have exactly one of secretName and secretId with ${String(entry.method)}`);
    if (entry.secretName !== undefined && !SECRET_NAME.test(String(entry.secretName))) {
      problems.push('must have secretName as a Secrets Manager secret name');
    }
    if (entry.secretId !== undefined && !SECRET_ARN.test(String(entry.secretId))) {
      problems.push("must have secretId as a secret's complete ARN (with its six-character suffix), or name it with secretName");
    }
  }
  return problems;
}

/**
 * The regional ARNs of the entries, for the stack's region check: each `keyId` and `secretId`. With
 * keyRegions a multi-Region `keyId` is used in every region by its id, so it is none of them.
 */
export function credentialRegionalArns(credentials: readonly StoredCredentialProps[], keys: KeyPlacement): RegionalArn[] {
  return credentials.flatMap(({ name: credential, keyId, secretId }) => [
    ...(keyId !== undefined && keys.kind === 'single-region'
      ? [{ label: (name: SettingName) => `${name('storedCredentials')}: the entry "${credential}" keyId`, arn: keyId }]
      : []),
    ...(secretId === undefined
      ? []
      : [{ label: (name: SettingName) => `${name('storedCredentials')}: the entry "${credential}" secretId`, arn: secretId }]),
  ]);
}

/**
 * The function's entries: each created key named by its alias, each secret by its name or ARN, a
 * multi-Region key of yours by its ARN in this region. Only values known at synth: the file is
 * packaged with the function, where no CloudFormation reference is ever resolved.
 */
export function credentialsFileEntries(credentials: readonly StoredCredentialProps[], place: CredentialPlace): object[] {
  return credentials.map(({ key, keyId, secretName, secretId, ...entry }) => {
    if (key === 'kms') return { ...entry, keyId: CredentialKey.aliasOf(place.stackName, entry.name) };
    if (keyId !== undefined) return { ...entry, keyId: keyInRegion(keyId, place) };
    return { ...entry, secretId: secretName ?? secretId };
  });
}

/** A multi-Region key's ARN in this stack's region: its replicas there share its id. */
function keyInRegion(keyId: string, { keys, region }: CredentialPlace): string {
  const place = arnPlace(keyId);
  if (keys.kind === 'single-region' || place === undefined || Token.isUnresolved(region)) return keyId;
  return keyId.replace(`:kms:${place.region}:`, `:kms:${region}:`);
}

interface Grant {
  readonly kind: 'secret' | 'key';
  readonly arn: string;
  /** What the grant adds to a policy, at most: its ARN once CloudFormation has filled it in, quoted, in each statement that lists it. */
  readonly length: number;
}

// The longest partition, region and account a formatted ARN can be filled in with.
const FILLED_IN = { partition: 'aws-iso-b'.length + 1, region: 'ap-southeast-7'.length + 6, account: 12 };
const STATEMENT_OVERHEAD = 400;

/** The grants of the secrets and keys of yours, in groups small enough for one managed policy each. */
function grantChunks(credentials: readonly StoredCredentialProps[], place: CredentialPlace): Grant[][] {
  const grants: Grant[] = credentials.flatMap(({ keyId, secretName, secretId }): Grant[] => {
    if (keyId !== undefined) {
      // Listed twice: by the Sign statement and by the GetPublicKey one.
      const arn = keyInRegion(keyId, place);
      return [{ kind: 'key', arn, length: 2 * (arn.length + 3) }];
    }
    if (secretName !== undefined) {
      const filled = `arn::secretsmanager:::secret:${secretName}-??????`.length;
      return [{ kind: 'secret', arn: secretName, length: filled + FILLED_IN.partition + FILLED_IN.region + FILLED_IN.account + 3 }];
    }
    return secretId === undefined ? [] : [{ kind: 'secret', arn: secretId, length: secretId.length + 3 }];
  });
  const chunks: Grant[][] = [];
  let size = MANAGED_POLICY_CHARACTERS;
  for (const grant of grants) {
    if (size + grant.length > MANAGED_POLICY_CHARACTERS) {
      chunks.push([]);
      size = STATEMENT_OVERHEAD;
    }
    (chunks.at(-1) as Grant[]).push(grant);
    size += grant.length;
  }
  return chunks;
}

/**
 * The stored credentials of the stack: a signing key for each credential that asks for one (its
 * public half served at the JWKS route, its key policy letting only the function sign), the file of
 * the function's entries, packaged with it, and the grants to read the secrets and use the keys of
 * yours that the entries name, nothing else.
 */
export class StoredCredentials extends Construct {
  /** The packaged file's contents, staged in the cloud assembly for the function's bundling to copy. */
  readonly stagedFile: string;
  /** Whether a credential signs with a KMS key: then the JWKS route exists. */
  readonly publishesKeys: boolean;
  /** The keys the stack created, by credential name: with keyRegions, what the replica regions' stacks replicate. */
  readonly createdKeyArns: Readonly<Record<string, string>>;
  /** The function's grants on the secrets and keys of yours, as few managed policies as IAM's size limit allows. */
  readonly accessPolicies: readonly ManagedPolicy[];
  private readonly createdKeys: CredentialKey[];

  constructor(scope: Construct, id: string, props: StoredCredentialsProps) {
    super(scope, id);
    const stack = Stack.of(this);
    const { credentials, keys } = props;
    this.createdKeys = credentials
      .filter((credential) => credential.key === 'kms')
      .map(
        ({ name, clientId }) =>
          new CredentialKey(this, `Key${name}`, {
            alias: CredentialKey.aliasOf(props.stackName, name),
            description: `Signs the private_key_jwt assertions of stored credential ${name} (client ${clientId}); its public key is at the JWKS route`,
            placement: keys,
            primaryKeyArn: keys.kind === 'replica' ? keys.primaryKeyArns[name] : undefined,
          }),
      );
    this.createdKeyArns = Object.fromEntries(
      credentials
        .filter((credential) => credential.key === 'kms')
        .map(({ name }, index) => [name, this.createdKeys[index]?.keyArn as string]),
    );
    this.publishesKeys = credentials.some((credential) => credential.method === 'private_key_jwt');

    this.stagedFile = path.join((Stage.of(this) as Stage).outdir, `${stack.artifactId}.${STORED_CREDENTIALS_FILE_NAME}`);
    writeFileSync(this.stagedFile, JSON.stringify(credentialsFileEntries(credentials, props)));

    this.accessPolicies = grantChunks(credentials, props).map(
      (grants, index) =>
        new ManagedPolicy(this, `AccessPolicy${index + 1}`, {
          description: 'Token exchange function: reads the secrets and signs with the KMS keys of yours its stored credentials name',
          statements: grantStatements(stack, grants),
        }),
    );
  }

  /** Let the function's role sign with the keys the stack created, in their key policies. */
  letSign(signer: IPrincipal): void {
    for (const key of this.createdKeys) key.letSign(signer);
  }

  /** A graph of requests by stored credential and outcome (`CredentialRequests`), on the service's dashboard. */
  addToDashboard(dashboard: Dashboard, namespace: string): void {
    const search = `SEARCH('{${JSON.stringify(namespace)},credential,outcome,service} MetricName="CredentialRequests" service="${SERVICE_NAME}"', 'Sum', ${METRIC_PERIOD.toSeconds()})`;
    dashboard.addWidgets(
      new GraphWidget({
        title: 'Stored credentials: requests by credential and outcome',
        left: [new MathExpression({ expression: search, label: '', period: METRIC_PERIOD })],
        width: 24,
        height: 6,
      }),
    );
  }
}

/**
 * Read those secrets; sign with those keys (RS256 or ES256 over raw messages, as the function
 * signs) and read their public keys. A secret by name is any of its versions' ARNs: an existing
 * secret's ARN ends with six random characters after its name.
 */
function grantStatements(stack: Stack, grants: readonly Grant[]): PolicyStatement[] {
  const secrets = grants
    .filter((grant) => grant.kind === 'secret')
    .map(({ arn }) =>
      SECRET_ARN.test(arn)
        ? arn
        : stack.formatArn({
            service: 'secretsmanager',
            resource: 'secret',
            resourceName: `${arn}-??????`,
            arnFormat: ArnFormat.COLON_RESOURCE_NAME,
          }),
    );
  const keys = grants.filter((grant) => grant.kind === 'key').map(({ arn }) => arn);
  return [
    ...(secrets.length > 0 ? [new PolicyStatement({ actions: ['secretsmanager:GetSecretValue'], resources: secrets })] : []),
    ...(keys.length > 0
      ? [
          new PolicyStatement({
            actions: ['kms:Sign'],
            resources: keys,
            conditions: { StringEquals: { 'kms:SigningAlgorithm': SIGNING_ALGORITHMS, 'kms:MessageType': 'RAW' } },
          }),
          new PolicyStatement({ actions: ['kms:GetPublicKey'], resources: keys }),
        ]
      : []),
  ];
}
