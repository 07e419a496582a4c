/** Where a partition's regional endpoints live. */
interface Partition {
  readonly regions: RegExp;
  readonly dns: string;
}

// GovCloud's regions, whose standard DynamoDB endpoints are its FIPS endpoints.
const GOV_CLOUD: Partition = { regions: /^us-gov-\w+-\d+$/, dns: 'amazonaws.com' };
// The partitions' DNS suffixes by region name, as the AWS SDK's partition table gives them (a test holds the
// endpoints made from them to the SDK's own).
const PARTITIONS: readonly Partition[] = [
  GOV_CLOUD,
  { regions: /^cn-\w+-\d+$/, dns: 'amazonaws.com.cn' },
  { regions: /^eusc-(de)-\w+-\d+$/, dns: 'amazonaws.eu' },
  { regions: /^us-iso-\w+-\d+$/, dns: 'c2s.ic.gov' },
  { regions: /^us-isob-\w+-\d+$/, dns: 'sc2s.sgov.gov' },
  { regions: /^eu-isoe-\w+-\d+$/, dns: 'cloud.adc-e.uk' },
  { regions: /^us-isof-\w+-\d+$/, dns: 'csp.hci.ic.gov' },
];
// The commercial partition: any region no other partition claims, as the SDK has it.
const COMMERCIAL: Pick<Partition, 'dns'> = { dns: 'amazonaws.com' };

/** An AWS service reached over its JSON protocol: how its endpoint, its target header and its signature name it. */
export interface AwsJsonService {
  /** The first label of its endpoint host (`dynamodb` in `dynamodb.eu-west-1.amazonaws.com`). */
  readonly hostPrefix: string;
  /** The SDK's name for it in `AWS_ENDPOINT_URL_<NAME>`. */
  readonly envName: string;
  /** Its name in a SigV4 credential scope. */
  readonly signingName: string;
  /** `X-Amz-Target` is this, a dot, the operation. */
  readonly targetPrefix: string;
  /** `application/x-amz-json-1.0` or `-1.1`. */
  readonly contentType: string;
  /** The partition whose standard endpoints are FIPS endpoints, if any. */
  readonly fipsStandardIn: Partition | undefined;
}

export const DYNAMODB: AwsJsonService = {
  hostPrefix: 'dynamodb',
  envName: 'DYNAMODB',
  signingName: 'dynamodb',
  targetPrefix: 'DynamoDB_20120810',
  contentType: 'application/x-amz-json-1.0',
  fipsStandardIn: GOV_CLOUD,
};
export const SECRETS_MANAGER: AwsJsonService = {
  hostPrefix: 'secretsmanager',
  envName: 'SECRETS_MANAGER',
  signingName: 'secretsmanager',
  targetPrefix: 'secretsmanager',
  contentType: 'application/x-amz-json-1.1',
  fipsStandardIn: undefined,
};
export const KMS: AwsJsonService = {
  hostPrefix: 'kms',
  envName: 'KMS',
  signingName: 'kms',
  targetPrefix: 'TrentService',
  contentType: 'application/x-amz-json-1.1',
  fipsStandardIn: undefined,
};

const REGION = /^[a-z0-9]+(-[a-z0-9]+)+$/;

/** A setting the endpoint cannot be made from, named as the user set it. */
export class EndpointSettingError extends Error {
  override readonly name = 'EndpointSettingError';
}

/**
 * Where a service's calls go, from the AWS SDK's standard variables: `AWS_ENDPOINT_URL_<SERVICE>`,
 * then `AWS_ENDPOINT_URL` (unless `AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true`), else the regional
 * endpoint of `AWS_REGION`'s partition, its FIPS form with `AWS_USE_FIPS_ENDPOINT=true`. Dual-stack
 * hosts follow rules of their own per service and partition: they are named, not derived.
 */
export function serviceEndpoint(service: AwsJsonService, env: NodeJS.ProcessEnv): { readonly url: URL; readonly region: string } {
  const region = String(env.AWS_REGION);
  if (!REGION.test(region)) throw new EndpointSettingError('AWS_REGION is not a region name');
  const variable = [`AWS_ENDPOINT_URL_${service.envName}`, 'AWS_ENDPOINT_URL'].find((name) => env[name] !== undefined);
  if (variable !== undefined && env.AWS_IGNORE_CONFIGURED_ENDPOINT_URLS !== 'true') {
    const url = URL.parse(String(env[variable]));
    if (url === null || (url.protocol !== 'https:' && url.protocol !== 'http:'))
      throw new EndpointSettingError(`${variable} is not an http(s) URL`);
    // Every call is signed as a POST to `/`: an endpoint elsewhere would be signed for the wrong path.
    if (url.href !== url.origin + '/') throw new EndpointSettingError(`${variable} must be an origin, with no user, path or query`);
    return { url, region };
  }
  if (env.AWS_USE_DUALSTACK_ENDPOINT === 'true') {
    throw new EndpointSettingError(`AWS_USE_DUALSTACK_ENDPOINT: name the dual-stack endpoint in AWS_ENDPOINT_URL_${service.envName}`);
  }
  const partition = PARTITIONS.find(({ regions }) => regions.test(region)) ?? COMMERCIAL;
  const fips = env.AWS_USE_FIPS_ENDPOINT === 'true' && service.fipsStandardIn !== partition ? '-fips' : '';
  return { url: new URL(`https://${service.hostPrefix}${fips}.${region}.${partition.dns}`), region };
}
