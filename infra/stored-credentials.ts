import { ArnFormat, Stack, Validations } from 'aws-cdk-lib';
import type { HttpRoute } from 'aws-cdk-lib/aws-apigatewayv2';
import { type Dashboard, GraphWidget, MathExpression } from 'aws-cdk-lib/aws-cloudwatch';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { Key, KeySpec, KeyUsage } from 'aws-cdk-lib/aws-kms';
import { Construct } from 'constructs';
import { METRIC_PERIOD, SERVICE_NAME } from './service-metrics';
import type { SettingName, SettingProblem } from './setting-problems';

/**
 * One entry of a credentials file (`-c credentialsFile=PATH`): the function's STORED_CREDENTIALS
 * entry, except that a key or a secret can be named the way a deployment knows it. `key: "kms"`
 * makes the stack create an RSA_2048 signing key for the credential; `secretName` names an existing
 * secret by its name. Every other field passes to the function as it is, and the function's own rules
 * (checked at synth) refuse what it would refuse at its start.
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

export interface StoredCredentialsProps {
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
const SECRET_ARN = /^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+-[A-Za-z0-9]{6}$/;
const SECRET_NAME = /^[A-Za-z0-9/_+=.@-]{1,512}$/;

/**
 * What is wrong with a credentials file's entries, one message per problem naming the entry: the
 * deploy-time fields (how a key or a secret is named) and the rule that stored credentials need IAM
 * callers. The function's own rules are checked apart, on the environment the stack builds.
 */
export function storedCredentialProblems(entries: readonly unknown[], callerAuthorization: string): SettingProblem[] {
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
    const unknown = Object.keys(entry).filter((key) => !FILE_FIELDS.includes(key));
    if (unknown.length > 0) problems.push((name) => `${label(name)} has fields no entry has: ${unknown.join(', ')}`);
    if (entry.method === 'private_key_jwt') {
      const named = [entry.key !== undefined, entry.keyId !== undefined].filter(Boolean).length;
      if (named !== 1) problems.push((name) => `${label(name)} must have exactly one of key: "kms" and keyId with private_key_jwt`);
      if (entry.key !== undefined && entry.key !== 'kms')
        problems.push((name) => `${label(name)} must have key "kms" (the stack creates the key), got ${JSON.stringify(entry.key)}`);
      if (entry.keyId !== undefined && !KEY_ARN.test(String(entry.keyId)))
        problems.push((name) => `${label(name)} must have keyId as a KMS key ARN`);
    } else {
      const named = [entry.secretName !== undefined, entry.secretId !== undefined].filter(Boolean).length;
      if (named !== 1)
        problems.push((name) => `${label(name)} must have exactly one of secretName and secretId with ${String(entry.method)}`);
      if (entry.secretName !== undefined && !SECRET_NAME.test(String(entry.secretName)))
        problems.push((name) => `${label(name)} must have secretName as a Secrets Manager secret name`);
      if (entry.secretId !== undefined && !SECRET_ARN.test(String(entry.secretId))) {
        problems.push(
          (name) =>
            `${label(name)} must have secretId as a secret's complete ARN (with its six-character suffix), or name it with secretName`,
        );
      }
    }
  }
  return problems;
}

/**
 * The stored credentials of the stack: a KMS signing key for each credential that asks for one (its
 * public half served at the JWKS route), the function's STORED_CREDENTIALS, and the grants to sign
 * with those keys and read those secrets, nothing else.
 */
export class StoredCredentials extends Construct {
  /** STORED_CREDENTIALS: the entries with each key and secret as the function names it. */
  readonly variable: string;
  /** Whether a credential signs with a KMS key: then the JWKS route exists. */
  readonly publishesKeys: boolean;
  private readonly keyArns: string[] = [];
  private readonly secretArns: string[] = [];

  constructor(scope: Construct, id: string, props: StoredCredentialsProps) {
    super(scope, id);
    const stack = Stack.of(this);
    const entries = props.credentials.map(({ key, keyId, secretName, secretId, ...entry }) => {
      if (key === 'kms') {
        // The function names the key by its alias, a literal the template knows, so the synth-time
        // check reads the same STORED_CREDENTIALS the function will.
        const alias = `alias/${stack.stackName}/${entry.name.replaceAll('.', '_')}`;
        const created = new Key(this, `Key${entry.name}`, {
          keySpec: KeySpec.RSA_2048,
          keyUsage: KeyUsage.SIGN_VERIFY,
          description: `Signs the private_key_jwt assertions of stored credential ${entry.name} (client ${entry.clientId}); its public key is at the JWKS route`,
          alias,
        });
        this.keyArns.push(created.keyArn);
        return { ...entry, keyId: alias };
      }
      if (keyId !== undefined) {
        this.keyArns.push(keyId);
        return { ...entry, keyId };
      }
      if (secretName !== undefined) {
        // An existing secret's ARN ends with six random characters after its name.
        this.secretArns.push(
          stack.formatArn({
            service: 'secretsmanager',
            resource: 'secret',
            resourceName: `${secretName}-??????`,
            arnFormat: ArnFormat.COLON_RESOURCE_NAME,
          }),
        );
        return { ...entry, secretId: secretName };
      }
      this.secretArns.push(String(secretId));
      return { ...entry, secretId };
    });
    this.variable = JSON.stringify(entries);
    this.publishesKeys = this.keyArns.length > 0;
  }

  /** The function may sign with these keys and read their public halves, and read these secrets. */
  accessStatements(): PolicyStatement[] {
    return [
      ...(this.keyArns.length > 0 ? [new PolicyStatement({ actions: ['kms:Sign', 'kms:GetPublicKey'], resources: this.keyArns })] : []),
      ...(this.secretArns.length > 0
        ? [new PolicyStatement({ actions: ['secretsmanager:GetSecretValue'], resources: this.secretArns })]
        : []),
    ];
  }

  /** The JWKS route takes no caller authentication: it serves public keys to IdPs, which sign nothing. */
  acknowledgePublicJwksRoute(route: HttpRoute): void {
    Validations.of(route).acknowledge({
      id: 'AwsSolutions-APIG4',
      reason:
        'GET /.well-known/jwks.json serves the public keys of the stored credentials for IdPs to fetch, as a JWKS URL must be; it reads no body and answers nothing secret. The token routes keep IAM authorization.',
    });
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
