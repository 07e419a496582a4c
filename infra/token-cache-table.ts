import { RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import { AttributeType, BillingMode, Table, TableEncryption } from 'aws-cdk-lib/aws-dynamodb';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { type IKey, Key } from 'aws-cdk-lib/aws-kms';
import { Construct } from 'constructs';
import { TABLE_SCHEMA } from '../lambda/cache/table-schema';

export interface TokenCacheTableProps {
  /**
   * ARN of a customer-managed KMS key that encrypts the table at rest.
   * @default - an AWS owned key (DynamoDB's default, at no charge)
   */
  readonly kmsKeyArn?: string;
}

const ATTRIBUTE_TYPES = { S: AttributeType.STRING, N: AttributeType.NUMBER, B: AttributeType.BINARY } as const;

/**
 * The shared token cache's DynamoDB table, from the definition in lambda/cache/table-schema.ts (the
 * one `npm start` creates locally): on-demand, partition key only, DynamoDB's TTL on the expiry
 * attribute, encrypted at rest, destroyed with the stack (it holds only sealed, short-lived copies).
 */
export class TokenCacheTable extends Construct {
  readonly table: Table;
  readonly encryptionKey?: IKey;
  /** Deleted with the stack: what the table holds is worth one IdP request per token to refill. */
  readonly removalPolicy = RemovalPolicy.DESTROY;

  constructor(scope: Construct, id: string, props: TokenCacheTableProps = {}) {
    super(scope, id);
    this.encryptionKey = props.kmsKeyArn === undefined ? undefined : Key.fromKeyArn(this, 'Key', props.kmsKeyArn);
    const { name, type } = TABLE_SCHEMA.partitionKey;
    this.table = new Table(this, 'Table', {
      partitionKey: { name, type: ATTRIBUTE_TYPES[type] },
      billingMode: BillingMode.PAY_PER_REQUEST,
      timeToLiveAttribute: TABLE_SCHEMA.timeToLiveAttribute,
      encryption: this.encryptionKey ? TableEncryption.CUSTOMER_MANAGED : TableEncryption.DEFAULT,
      encryptionKey: this.encryptionKey,
      removalPolicy: this.removalPolicy,
    });
    Validations.of(this.table).acknowledge({
      id: 'AwsSolutions-DDB3',
      reason:
        'Point-in-time recovery would keep 35 days of a cache: every item is a sealed copy of a token that expires within hours, and losing them all costs one IdP request per token.',
    });
  }

  /**
   * What the function may do, and nothing more: read and write single items of this table (its
   * conditional writes need no other action, and it never deletes: items expire by DynamoDB's TTL),
   * and use the customer-managed key, if any, only through DynamoDB.
   */
  accessStatements(): PolicyStatement[] {
    const statements = [
      new PolicyStatement({
        actions: ['dynamodb:GetItem', 'dynamodb:PutItem'],
        resources: [this.table.tableArn],
      }),
    ];
    if (this.encryptionKey) {
      statements.push(
        new PolicyStatement({
          actions: ['kms:Decrypt', 'kms:Encrypt', 'kms:GenerateDataKey'],
          resources: [this.encryptionKey.keyArn],
          conditions: { StringEquals: { 'kms:ViaService': `dynamodb.${Stack.of(this).region}.${Stack.of(this).urlSuffix}` } },
        }),
      );
    }
    return statements;
  }
}
