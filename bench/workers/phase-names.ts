/** The phases worker's subjects: each step adds one layer to the one before. */
export const PHASE_STEPS = {
  floor: 'Floor: node:https, keep-alive Agent',
  simpleOauth2: 'simple-oauth2 `getToken` (client built per call, guarded agent)',
  exchangeToken: '`exchangeToken` (adds deadline timer, request tracking, answer checks)',
  handlerNoLogs: 'Handler with a no-op observability (adds parsing, policy, response)',
  handler: 'Handler as deployed (adds the Powertools log line and EMF metrics)',
} as const;

/** Synchronous parts, timed in the same rounds. */
export const PHASE_PARTS = {
  parseAndPolicy: '`parseTokenRequest` + `checkTokenUrl`',
  logAndMetrics: '`observability.record` (one log line + EMF metrics)',
} as const;

export type PhaseName = keyof typeof PHASE_STEPS | keyof typeof PHASE_PARTS;
