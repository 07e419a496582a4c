import type { SimRecord, Violation } from '../record';

// Placeholder until the independent judge lands: the deadline and the tokens' identity only.
export function judge(record: SimRecord): Violation[] {
  const violations: Violation[] = [];
  const issued = new Map(record.idp.filter((call) => call.token).map((call) => [call.token as string, call]));
  for (const answer of record.answers) {
    const asked = record.requests[answer.request];
    if (!asked) continue;
    if (answer.answeredAt - asked.arrivedAt > record.upstreamTimeoutMs + 1e-6) violations.push({ rule: 'deadline', at: answer.answeredAt, detail: `#${asked.id}` });
    if (answer.status === 200) {
      const call = answer.token ? issued.get(answer.token) : undefined;
      if (!call || call.key !== asked.key) violations.push({ rule: 'issued', at: answer.answeredAt, detail: `#${asked.id} ${answer.token}` });
    }
  }
  return violations;
}
