// The campaign's rows: what the IdP answers and when, what the table does, and how callers come. Each row runs the three
// modes' fleets at once against the same script, each with client ids of its own.
import type { ProxyMode } from '../local/table-proxy';
import type { IdpAnswer, IdpScript } from './idp';

export const MODES = ['shared', 'memory', 'off'] as const;
export type Mode = (typeof MODES)[number];

/** How callers come: back to back (`inFlight` per instance), all at once, or after the holder of an exchange was killed. */
export type Shape =
  | { readonly kind: 'callers'; readonly inFlight: number }
  | { readonly kind: 'burst'; readonly requests: number }
  | { readonly kind: 'killed-holder' };

export interface Scenario {
  readonly name: string;
  readonly keys: number;
  readonly shape: Shape;
  /** How long callers keep coming (a burst comes once). */
  readonly spanMs: number;
  readonly idp: IdpScript;
  readonly table: ProxyMode;
  /** A writer records the table's item versions from the start, and from each `afterMs` writes them back `gapMs` apart (0: at table speed). */
  readonly replay?: readonly { readonly afterMs: number; readonly gapMs: number }[];
  /** The most IdP requests one key may take with `shared`: the contract's bursts rule, where the table answers and the IdP is healthy. */
  readonly sharedPerKey?: number;
  /** The progress lines count answers per this span of time. */
  readonly bucketMs: number;
  /** Run the modes one after another: at 400 requests in flight a fleet, three at once would only measure a 2-core machine. */
  readonly alone?: boolean;
}

// A real IdP answers in tens to hundreds of milliseconds.
const IDP_MS = 50;
/** Kept for the whole campaign. */
const KEPT_S = 3600;
/** Under 30 s, never kept: every request (or burst) goes through the cache's exchange again. */
const UNKEPT_S = 20;
const token = (expiresIn: number, delayMs = IDP_MS): IdpAnswer => ({ delayMs, status: 200, expiresIn });
const during = (atMs: number, fromMs: number, toMs: number): boolean => atMs >= fromMs && atMs < toMs;

/** The rows, callers coming for `spanMs` where a row's own timeline does not set it. */
export function scenarios(spanMs: number): Scenario[] {
  const callers = (inFlight: number): Shape => ({ kind: 'callers', inFlight });
  const lambda = callers(1);
  const pass: ProxyMode = { kind: 'pass' };
  const slowTable: ProxyMode = { kind: 'delay', ms: 200, upToMs: 300 };
  const base = { keys: 8, shape: lambda, spanMs, table: pass, bucketMs: Math.max(1000, Math.ceil(spanMs / 5)) };
  const slowIdp = (ms: number, inFlight: number): Scenario => ({
    ...base,
    name: `IdP ${(ms / 1000).toFixed(1)} s, ${inFlight} in flight`,
    shape: callers(inFlight),
    idp: () => token(UNKEPT_S, ms),
    alone: inFlight > 1,
  });
  const troubledTable = (trouble: string, table: ProxyMode, idpMs: number): Scenario => ({
    ...base,
    name: `table ${trouble}, IdP ${idpMs < 1000 ? `${idpMs} ms` : `${idpMs / 1000} s`}`,
    table,
    idp: () => token(UNKEPT_S, idpMs),
  });
  // Tokens going stale 5 s after they came (35 s), failures, holds, and tokens never kept: items in every state to write back.
  // The IdP takes 200 ms so that a claim lives long enough for the writer to see it.
  const mixed: IdpScript = (key, atMs) => {
    const second = Math.floor(atMs / 1000);
    if (key === 5 && second % 5 === 2) return { delayMs: 200, status: 502 };
    if (key === 6 && second % 5 === 3) return { delayMs: 200, status: 429, retryAfter: 1 };
    return token(key === 7 ? UNKEPT_S : 35, 200);
  };
  // Recorded for 6 s, then written back at table speed for half the span, then 300 ms apart.
  const replayed: Scenario = {
    ...base,
    name: 'written back: table speed, then 300 ms apart',
    spanMs: 6000 + spanMs,
    idp: mixed,
    replay: [
      { afterMs: 6000, gapMs: 0 },
      { afterMs: 6000 + spanMs / 2, gapMs: 300 },
    ],
    bucketMs: 4000,
  };
  return [
    { ...base, name: '8 keys kept, all healthy', idp: () => token(KEPT_S), sharedPerKey: 2 },
    {
      // Tokens of 40 s: kept, stale at 10 s, expired at 40 s; the IdP fails from 5 s to 50 s.
      ...base,
      name: 'IdP 502 5-50 s, 40 s tokens',
      spanMs: 60_000,
      idp: (_key, atMs) => (during(atMs, 5000, 50_000) ? { delayMs: IDP_MS, status: 502 } : token(40)),
      bucketMs: 5000,
    },
    {
      // Keys 0-3 kept (40 s: stale during the hold), keys 4-7 never kept; 429 Retry-After: 2 from 2 s to 12 s.
      ...base,
      name: 'IdP 429 Retry-After 2, 2-12 s',
      spanMs: 18_000,
      idp: (key, atMs) => (during(atMs, 2000, 12_000) ? { delayMs: IDP_MS, status: 429, retryAfter: 2 } : token(key < 4 ? 40 : UNKEPT_S)),
      bucketMs: 2000,
    },
    slowIdp(4000, 1),
    slowIdp(4600, 1),
    slowIdp(4000, 50),
    slowIdp(4600, 50),
    troubledTable('hangs', { kind: 'hang' }, IDP_MS),
    troubledTable('hangs', { kind: 'hang' }, 4700),
    troubledTable('200-300 ms', slowTable, IDP_MS),
    troubledTable('200-300 ms', slowTable, 4700),
    { ...base, name: 'holder killed, IdP 2 s', keys: 1, shape: { kind: 'killed-holder' }, idp: () => token(KEPT_S, 2000) },
    replayed,
    {
      ...base,
      name: 'cold burst: 400 on 20 keys, table 200-300 ms',
      keys: 20,
      shape: { kind: 'burst', requests: 400 },
      spanMs: 0,
      table: slowTable,
      idp: () => token(KEPT_S),
      sharedPerKey: 2,
      alone: true,
    },
  ];
}
