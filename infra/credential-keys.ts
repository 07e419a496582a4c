import { ReferenceStrength, RemovalPolicy, Stack, Token } from 'aws-cdk-lib';
import { AccountRootPrincipal, type IPrincipal, PolicyDocument, PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { CfnAlias, CfnKey, CfnReplicaKey } from 'aws-cdk-lib/aws-kms';
import { Construct } from 'constructs';

/**
 * Where the keys the stack creates live: in this region only; or as multi-Region keys whose primary
 * is in the first of `keyRegions` (this stack's or another's) and whose replicas are in the others,
 * so every region signs with the same key material under the same `kid`.
 */
export type KeyPlacement =
  | { readonly kind: 'single-region' }
  | { readonly kind: 'primary'; readonly regions: readonly string[] }
  | { readonly kind: 'replica'; readonly regions: readonly string[]; readonly primaryKeyArns: Readonly<Record<string, string>> };

/** The one algorithm the function signs with a created key (RSA_2048: RS256, RFC 7518 3.3). */
export const CREATED_KEY_SIGNING_ALGORITHM = 'RSASSA_PKCS1_V1_5_SHA_256';

/** What the function signs with a key of yours: RS256 with an RSA key, ES256 with a P-256 one. */
export const SIGNING_ALGORITHMS = [CREATED_KEY_SIGNING_ALGORITHM, 'ECDSA_SHA_256'];

/**
 * What the account keeps of a created key: everything an administrator does (describe, enable,
 * disable, tag, alias, change the policy, schedule or cancel deletion, replicate), and reading the
 * public key, which the JWKS route publishes anyway. Never `kms:Sign` or another use, and never
 * `kms:CreateGrant`: the account's IAM policies cannot hand out signing, by policy or by grant.
 */
const ADMIN_ACTIONS = [
  'kms:CancelKeyDeletion',
  'kms:CreateAlias',
  'kms:DeleteAlias',
  'kms:DescribeKey',
  'kms:DisableKey',
  'kms:EnableKey',
  'kms:GetKeyPolicy',
  'kms:GetPublicKey',
  'kms:ListGrants',
  'kms:ListKeyPolicies',
  'kms:ListResourceTags',
  'kms:PutKeyPolicy',
  'kms:RevokeGrant',
  'kms:ScheduleKeyDeletion',
  'kms:TagResource',
  'kms:UntagResource',
  'kms:UpdateAlias',
  'kms:UpdateKeyDescription',
];
const MULTI_REGION_ADMIN_ACTIONS = ['kms:ReplicateKey', 'kms:UpdatePrimaryRegion'];

export interface CredentialKeyProps {
  readonly alias: string;
  readonly description: string;
  readonly placement: KeyPlacement;
  /** With a replica placement: the primary key's ARN (a literal, or another region's stack's reference). */
  readonly primaryKeyArn?: string;
}

/**
 * A credential's signing key: `RSA_2048` `SIGN_VERIFY`, under an alias the function knows at synth,
 * whose key policy lets the account administer it and only the function's role sign with it.
 *
 * Retained when the stack is deleted or the key replaced: a deleted key breaks the IdP's
 * verification of every client registered by its public key (by the JWKS URL or an uploaded PEM)
 * until each is registered again, and once its waiting period (7 to 30 days, cancellable until then)
 * ends no one can bring it back. Schedule its deletion yourself when no IdP trusts it.
 */
export class CredentialKey extends Construct {
  readonly keyArn: string;
  private readonly policy: PolicyDocument;

  constructor(scope: Construct, id: string, props: CredentialKeyProps) {
    super(scope, id);
    const { placement } = props;
    this.policy = new PolicyDocument({
      statements: [
        new PolicyStatement({
          sid: 'AccountAdministersOnly',
          principals: [new AccountRootPrincipal()],
          actions: [...ADMIN_ACTIONS, ...(placement.kind === 'single-region' ? [] : MULTI_REGION_ADMIN_ACTIONS)].sort(),
          resources: ['*'],
        }),
      ],
    });
    // The layout of aws-cdk-lib's Key (`Resource`, `Alias/Resource`), which made these keys before:
    // the same logical ids, so a deployed key is kept, never replaced.
    const key =
      placement.kind === 'replica'
        ? new CfnReplicaKey(this, 'Resource', {
            primaryKeyArn: primaryReference(props.primaryKeyArn as string),
            description: props.description,
            keyPolicy: this.policy,
          })
        : new CfnKey(this, 'Resource', {
            keySpec: 'RSA_2048',
            keyUsage: 'SIGN_VERIFY',
            multiRegion: placement.kind === 'primary' ? true : undefined,
            description: props.description,
            keyPolicy: this.policy,
          });
    key.applyRemovalPolicy(RemovalPolicy.RETAIN);
    new CfnAlias(new Construct(this, 'Alias'), 'Resource', { aliasName: props.alias, targetKeyId: key.attrArn });
    this.keyArn = key.attrArn;
  }

  /**
   * Let `signer` sign with the key (with its one algorithm, over raw messages only: no digest the
   * caller computed) and read its public key. Granted in the key policy: the account's IAM policies
   * cannot grant it, and no IAM policy of the role is needed.
   */
  letSign(signer: IPrincipal): void {
    this.policy.addStatements(
      new PolicyStatement({
        sid: 'FunctionSignsOnly',
        principals: [signer],
        actions: ['kms:Sign'],
        resources: ['*'],
        conditions: { StringEquals: { 'kms:SigningAlgorithm': CREATED_KEY_SIGNING_ALGORITHM, 'kms:MessageType': 'RAW' } },
      }),
      new PolicyStatement({ sid: 'FunctionReadsPublicKey', principals: [signer], actions: ['kms:GetPublicKey'], resources: ['*'] }),
    );
  }

  /** The key's alias for a credential: known at synth, so the packaged credentials file can name it. */
  static aliasOf(stackName: string, credentialName: string): string {
    return `alias/${stackName}/${credentialName.replaceAll('.', '_')}`;
  }
}

/**
 * Another region's stack's key, read from that stack's output at deploy (`Fn::GetStackOutput`): a
 * weak reference, which needs no custom resource and leaves the primary's stack free to change. The
 * keys are retained, so nothing needs the primary protected from its own stack's deletion.
 */
function primaryReference(arn: string): string {
  return Token.isUnresolved(arn) ? Stack.consumeReference(arn, ReferenceStrength.WEAK) : arn;
}
