import { Tags } from 'aws-cdk-lib';
import type { IConstruct } from 'constructs';
import type { SettingProblem } from './setting-problems';

/** The tag every resource of the stack carries, whatever else is asked for. */
export const SERVICE_TAG = { service: 'token-exchange' } as const;

// AWS's rule for tag keys and values: letters, digits, spaces and _ . : / = + - @.
const TAG_CHARACTERS = /^[\p{L}\p{Z}\p{N}_.:/=+\-@]*$/u;
// Each resource holds at most 50 tags; the service tag is one of them.
const MAX_TAGS = 49;

/** One message per refused tag; the keys the `aws:` prefix reserves are AWS's own. */
export function tagProblems(tags: Readonly<Record<string, string>>): SettingProblem[] {
  const problems: SettingProblem[] = [];
  const entries = Object.entries(tags);
  if (entries.length > MAX_TAGS) problems.push((name) => `${name('tags')} may hold at most ${MAX_TAGS} tags, got ${entries.length}`);
  for (const [key, value] of entries) {
    if (key.length < 1 || key.length > 128 || !TAG_CHARACTERS.test(key) || key.toLowerCase().startsWith('aws:')) {
      problems.push(
        (name) => `${name('tags')} keys must be 1 to 128 letters, digits, spaces or _ . : / = + - @, not starting with aws:, got "${key}"`,
      );
    }
    if (value.length > 256 || !TAG_CHARACTERS.test(value)) {
      problems.push((name) => `${name('tags')} value of "${key}" must be at most 256 letters, digits, spaces or _ . : / = + - @`);
    }
  }
  return problems;
}

/**
 * The service tag and the deployment's own on every taggable resource of the scope (and, as stack
 * tags, on the stack). Not on the dashboard: aws-cdk-lib's CloudFormation schema gives dashboards
 * tags, but cfn-lint's (1.51, on the CI machines) does not and fails the template.
 */
export function tagResources(scope: IConstruct, tags: Readonly<Record<string, string>>): void {
  for (const [key, value] of Object.entries({ ...SERVICE_TAG, ...tags })) {
    Tags.of(scope).add(key, value, { excludeResourceTypes: ['AWS::CloudWatch::Dashboard'] });
  }
}
