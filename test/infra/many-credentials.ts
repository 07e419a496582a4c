import type { StoredCredentialProps } from '../../infra/stored-credentials';

// A credentials file of a platform that holds many clients: mostly secrets named in Secrets Manager,
// some by ARN, some keys of its own and a few keys the stack creates. `npx tsx
// test/infra/many-credentials.ts 300` prints one (what .ci/run synthesizes and lints).

const ACCOUNT = '123456789012';

/** `count` entries, each a credential a real platform could hold, every field as long as real ones run. */
export function manyCredentials(count: number): StoredCredentialProps[] {
  return Array.from({ length: count }, (_, index) => {
    const name = `service-${String(index).padStart(3, '0')}-api`;
    const common = {
      name,
      clientId: `0oa${index.toString(16).padStart(8, '0')}client${index}`,
      tokenUrl: `https://tenant-${index % 7}.example.okta.com/oauth2/default/v1/token`,
      scopes: [`${name}.read`, `${name}.write`],
      callers: [`arn:aws:iam::${ACCOUNT}:role/${name}-caller`, `arn:aws:iam::${ACCOUNT}:role/platform-*`],
    };
    if (index % 15 === 0) return { ...common, method: 'private_key_jwt', key: 'kms' };
    if (index % 10 === 1) {
      return {
        ...common,
        method: 'private_key_jwt',
        keyId: `arn:aws:kms:eu-west-1:${ACCOUNT}:key/0b1c2d3e-aaaa-bbbb-cccc-${String(index).padStart(12, '0')}`,
      };
    }
    if (index % 5 === 2) {
      return {
        ...common,
        method: 'client_secret_basic',
        secretId: `arn:aws:secretsmanager:eu-west-1:${ACCOUNT}:secret:token-exchange/clients/${name}-Ab${String(index).padStart(4, '0')}`,
      };
    }
    return { ...common, method: 'client_secret_post', secretName: `token-exchange/clients/${name}` };
  });
}

if (require.main === module) process.stdout.write(`${JSON.stringify(manyCredentials(Number(process.argv[2] ?? 300)), null, 2)}\n`);
