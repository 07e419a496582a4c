// What a simulation run shows from outside the cache: what callers asked and got, what the IdP issued,
// rejected and throttled, what the table and the pepper's store did to each instance's calls, and what
// the world did (deaths, an adversary's writes, a pepper rotation, TTL deletions). The judge reads this
// record and nothing else: not the cache's items, not its constants, not its code.

/** How a key authenticates: a caller's client secret (the client's own or a wrong one), a caller's own `private_key_jwt` assertion, or a stored credential whose secret the broker holds. */
export type KeyKind = 'secret' | 'assertion' | 'credential';

/** One distinct request a caller may send (the contract's "key": same client id, secret, token URL, scope...). */
export interface SimKey {
  readonly id: string;
  readonly client: string;
  readonly tokenUrl: string;
  readonly scope: string;
  readonly kind: KeyKind;
  /** The IdP accepts these credentials: a wrong secret is rejected (unless the IdP is throttling everyone or failing). */
  readonly authentic: boolean;
  /** A stored credential's name (kind `credential` only). */
  readonly credential?: string;
}

/** One function instance's life. A dead instance's successor is a new instance with a name of its own (and the slot's clock). */
export interface InstanceLife {
  readonly name: string;
  /** Its wall clock reads true time plus this (ms); its monotonic clock has an unknown origin of its own. */
  readonly skewMs: number;
  readonly bornAt: number;
  readonly diedAt: number | undefined;
}

/** A caller's request, as it reached an instance. */
export interface Asked {
  readonly id: number;
  readonly instance: string;
  readonly key: string;
  /** `cache-control: no-cache`. */
  readonly noCache: boolean;
  readonly arrivedAt: number;
}

/** What the caller got. A request of an instance that died before answering has no answer. */
export interface Answer {
  readonly request: number;
  readonly answeredAt: number;
  readonly status: number;
  /** The error's `code`, for a status other than 200. */
  readonly code: string | undefined;
  /** `x-token-cache`, for a 200 (the cache is on in every simulation). */
  readonly header: 'hit' | 'miss' | 'stale' | undefined;
  readonly token: string | undefined;
  /** `expires_in` and `ext_expires_in` as the answer states them (absent when the token has none). */
  readonly expiresIn: unknown;
  readonly extExpiresIn: unknown;
  /** The `retry-after` header of a 503, whole seconds. */
  readonly retryAfter: number | undefined;
}

export type IdpOutcome = 'token' | 'unauthorized' | 'throttled' | 'error' | 'timeout';

/** One request that reached the IdP, as the IdP recorded it (a timeout: its caller gave up first). */
export interface IdpCall {
  readonly id: number;
  /** The caller's request that led to it. */
  readonly request: number;
  readonly instance: string;
  readonly key: string;
  readonly sentAt: number;
  /** How long its caller was prepared to wait (the exchange's timeout). */
  readonly budgetMs: number;
  /** How long the IdP took (or would have taken) to answer. */
  readonly latencyMs: number;
  /** When the answer came back, or when the caller's timeout ended the request. */
  readonly endedAt: number;
  readonly outcome: IdpOutcome;
  /** The `Retry-After` of a throttle, seconds. */
  readonly retryAfterS: number | undefined;
  /** The token it issued. */
  readonly token: string | undefined;
  /** The token's `expires_in` (seconds, or a numeric string) and `ext_expires_in` as issued; undefined when it had none. */
  readonly expiresIn: number | string | undefined;
  readonly extExpiresIn: number | string | undefined;
  /** The token answer's size in bytes. */
  readonly bytes: number;
}

/**
 * What the world did to one table call: nothing (`none`), answered slowly (`slow`), never answered
 * (`hang`; a write may still land), failed at once (`error`), took effect but its answer was lost
 * (`lost-answer`), took effect and had its answer cut, so the client sent it again (`retried`), or
 * was refused as too large for an item (`too-large`).
 */
export type TableFault = 'none' | 'slow' | 'hang' | 'error' | 'lost-answer' | 'retried' | 'too-large';

export interface TableCall {
  readonly instance: string;
  /** The key (id) whose item it is, `hold:` and the hold's scope for a hold item, or `?` for an item the simulation cannot name. */
  readonly item: string;
  readonly op: 'get' | 'put';
  readonly sentAt: number;
  /** When its answer reached the caller; undefined when none did. */
  readonly answeredAt: number | undefined;
  readonly fault: TableFault;
  /** For a write that landed: when. */
  readonly landedAt: number | undefined;
}

/** A read of the pepper (the cache's key in Secrets Manager) and what became of it. */
export interface PepperRead {
  readonly instance: string;
  readonly sentAt: number;
  readonly answeredAt: number | undefined;
  readonly fault: 'none' | 'error' | 'hang';
}

/** What someone with write access to the table and no pepper did to one item. */
export interface Tampering {
  readonly at: number;
  readonly item: string;
  /** `replay`: an older copy of the item put back (`of`: when that copy was written). */
  readonly action: 'retype' | 'rewrite' | 'replay' | 'garbage' | 'delete';
  readonly of: number | undefined;
}

/** How the IdP behaves from a moment on, for what `TOKEN_CACHE=off` would have answered. */
export interface IdpPhase {
  readonly from: number;
  readonly minMs: number;
  readonly maxMs: number;
  readonly answer: IdpAnswer;
}

export type IdpAnswer =
  | {
      readonly kind: 'token';
      readonly expiresIn: number | string | undefined;
      readonly extExpiresIn?: number | string | undefined;
      /** The token's size in bytes (a few hundred when unsaid). */
      readonly bytes?: number;
    }
  | { readonly kind: 'reject' }
  | { readonly kind: 'throttle'; readonly retryAfter: number }
  | { readonly kind: 'error' };

/** A whole run, as the judge sees it. Times are true time, in ms from the run's start. */
export interface SimRecord {
  readonly upstreamTimeoutMs: number;
  /** `shared`: memory and the table; `memory`: each instance's memory alone. */
  readonly cache: 'shared' | 'memory';
  /** `lambda`: one request at a time per instance, frozen between them; `concurrent`: many at once, never frozen. */
  readonly mode: 'lambda' | 'concurrent';
  readonly keys: readonly SimKey[];
  readonly instances: readonly InstanceLife[];
  readonly idpPhases: readonly IdpPhase[];
  readonly requests: readonly Asked[];
  readonly answers: readonly Answer[];
  readonly idp: readonly IdpCall[];
  readonly table: readonly TableCall[];
  readonly pepper: readonly PepperRead[];
  readonly tamperings: readonly Tampering[];
  /** When the pepper secret was rotated. */
  readonly rotations: readonly number[];
  /** When the table's TTL deleted an item, and which. */
  readonly deletions: readonly { readonly at: number; readonly item: string }[];
  /** When the run stopped: requests still open then are no violation. */
  readonly endedAt: number;
}

/** A promise of the contract broken, named after the invariant that saw it. */
export interface Violation {
  readonly rule: string;
  readonly at: number;
  readonly detail: string;
}
