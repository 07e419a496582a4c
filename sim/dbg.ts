import { simulate } from './simulation';
(async () => {
  const seed = Number(process.argv[2]); const req = Number(process.argv[3] ?? 60);
  const r = await simulate(seed, req);
  console.log(JSON.stringify({ cache: r.scenario.cache, T: r.scenario.upstreamTimeoutMs, skews: r.scenario.skewsMs, keys: r.scenario.keys.map(k => k.id + ':' + k.kind), idp: r.scenario.idp.slice(0, 8), table: r.scenario.table.slice(0,6), ttl: r.scenario.ttlLagMs, rot: r.scenario.rotations, pepper: r.scenario.pepper, deaths: r.scenario.deaths, tamper: r.scenario.tampering }, null, 0));
  for (const v of r.violations.slice(0, 5)) console.log(v.rule, v.at.toFixed(1), v.detail);
})();
(async () => {
  if (!process.argv[4]) return;
  const r = await simulate(Number(process.argv[2]), Number(process.argv[3] ?? 60));
  const [from = 0, to = Infinity] = process.argv[4].split(":").map(Number);
  for (const c of r.record.idp.filter((c) => c.sentAt >= from && c.sentAt <= to)) console.log(`call ${c.id} #${c.request} ${c.instance} ${c.key} sent ${c.sentAt.toFixed(1)} ended ${c.endedAt.toFixed(1)} budget ${c.budgetMs} ${c.outcome} ${c.token ?? ''} arrived ${r.record.requests[c.request]?.arrivedAt.toFixed(1)}`);
})();
