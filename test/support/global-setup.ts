import type * as LocalIdp from '../../local/idp';
import type { Idp } from '../../local/idp';
import { exportCallerKey, generateCallerKey, privateKeyJwtClient } from './caller-assertions';
import { IDP_ENV_NAMES, KEY_CLIENT_ID } from './idp-env';

/** global-teardown.ts closes it; globalSetup and globalTeardown share jest's parent process. */
export const IDP_HANDLE = Symbol.for('token-exchange.test.idp');

/**
 * One real IdP (oidc-provider on 127.0.0.1, a free port) for the whole run. Its details go through
 * process.env, which test workers inherit; tests read them with idpEnv() from ./idp-env.
 */
export default async function globalSetup(): Promise<void> {
  // What the workers inherit so that a passing run prints nothing but its results: the AWS SDK's notice that its
  // 2027 releases need Node.js 22, and Powertools' warning of a metrics namespace the stack always sets.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  process.env.POWERTOOLS_METRICS_NAMESPACE ??= 'TokenExchange';
  const { startIdp } = withoutRuntimeWarning(() => require('../../local/idp') as typeof LocalIdp);
  // A private_key_jwt caller: the IdP learns its public key; the tests sign with the private one.
  const callerKey = generateCallerKey();
  const idp: Idp = await startIdp({ port: 0, extraClients: [privateKeyJwtClient(KEY_CLIENT_ID, callerKey.publicJwk)] });
  (globalThis as Record<symbol, unknown>)[IDP_HANDLE] = idp;
  Object.assign(process.env, {
    [IDP_ENV_NAMES.issuer]: idp.issuer,
    [IDP_ENV_NAMES.tokenUrl]: idp.tokenUrl,
    [IDP_ENV_NAMES.basicClientId]: idp.clients.basic.clientId,
    [IDP_ENV_NAMES.basicClientSecret]: idp.clients.basic.clientSecret,
    [IDP_ENV_NAMES.postClientId]: idp.clients.post.clientId,
    [IDP_ENV_NAMES.postClientSecret]: idp.clients.post.clientSecret,
    [IDP_ENV_NAMES.jwtClientId]: idp.clients.jwt.clientId,
    [IDP_ENV_NAMES.jwtClientSecret]: idp.clients.jwt.clientSecret,
    [IDP_ENV_NAMES.keyClientKey]: exportCallerKey(callerKey),
  });
}

/**
 * oidc-provider warns as it loads, on Node.js 20, that it supports LTS lines from 22 on: true, and in the
 * README, but no test's business. That one line is dropped; any other warning passes.
 */
function withoutRuntimeWarning<T>(load: () => T): T {
  const warn = console.warn;
  console.warn = (...args: unknown[]) =>
    String(args[0]).includes('oidc-provider WARNING: Unsupported runtime') ? undefined : warn(...args);
  try {
    return load();
  } finally {
    console.warn = warn;
  }
}
