import { localAwsEnvironment } from '../../local/dynamodb-local';
import { type LocalKms, startLocalKms } from '../../local/kms-local';
import { type LocalSecretsManager, startLocalSecretsManager } from '../../local/secrets-manager-local';

/** The role whose sessions the test credentials admit, and a session of it as API Gateway names the caller. */
export const CALLER_ROLE = 'arn:aws:iam::123456789012:role/orders-service';
export const CALLER = 'arn:aws:sts::123456789012:assumed-role/orders-service/i-0123456789abcdef0';

/** Where a stored credential's secret and keys live in the tests: loopback stand-ins, reached by the real SDK clients. */
export interface CredentialSources {
  readonly kms: LocalKms;
  readonly secrets: LocalSecretsManager;
  close(): Promise<void>;
}

/**
 * A KMS stand-in and a Secrets Manager stand-in (or the one given, such as the shared table's, which
 * holds the pepper) on 127.0.0.1, with this process's AWS SDK settings pointed at both the standard
 * way (AWS_ENDPOINT_URL_KMS, AWS_ENDPOINT_URL_SECRETS_MANAGER), as the function reads them.
 */
export async function startCredentialSources(secrets?: LocalSecretsManager): Promise<CredentialSources> {
  const kms = await startLocalKms();
  const ownSecrets = secrets ? undefined : await startLocalSecretsManager({});
  const used = (secrets ?? ownSecrets) as LocalSecretsManager;
  const dynamoDb = process.env.AWS_ENDPOINT_URL_DYNAMODB;
  Object.assign(process.env, localAwsEnvironment({ dynamoDb, secretsManager: used.endpoint, kms: kms.endpoint }));
  return {
    kms,
    secrets: used,
    async close() {
      await Promise.all([kms.close(), ownSecrets?.close()]);
    },
  };
}

/** STORED_CREDENTIALS of these entries, each admitting sessions of {@link CALLER_ROLE} unless it says otherwise. */
export function storedCredentials(...entries: Record<string, unknown>[]): string {
  return JSON.stringify(entries.map((entry) => ({ callers: [CALLER_ROLE], ...entry })));
}
