/**
 * The child side of idp-process.ts: the embedded IdP (oidc-provider, an ES module jest's workers
 * cannot load) with the options given in IDP_OPTIONS, reporting its issuer over IPC.
 */
import { type IdpOptions, startIdp } from '../../local/idp';

void startIdp(JSON.parse(process.env.IDP_OPTIONS ?? '{}') as IdpOptions).then((idp) => {
  process.send?.({ issuer: idp.issuer, tokenUrl: idp.tokenUrl });
  process.on('disconnect', () => void idp.close().then(() => process.exit(0)));
});
