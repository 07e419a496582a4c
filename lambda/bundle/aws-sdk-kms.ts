/**
 * `aws-sdk.js` of a deployment with a stored credential that signs in KMS: KMS's client too. Without
 * one the file leaves it out, a sixth of the file and about 7 ms of every cold start that loads it.
 */
export * from './aws-sdk';
export { GetPublicKeyCommand, KMSClient, SignCommand } from '@aws-sdk/client-kms';
