import type { Idp } from '../../local/idp';
import { IDP_HANDLE } from './global-setup';

/** Close the IdP that global-setup.ts started, so jest ends without open handles. */
export default async function globalTeardown(): Promise<void> {
  const idp = (globalThis as Record<symbol, unknown>)[IDP_HANDLE] as Idp | undefined;
  delete (globalThis as Record<symbol, unknown>)[IDP_HANDLE];
  await idp?.close();
}
