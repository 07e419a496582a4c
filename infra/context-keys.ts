import { ContextProvider } from 'aws-cdk-lib/cloud-assembly-schema';
import { FLAGS } from 'aws-cdk-lib/cx-api';

// Keys the CDK itself puts in an app's context: the CLI's own (`aws:cdk:bundling-stacks`, ...),
// cdk.json's `cli-telemetry`, what `cdk acknowledge` writes to cdk.context.json, and the cached
// answers of context lookups (`availability-zones:account=...`). Feature flags are named by
// package: `@aws-cdk/...` (and the containers extensions' `@aws-cdk-containers/...`).
const CDK_OWNED_PREFIXES = [
  'aws:cdk:',
  'aws-cdk:',
  '@aws-cdk/',
  '@aws-cdk-containers/',
  ...Object.values(ContextProvider).map((p) => `${p}:`),
];
const CDK_OWNED_KEYS = new Set(['cli-telemetry', 'acknowledged-issue-numbers', ...Object.keys(FLAGS)]);

/** True for a context key that the CDK owns rather than this app: left alone by the unknown-key check. */
export function isCdkOwnedContextKey(key: string): boolean {
  return CDK_OWNED_KEYS.has(key) || CDK_OWNED_PREFIXES.some((prefix) => key.startsWith(prefix));
}

/**
 * One message per context key that is neither a setting of this app nor the CDK's, naming the
 * nearest setting, so a misspelt `-c tokencache=shared` stops synth instead of deploying no cache.
 */
export function unknownContextKeyProblems(keys: readonly string[], settings: readonly string[]): string[] {
  return keys
    .filter((key) => !settings.includes(key) && !isCdkOwnedContextKey(key))
    .map((key) => {
      const { nearest, distance } = nearestSetting(key, settings);
      // A distance within a third of the key's length is a typo; beyond, only a hint.
      return distance <= Math.max(2, Math.floor(key.length / 3))
        ? `Unknown context key "${key}": did you mean "${nearest}"?`
        : `Unknown context key "${key}": not a setting of this app, a CDK feature flag or a key the CDK owns (the nearest setting is "${nearest}")`;
    });
}

function nearestSetting(key: string, settings: readonly string[]): { nearest: string; distance: number } {
  let best = { nearest: settings[0] ?? '', distance: Number.POSITIVE_INFINITY };
  for (const setting of settings) {
    const distance = editDistance(key.toLowerCase(), setting.toLowerCase());
    if (distance < best.distance) best = { nearest: setting, distance };
  }
  return best;
}

/**
 * Optimal string alignment distance: insertions, deletions, substitutions and transpositions of
 * neighbours each cost 1 (`allowedTokenUrl` is 1 from `allowedTokenUrls`, `tokneCache` 1 from `tokenCache`).
 */
export function editDistance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  const at = (i: number, j: number): number => rows[i]?.[j] ?? Number.POSITIVE_INFINITY;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let distance = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) distance = Math.min(distance, at(i - 2, j - 2) + 1);
      (rows[i] as number[])[j] = distance;
    }
  }
  return at(a.length, b.length);
}
