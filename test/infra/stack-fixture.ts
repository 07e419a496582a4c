import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { TokenExchangeStack, type TokenExchangeStackProps } from '../../infra/token-exchange-stack';

const CDK_JSON = path.join(__dirname, '..', '..', 'cdk.json');

/** cdk.json's context (its feature flags above all), so tests synthesize what `cdk synth` does. */
export function projectContext(): Record<string, unknown> {
  return (JSON.parse(readFileSync(CDK_JSON, 'utf8')) as { context: Record<string, unknown> }).context;
}

/**
 * The stack refuses to guess whether any public token URL is fine (no open relay by accident), so a
 * test that names no allowlist says so explicitly, here: any public https URL.
 */
export function withTokenUrlChoice<T extends Record<string, unknown>>(settings: T): T {
  const chosen = ['allowedTokenUrls', 'allowAnyPublicTokenUrl'].some((key) => Object.hasOwn(settings, key));
  return chosen ? settings : { allowAnyPublicTokenUrl: true, ...settings };
}

/**
 * An app as `cdk synth` builds it. `bundle: false` skips esbuild (the function's code is then a
 * placeholder), for tests that look only at the template.
 */
export function newApp({ bundle, context = {} }: { bundle: boolean; context?: Record<string, unknown> }): App {
  return new App({
    context: { ...projectContext(), ...(bundle ? {} : { 'aws:cdk:bundling-stacks': [] }), ...withTokenUrlChoice(context) },
  });
}

/** One stack and its template, synthesized once. */
export function synthesize(
  props: TokenExchangeStackProps = {},
  { bundle = false } = {},
): { app: App; stack: TokenExchangeStack; template: Template } {
  const app = newApp({ bundle });
  const stack = new TokenExchangeStack(app, 'TokenExchangeTest', withTokenUrlChoice({ ...props }));
  return { app, stack, template: Template.fromStack(stack) };
}
