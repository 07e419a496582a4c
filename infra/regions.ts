import { Token } from 'aws-cdk-lib';
import type { SettingProblem } from './setting-problems';

/** A region as AWS names them: `eu-west-1`, `us-gov-west-1`, `ap-southeast-5`. */
export const REGION_NAME = /^[a-z]{2}(-[a-z]+)+-\d{1,2}$/;

/** The partition and region an ARN names (`arn:PARTITION:SERVICE:REGION:...`), when it is one. */
export function arnPlace(arn: string): { partition: string; region: string } | undefined {
  const match = /^arn:(aws[a-z-]*):[a-z0-9-]+:([a-z0-9-]+):/.exec(arn);
  return match ? { partition: match[1] as string, region: match[2] as string } : undefined;
}

/** A region-bound ARN among the settings, and the words that name it in a refusal. */
export interface RegionalArn {
  readonly label: SettingProblem & ((name: (prop: string) => string) => string);
  readonly arn: string;
}

/**
 * An ARN of another region than the stack's is a resource the stack cannot use (a regional API's
 * certificate, a KMS key, a web ACL): refused when the stack's region is known at synth. An
 * environment-agnostic stack learns its region at deploy, so then the ARNs must at least agree.
 */
export function regionProblems(arns: readonly RegionalArn[], stackRegion: string): SettingProblem[] {
  const placed = arns.flatMap(({ label, arn }) => {
    const place = arnPlace(arn);
    return place ? [{ label, region: place.region }] : [];
  });
  if (!Token.isUnresolved(stackRegion)) {
    return placed
      .filter(({ region }) => region !== stackRegion)
      .map(
        ({ label, region }) =>
          (name) =>
            `${label(name)} is in ${region}, but the stack deploys to ${stackRegion}, and it can only use what is in its own region`,
      );
  }
  const regions = [...new Set(placed.map(({ region }) => region))];
  if (regions.length < 2) return [];
  return [
    (name) =>
      `${placed.map(({ label, region }) => `${label(name)} (${region})`).join(', ')} name ${regions.length} regions, and a stack lives in one: pin the stack's region (CDK_DEPLOY_REGION) and use resources of that region`,
  ];
}
