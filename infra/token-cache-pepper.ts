import { type RemovalPolicy, Validations } from 'aws-cdk-lib';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { Secret } from 'aws-cdk-lib/aws-secretsmanager';
import { Construct } from 'constructs';

/** The pepper's length: 64 letters and digits, about 381 bits. */
export const PEPPER_LENGTH = 64;

export interface TokenCachePepperProps {
  /** What happens to the secret when it leaves the stack: the table's policy, since it only matters with the table. */
  readonly removalPolicy: RemovalPolicy;
}

/**
 * The shared token cache's pepper: a random value in Secrets Manager that the function reads once at
 * start and mixes into every item key and seal key, so a copy of the table is useless without it too.
 */
export class TokenCachePepper extends Construct {
  readonly secret: Secret;

  constructor(scope: Construct, id: string, props: TokenCachePepperProps) {
    super(scope, id);
    this.secret = new Secret(this, 'Secret', {
      description:
        'Pepper of the shared token cache: a random value the token exchange function mixes into the keys of its table items. Replacing it only empties the cache.',
      generateSecretString: { passwordLength: PEPPER_LENGTH, excludePunctuation: true, includeSpace: false, requireEachIncludedType: true },
      removalPolicy: props.removalPolicy,
    });
    Validations.of(this.secret).acknowledge({
      id: 'AwsSolutions-SMG4',
      reason:
        'The pepper is no credential another party holds: nothing can be rotated into it. A new value only makes every item of the shared cache unreadable (each costs one IdP request to refill), and instances started before the change keep the old one until they end.',
    });
  }

  /** The function may read this secret's value, and nothing else of Secrets Manager. */
  accessStatements(): PolicyStatement[] {
    return [new PolicyStatement({ actions: ['secretsmanager:GetSecretValue'], resources: [this.secret.secretArn] })];
  }
}
