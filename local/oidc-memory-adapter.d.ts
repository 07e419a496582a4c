// oidc-provider's own in-memory store, the one it falls back to when given none (its typings link to
// this file). Passed explicitly, it does not print the "development-only adapter" warning at start.
declare module 'oidc-provider/lib/adapters/memory_adapter.js' {
  import type { AdapterFactory } from 'oidc-provider';

  export function createMemoryAdapter(clockTolerance?: number): AdapterFactory;
}
