import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { KMSClient } from '@aws-sdk/client-kms';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { type AwsJsonService, DYNAMODB, EndpointSettingError, KMS, SECRETS_MANAGER, serviceEndpoint } from '../../lambda/aws/endpoints';

// The AWS SDK is the oracle: for every partition's regions (and one no partition names), with FIPS on
// and off, the endpoint made here is the one the SDK's own client would call.

const REGIONS = [
  ...['us-east-1', 'eu-west-3', 'ap-southeast-5', 'il-central-1', 'mx-central-1', 'ca-west-1', 'xx-unknown-9'],
  ...['cn-north-1', 'cn-northwest-1', 'us-gov-west-1', 'us-gov-east-1', 'eusc-de-east-1'],
  ...['us-iso-east-1', 'us-isob-east-1', 'eu-isoe-west-1', 'us-isof-south-1'],
  // Names no region has yet, at the edges of the partitions' patterns: the SDK says where each belongs.
  ...['cn-north-1x', 'xcn-north-1', 'cn-north-x', 'cn-1-1', 'eusc-fr-east-1', 'eusc-de-east-1x', 'us-iso-east-1x', 'xus-isob-east-1'],
  ...['eu-isoe-west-x', 'us-isof-south-1b', 'us-gov-west-1b', 'xus-gov-west-1', 'us-isob-east-x', 'us-iso-x-1', 'a1-b2'],
  ...['xeusc-de-east-1', 'xus-iso-east-1', 'xeu-isoe-west-1', 'xus-isof-south-1', 'us-isob-east-1x', 'eu-isoe-west-1x'],
  ...['us-gov-west-10', 'cn-north-12', 'eusc-de-east-10', 'us-iso-east-10', 'us-isob-east-10', 'eu-isoe-west-10', 'us-isof-south-10'],
];
type EndpointProvider = (params: { Region: string; UseFIPS: boolean; UseDualStack: boolean }) => { url: URL };
const SERVICES: [AwsJsonService, { config: { endpointProvider: EndpointProvider } }][] = [
  [DYNAMODB, new DynamoDBClient({ region: 'us-east-1' }) as never],
  [SECRETS_MANAGER, new SecretsManagerClient({ region: 'us-east-1' }) as never],
  [KMS, new KMSClient({ region: 'us-east-1' }) as never],
];

describe('serviceEndpoint', () => {
  it.each(SERVICES.map(([service, client]) => [service.hostPrefix, service, client] as const))(
    'gives %s the AWS SDK endpoint of every partition, with and without FIPS',
    (_name, service, client) => {
      const cases = REGIONS.flatMap((region) => [false, true].map((fips) => ({ region, fips })));

      const ours = cases.map(({ region, fips }) => serviceEndpoint(service, { AWS_REGION: region, AWS_USE_FIPS_ENDPOINT: `${fips}` }));
      const sdk = cases.map(({ region, fips }) => client.config.endpointProvider({ Region: region, UseFIPS: fips, UseDualStack: false }));

      expect(ours.map(({ url }) => url.href)).toEqual(sdk.map(({ url }) => url.href));
      expect(ours.map(({ region }) => region)).toEqual(cases.map(({ region }) => region));
      // The control: the partitions and the FIPS hosts are all there.
      expect(new Set(ours.map(({ url }) => url.hostname.split('.').slice(2).join('.'))).size).toBe(7);
      expect(ours.filter(({ url }) => url.hostname.includes('-fips.')).length).toBeGreaterThan(REGIONS.length / 2);
    },
  );

  it('takes the service variable first, then AWS_ENDPOINT_URL, and neither when told to ignore them', () => {
    const env = { AWS_REGION: 'eu-west-1', AWS_ENDPOINT_URL_KMS: 'http://127.0.0.1:4000', AWS_ENDPOINT_URL: 'https://127.0.0.1:5000/' };

    expect(serviceEndpoint(KMS, env).url.href).toBe('http://127.0.0.1:4000/');
    expect(serviceEndpoint(DYNAMODB, env).url.href).toBe('https://127.0.0.1:5000/');
    expect(serviceEndpoint(KMS, { ...env, AWS_IGNORE_CONFIGURED_ENDPOINT_URLS: 'true' }).url.href).toBe(
      'https://kms.eu-west-1.amazonaws.com/',
    );
    expect(serviceEndpoint(KMS, { ...env, AWS_IGNORE_CONFIGURED_ENDPOINT_URLS: 'false' }).region).toBe('eu-west-1');
  });

  it.each([
    ['no region', { AWS_REGION: undefined }, 'AWS_REGION is not a region name'],
    ['a region that is no name', { AWS_REGION: 'eu-west-1.evil.example' }, 'AWS_REGION is not a region name'],
    ['a region that only ends as one', { AWS_REGION: 'evil.example/eu-west-1' }, 'AWS_REGION is not a region name'],
    ['a region of one word', { AWS_REGION: 'local' }, 'AWS_REGION is not a region name'],
    [
      'an endpoint that is no URL',
      { AWS_ENDPOINT_URL_SECRETS_MANAGER: '127.0.0.1:4000' },
      'AWS_ENDPOINT_URL_SECRETS_MANAGER is not an http(s) URL',
    ],
    ['an endpoint of another scheme', { AWS_ENDPOINT_URL: 'file:///etc/passwd' }, 'AWS_ENDPOINT_URL is not an http(s) URL'],
    ['an endpoint with a path', { AWS_ENDPOINT_URL: 'http://127.0.0.1:4000/proxy' }, 'AWS_ENDPOINT_URL must be an origin'],
    ['an endpoint with a query', { AWS_ENDPOINT_URL: 'http://127.0.0.1:4000/?a=b' }, 'AWS_ENDPOINT_URL must be an origin'],
    ['an endpoint with a user', { AWS_ENDPOINT_URL: 'http://user:pw@127.0.0.1:4000' }, 'AWS_ENDPOINT_URL must be an origin'],
    [
      'dual-stack, whose hosts are named',
      { AWS_USE_DUALSTACK_ENDPOINT: 'true' },
      'name the dual-stack endpoint in AWS_ENDPOINT_URL_SECRETS_MANAGER',
    ],
  ])('refuses %s, naming the variable', (_case, env, message) => {
    const settings = { AWS_REGION: 'eu-west-1', ...env };

    expect(() => serviceEndpoint(SECRETS_MANAGER, settings)).toThrow(EndpointSettingError);
    expect(() => serviceEndpoint(SECRETS_MANAGER, settings)).toThrow(message);
  });

  it('takes a dual-stack endpoint that is named', () => {
    const env = {
      AWS_REGION: 'eu-west-1',
      AWS_USE_DUALSTACK_ENDPOINT: 'true',
      AWS_ENDPOINT_URL_DYNAMODB: 'https://dynamodb.eu-west-1.api.aws',
    };

    expect(serviceEndpoint(DYNAMODB, env).url.href).toBe('https://dynamodb.eu-west-1.api.aws/');
    expect(serviceEndpoint(DYNAMODB, { ...env, AWS_USE_DUALSTACK_ENDPOINT: 'false', AWS_ENDPOINT_URL_DYNAMODB: undefined }).url.host).toBe(
      'dynamodb.eu-west-1.amazonaws.com',
    );
  });
});
