import type { Scenario } from './scenario';
import { runScenario } from './simulation';

/**
 * A failing run reduced to a short schedule: its traffic written out request by request, then every
 * list of the scenario (requests, deaths, adversary writes, table and IdP trouble, rotations) cut down
 * by delta debugging for as long as the run still breaks the same invariant. Returns the scenario as
 * given when the written-out form no longer fails that way (latencies drawn in another order).
 */
export async function shrink(plan: Scenario, rule: string, maxRuns = 400): Promise<{ scenario: Scenario; runs: number }> {
  let runs = 0;
  const fails = async (candidate: Scenario): Promise<boolean> => {
    runs++;
    const result = await runScenario(candidate);
    return result.violations.some((violation) => violation.rule === rule);
  };
  const first = await runScenario(plan);
  const written: Scenario = {
    ...plan,
    traffic: {
      kind: 'scripted',
      arrivals: first.record.requests.map((asked) => ({
        at: asked.arrivedAt,
        instance: Number(asked.instance.slice(1).split('.')[0]),
        key: asked.key,
        ...(asked.noCache ? { noCache: true } : {}),
      })),
    },
  };
  if (!(await fails(written))) return { scenario: plan, runs };
  let current = written;
  const lists = ['arrivals', 'deaths', 'tampering', 'table', 'idp', 'rotations', 'pepper'] as const;
  for (const list of lists) {
    const get = (scenario: Scenario): readonly unknown[] =>
      list === 'arrivals' ? (scenario.traffic as Extract<Scenario['traffic'], { kind: 'scripted' }>).arrivals : scenario[list];
    const set = (scenario: Scenario, items: readonly unknown[]): Scenario =>
      list === 'arrivals' ? { ...scenario, traffic: { kind: 'scripted', arrivals: items as never } } : { ...scenario, [list]: items };
    // The first table and IdP phases are the world's normal: they stay.
    const kept = list === 'table' || list === 'idp' ? 1 : 0;
    let chunk = Math.max(1, Math.floor((get(current).length - kept) / 2));
    while (chunk >= 1 && runs < maxRuns) {
      let removed = false;
      for (let start = kept; start < get(current).length && runs < maxRuns;) {
        const items = get(current);
        const candidate = set(current, [...items.slice(0, start), ...items.slice(start + chunk)]);
        if (await fails(candidate)) {
          current = candidate;
          removed = true;
        } else start += chunk;
      }
      if (!removed) chunk = Math.floor(chunk / 2);
    }
  }
  const last = (current.traffic as Extract<Scenario['traffic'], { kind: 'scripted' }>).arrivals.at(-1)?.at ?? 0;
  return { scenario: { ...current, durationMs: Math.min(current.durationMs, last + 1000) }, runs };
}
