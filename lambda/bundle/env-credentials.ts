import { fromEnv } from '@aws-sdk/credential-provider-env';

/**
 * Stands in for `@aws-sdk/credential-provider-node` in the SDK's bundle (infra/bundling.ts). Lambda
 * hands a function its role's credentials in its environment, so the default chain's other sources
 * (profiles, SSO, web identity, the container and instance endpoints) and the clients they need are
 * bytes to load at every cold start and nothing else.
 */
export const defaultProvider: typeof fromEnv = (init) => fromEnv(init);
