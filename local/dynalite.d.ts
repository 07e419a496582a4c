// dynalite ships no types; this is the part local/dynamodb-local.ts uses.
declare module 'dynalite' {
  import type { Server } from 'node:http';

  interface DynaliteOptions {
    /** Milliseconds a new table stays CREATING (default 500). */
    createTableMs?: number;
    deleteTableMs?: number;
    updateTableMs?: number;
    /** A LevelDB directory; in memory when left out. */
    path?: string;
  }

  /** An http.Server that answers the DynamoDB API from an in-memory store. */
  function dynalite(options?: DynaliteOptions): Server;
  export = dynalite;
}
