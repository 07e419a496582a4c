import { type Idp, startIdp } from '../../local/idp';
import { IDP_ENV_NAMES } from './idp-env';

/** global-teardown.ts closes it; globalSetup and globalTeardown share jest's parent process. */
export const IDP_HANDLE = Symbol.for('token-exchange.test.idp');

/**
 * One real IdP (oidc-provider on 127.0.0.1, a free port) for the whole run. Its details go through
 * process.env, which test workers inherit; tests read them with idpEnv() from ./idp-env.
 */
export default async function globalSetup(): Promise<void> {
  const idp: Idp = await startIdp({ port: 0 });
  (globalThis as Record<symbol, unknown>)[IDP_HANDLE] = idp;
  Object.assign(process.env, {
    [IDP_ENV_NAMES.issuer]: idp.issuer,
    [IDP_ENV_NAMES.tokenUrl]: idp.tokenUrl,
    [IDP_ENV_NAMES.basicClientId]: idp.clients.basic.clientId,
    [IDP_ENV_NAMES.basicClientSecret]: idp.clients.basic.clientSecret,
    [IDP_ENV_NAMES.postClientId]: idp.clients.post.clientId,
    [IDP_ENV_NAMES.postClientSecret]: idp.clients.post.clientSecret,
  });
}
