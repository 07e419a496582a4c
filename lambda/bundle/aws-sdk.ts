/**
 * The AWS SDK as the deployed function has it: the clients and commands the shared tier and stored secrets use, built
 * into `aws-sdk.js` beside the function's bundle (infra/bundling.ts), where the bundle's imports of
 * the client packages lead. Only `TOKEN_CACHE=shared` and stored credentials load it.
 */
export { ConditionalCheckFailedException, DynamoDBClient, GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
export { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
