import { createHash } from 'node:crypto';
import type { CfnElement, Stack } from 'aws-cdk-lib';
import type { IConstruct } from 'constructs';

// A resource's logical id is its identity in a deployed stack: a new one is a new resource (a new
// API URL, a second alarm of the same name, a route key taken twice). Some resources were created
// directly in the stack before they were grouped into constructs of their own; those constructs are
// transparent here, so the grouping changes no deployed resource.

const transparent = new WeakSet<IConstruct>();

/** Give the resources under `scope` the logical ids they had before `scope` grouped them. */
export function keepLogicalIdsOfChildren(scope: IConstruct): void {
  transparent.add(scope);
}

/** The element's logical id without the transparent scopes on its path; undefined when it has none. */
export function logicalIdWithoutGroupings(stack: Stack, element: CfnElement): string | undefined {
  const scopes = element.node.scopes.slice(element.node.scopes.indexOf(stack) + 1);
  if (!scopes.some((scope) => transparent.has(scope))) return undefined;
  return uniqueId(scopes.filter((scope) => !transparent.has(scope)).map((scope) => scope.node.id));
}

/**
 * aws-cdk-lib's logical id of a path (its private makeUniqueId, which it can never change without
 * replacing every resource of every CDK stack): the path's ids without `Default`, the human part
 * without `Resource` and non-alphanumerics, then the first 8 hex digits of the path's MD5.
 */
export function uniqueId(path: readonly string[]): string {
  const components = path.filter((id) => id !== 'Default');
  const alphanumeric = (id: string) => id.replace(/[^A-Za-z0-9]/g, '');
  if (components.length === 1 && alphanumeric(components[0] as string).length <= 255) return alphanumeric(components[0] as string);
  const hash = createHash('md5').update(components.join('/')).digest('hex').slice(0, 8).toUpperCase();
  const human: string[] = [];
  for (const id of components) if (human.length === 0 || !(human.at(-1) as string).endsWith(id)) human.push(id);
  return (
    human
      .filter((id) => id !== 'Resource')
      .map(alphanumeric)
      .join('')
      .slice(0, 240) + hash
  );
}
