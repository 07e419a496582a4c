// Types for the two simple-oauth2 modules exchange.ts builds its grant from. The package's own
// entry point validates options with joi (about 170 KiB and 20 ms of cold start); the parts
// themselves take an already-normalised configuration.
declare module 'simple-oauth2/lib/client' {
  export class Client {
    constructor(config: unknown);
  }
}

declare module 'simple-oauth2/lib/client-credentials-grant-type' {
  import type { AccessToken, Token, WreckHttpOptions } from 'simple-oauth2';

  class ClientCredentialsGrantType {
    constructor(config: unknown, client: unknown);
    getToken(params: Record<string, string | readonly string[]>, httpOptions?: WreckHttpOptions): Promise<AccessToken>;
    createToken(token: Token): AccessToken;
  }
  export = ClientCredentialsGrantType;
}
