/** An object whose properties can be read: not null, not an array (no event part, field or metadata document is one). */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
