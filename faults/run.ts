// `npm run faults`: the token cache under trouble. Three fleets of K processes (TOKEN_CACHE `shared`, `memory` and `off`),
// each process running the deployed bundle and taking requests as a Lambda instance does, work side by side against one
// scripted IdP and one dynalite behind a proxy that makes the table slow or hang, all on 127.0.0.1. Each row of
// scenarios.ts runs the three at once; the run prints one markdown table, and exits 1 on any miss it names on stderr.
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream, mkdtempSync, rmSync, type WriteStream } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { build } from 'esbuild';
import { lambdaBuildOptions } from '../infra/bundling';
import { tokenEvent } from '../local/api-gateway-event';
import { type HandlerProcess, startHandlerProcess } from '../local/handler-process';
import { runScript } from '../local/script-entry';
import { forkScript, startServicesProcess } from '../local/services-process';
import { startTableProxy } from '../local/table-proxy';
import { readToken, type ScriptedIdp, startScriptedIdp } from './idp';
import type { ReplayCommand, ReplayReport } from './replayer';
import { MODES, type Mode, type Scenario, scenarios } from './scenarios';
import { type Answer, bodyOf, Tally } from './tally';

const DEADLINE_MS = 5000;
const [TABLE, PEPPER_SECRET] = ['faults', 'faults-pepper'];
const HELP = `npm run faults [-- --k N] [--span SECONDS] [--only TEXT,...] [--answers FILE]

The token cache under trouble: three fleets of K processes, each running the deployed bundle as a Lambda instance
(TOKEN_CACHE=shared, TOKEN_CACHE=memory and TOKEN_CACHE=off), side by side against one scripted IdP and one dynalite
that the rows make slow or hang, all on 127.0.0.1.

  --k N           function instances (one process each) in each mode's fleet (default 8)
  --span SECONDS  how long callers keep coming in each row (default 10); the IdP outage (60 s) and hold (18 s) rows
                  keep their own timelines, and the write-back row records for 6 s before it
  --only TEXT,... run only the rows whose name contains one of the TEXTs; a comma followed by a space is part of a
                  TEXT, as in the row names, so a whole name picks out one row ("IdP 4.0 s, 1 in flight")
  --answers FILE  write every answer to FILE, a JSON line each (row, mode, client id, when sent, ms, status, x-token-cache,
                  when its token was issued, what is wrong with it), and after each row what the IdP answered each client id
                  and when (times in ms since the row started)

Prints one markdown table (stdout) and progress lines (stderr). Exits 1 when any answer of any mode comes more than
100 ms after its ${DEADLINE_MS / 1000} s deadline, when \`shared\` answers a share of 200s under 99% of \`off\`'s in a row, when any mode
answers with a token of another key or within 5 s of its expiry, or when \`shared\` asks the IdP more often per key than a
row allows.`;

type Fleets = Record<Mode, HandlerProcess[]>;
type Tallies = Record<Mode, Tally>;

interface Campaign {
  readonly idp: ScriptedIdp;
  readonly proxy: Awaited<ReturnType<typeof startTableProxy>>;
  readonly replayer: ChildProcess;
  readonly fleets: Fleets;
  readonly start: (mode: Mode) => Promise<HandlerProcess>;
  /** Where each answer is written as a JSON line, if asked. */
  readonly answers: WriteStream | undefined;
}

async function main(): Promise<number> {
  const values = readArgs();
  if (values === undefined) return 2;
  const k = Number(values.k ?? 8);
  const spanS = Number(values.span ?? 10);
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  if (!Number.isInteger(k) || k < 2 || !(spanS > 0)) {
    console.error(`--k takes a whole number from 2, --span a number of seconds\n\n${HELP}`);
    return 2;
  }
  const rows = scenarios(spanS * 1000)
    .map((scenario, index) => ({ scenario, index }))
    // Row names hold ", ": only a comma without a space after it separates TEXTs.
    .filter(({ scenario }) => (values.only ?? '').split(/,(?! )/).some((text) => scenario.name.includes(text)));
  const budgetMs = rows.reduce((sum, { scenario }) => sum + scenario.spanMs + 15_000, 180_000);
  const giveUp = () => {
    console.error(`faults: gave up after ${Math.round(budgetMs / 1000)} s`);
    process.exit(1);
  };
  setTimeout(giveUp, budgetMs).unref();
  // Other work on the machine slows every fleet alike, but makes the deadline rows harder: the progress lines say how busy it was.
  const load = () =>
    loadavg()
      .map((value) => value.toFixed(1))
      .join(' ');

  const dir = mkdtempSync(join(tmpdir(), 'faults-'));
  const bundle = join(dir, 'index.js');
  // The function as deployed: the bundle the stack builds, with its options.
  await build(lambdaBuildOptions(bundle));
  const services = await startServicesProcess(TABLE, PEPPER_SECRET);
  const proxy = await startTableProxy(services.endpoints.dynamoDb);
  const idp = await startScriptedIdp();
  const replayer = await forkScript<'ready'>(join(__dirname, 'replayer.ts'), [services.endpoints.dynamoDb, TABLE]);
  const env = (mode: Mode) => ({
    ...services.environment,
    // The table through the proxy that makes it slow or hang.
    AWS_ENDPOINT_URL_DYNAMODB: proxy.endpoint,
    TOKEN_CACHE: mode,
    UPSTREAM_TIMEOUT_MS: String(DEADLINE_MS),
    TOKEN_URL_ALLOWLIST: idp.origin,
    POWERTOOLS_METRICS_NAMESPACE: 'TokenExchange',
  });
  // Warm, as a Lambda instance is once it has answered: the pepper loaded, the connections open.
  const start = async (mode: Mode) => {
    const instance = await startHandlerProcess(env(mode), { bundle });
    await instance.invoke(eventFor(idp, 'faults-warm'));
    return instance;
  };
  console.error(`faults: starting ${MODES.length} fleets of ${k} processes; load average ${load()}`);
  const fleets = Object.fromEntries(
    await Promise.all(MODES.map(async (mode) => [mode, await Promise.all(Array.from({ length: k }, () => start(mode)))] as const)),
  ) as Fleets;
  const answers = values.answers === undefined ? undefined : createWriteStream(values.answers);
  const campaign: Campaign = { idp, proxy, replayer: replayer.child, fleets, start, answers };

  const lines: string[] = [];
  const misses: string[] = [];
  for (const [done, { scenario, index }] of rows.entries()) {
    console.error(`faults: [${done + 1}/${rows.length}] ${scenario.name} (${scenario.spanMs / 1000} s); load average ${load()}`);
    const { tallies, replayed } = await runScenario(campaign, scenario, index);
    for (const mode of MODES) console.error(`faults:   ${progress(mode, tallies[mode])}`);
    if (replayed) console.error(`faults:   wrote back ${replayed.writes} times ${replayed.versions} versions of ${replayed.items} items`);
    lines.push(row(scenario, tallies));
    misses.push(...missed(scenario, tallies));
  }

  console.log(
    `\`npm run faults\`: K=${k} processes a mode on the deployed bundle, ${DEADLINE_MS / 1000} s deadline, callers back to back for ` +
      `${spanS} s (50 in flight and the burst: one mode at a time); the IdP and table rows' tokens never kept. Cells: 200s/answers ` +
      `(other statuses), IdP requests, p50/p99 ms; **late**: past the deadline + 100 ms; **near expiry**: a token in its last 5 s.\n`,
  );
  console.log(`| row | ${MODES.map((mode) => `\`${mode}\``).join(' | ')} | 200s \`shared\`/\`off\` |`);
  console.log(`|---|${MODES.map(() => '---').join('|')}|---:|`);
  for (const line of lines) console.log(line);
  for (const miss of misses) console.error(`faults: MISS ${miss}`);
  if (misses.length === 0) console.error('faults: every row met its targets');

  await Promise.all(Object.values(fleets).flatMap((fleet) => fleet.map((instance) => instance.stop())));
  await Promise.all([proxy.close(), idp.close()]);
  replayer.child.disconnect();
  await Promise.all([replayer.exited, services.stop()]);
  rmSync(dir, { recursive: true, force: true });
  answers?.end();
  return misses.length > 0 ? 1 : 0;
}

/** The command line's options, or undefined (after saying why) when it is not one. */
function readArgs() {
  const string = { type: 'string' } as const;
  try {
    return parseArgs({ options: { k: string, span: string, only: string, answers: string, help: { type: 'boolean' } } }).values;
  } catch (error) {
    console.error(`${error instanceof Error ? error.message : String(error)}\n\n${HELP}`);
    return undefined;
  }
}

async function runScenario(campaign: Campaign, scenario: Scenario, index: number) {
  const { idp, proxy, replayer, fleets } = campaign;
  // A fresh client id per row, mode and key: nothing kept, remembered or held carries over.
  const clientId = (mode: Mode) => (key: number) => `s${index}-${mode}-k${key}`;
  const tallies = {} as Tallies;
  const replay = scenario.replay;
  if (replay) await command(replayer, { kind: 'record' });
  proxy.set(scenario.table);
  // Warm under the row's table and IdP, each instance with a client id of its own that the IdP answers as the row's key
  // 0 (its name ends in `-k0`): what it has lately seen, the IdP's pace included, is what it meets.
  idp.play(scenario.idp, Date.now());
  await Promise.all(MODES.flatMap((mode) => fleets[mode].map((instance, i) => askOne(idp, instance, `s${index}-${mode}-warm${i}-k0`))));
  // Each group of modes works at once against the IdP's script, from the group's own start.
  for (const modes of scenario.alone ? MODES.map((mode) => [mode]) : [MODES]) {
    const startedAt = Date.now();
    for (const mode of modes) tallies[mode] = new Tally(startedAt, DEADLINE_MS, scenario.bucketMs);
    idp.play(scenario.idp, startedAt);
    const writing = Promise.all(
      (replay ?? []).map(({ afterMs, gapMs }) =>
        sleep(afterMs).then(() => replayer.send({ kind: 'replay', gapMs } satisfies ReplayCommand)),
      ),
    );
    const cpuMs = (mode: Mode) => fleets[mode].reduce((sum, instance) => sum + instance.cpuMs, 0);
    const cpuBefore = new Map(modes.map((mode) => [mode, cpuMs(mode)]));
    await Promise.all(
      modes.map((mode) =>
        drive(campaign, fleets[mode], scenario, startedAt, clientId(mode), (answer) => {
          const wrong = tallies[mode].add(answer);
          const { clientId, sentAt, ms, status, cache } = answer;
          const issued = readToken(bodyOf(answer).access_token)?.issuedAt;
          const line = { row: scenario.name, mode, clientId, at: sentAt - startedAt, ms: Math.round(ms), status, cache };
          campaign.answers?.write(`${JSON.stringify({ ...line, tokenIssuedAt: issued && issued - startedAt, wrong })}\n`);
        }),
      ),
    );
    await writing;
    for (const mode of modes) tallies[mode].cpuMs = cpuMs(mode) - (cpuBefore.get(mode) ?? 0);
  }
  const replayed = replay ? await command<ReplayReport>(replayer, { kind: 'stop' }) : undefined;
  proxy.set({ kind: 'pass' });
  for (const mode of MODES) {
    const visits = Array.from({ length: scenario.keys }, (_, key) => idp.visits.get(clientId(mode)(key)) ?? []);
    tallies[mode].idpRequests = visits.reduce((sum, one) => sum + one.length, 0);
    tallies[mode].idpPerKeyMax = Math.max(...visits.map((one) => one.length));
    for (const [key, one] of visits.entries()) {
      const idpAnswered = one.map(({ at, status }) => [at - tallies[mode].startedAt, status]);
      campaign.answers?.write(`${JSON.stringify({ row: scenario.name, mode, clientId: clientId(mode)(key), idpAnswered })}\n`);
    }
  }
  if (scenario.shape.kind === 'killed-holder') {
    for (const mode of MODES) fleets[mode][0] = await campaign.start(mode);
  }
  // Table calls the proxy held end at their own deadline: let them, before the next row.
  await sleep(1500);
  return { tallies, replayed };
}

/** One mode's callers for one row, each answer handed to `record` as it comes. */
async function drive(
  campaign: Campaign,
  fleet: HandlerProcess[],
  scenario: Scenario,
  startedAt: number,
  clientId: (key: number) => string,
  record: (answer: Answer) => void,
): Promise<void> {
  const ask = (instance: HandlerProcess, key: number) => askOne(campaign.idp, instance, clientId(key));
  const backToBack = async (instance: HandlerProcess, first: number) => {
    for (let n = first; Date.now() < startedAt + scenario.spanMs; n++) record(await ask(instance, n % scenario.keys));
  };
  const { shape } = scenario;
  switch (shape.kind) {
    case 'callers':
      await Promise.all(
        fleet.flatMap((instance, i) => Array.from({ length: shape.inFlight }, (_, j) => backToBack(instance, i * shape.inFlight + j))),
      );
      return;
    case 'burst': {
      // Each instance takes requests for every key: request r goes to instance r * K / requests.
      const instance = (r: number) => fleet[Math.floor((r * fleet.length) / shape.requests)] as HandlerProcess;
      const requests = Array.from({ length: shape.requests }, (_, r) => ask(instance(r), r % scenario.keys));
      for (const answer of await Promise.all(requests)) record(answer);
      return;
    }
    case 'killed-holder': {
      const [holder, ...others] = fleet as [HandlerProcess, ...HandlerProcess[]];
      // Its answer dies with it.
      void ask(holder, 0);
      const holding = clientId(0);
      for (let waited = 0; (campaign.idp.visits.get(holding)?.length ?? 0) === 0 && waited < DEADLINE_MS; waited += 5) await sleep(5);
      await holder.kill();
      await Promise.all(others.map((instance, i) => backToBack(instance, i)));
      return;
    }
  }
}

const events = new Map<string, APIGatewayProxyEventV2>();
function eventFor(idp: ScriptedIdp, clientId: string): APIGatewayProxyEventV2 {
  const known = events.get(clientId);
  if (known) return known;
  // Each row's IdP at a path of its own: an instance's memory of the IdP's pace (the hedge's) does not carry over from a
  // row with another IdP, as its client ids do not.
  const row = /^s\d+-/.exec(clientId)?.[0];
  const tokenUrl = row ? `${idp.origin}/${row.slice(0, -1)}/token` : idp.tokenUrl;
  const event = tokenEvent({ client_id: clientId, client_secret: 'faults-secret', access_token_url: tokenUrl });
  events.set(clientId, event);
  return event;
}

async function askOne(idp: ScriptedIdp, instance: HandlerProcess, clientId: string): Promise<Answer> {
  const sentAt = Date.now();
  try {
    const { result, ms } = await instance.measure(eventFor(idp, clientId));
    const cache = String(result.headers?.['x-token-cache'] ?? '');
    return { clientId, sentAt, ms, status: result.statusCode ?? 0, cache, body: String(result.body ?? '') };
  } catch {
    return { clientId, sentAt, ms: Date.now() - sentAt, status: 0, cache: '', body: '' };
  }
}

function cell(tally: Tally, perKey: boolean): string {
  const others = [...tally.statuses]
    .filter(([status]) => status !== 200)
    .sort(([a], [b]) => a - b)
    .map(([status, count]) => `${count} ${status === 0 ? 'lost' : status}`);
  const wrong = [...tally.wrong].map(([what, count]) => `**${count} ${what}**`);
  return [
    `${tally.ok}/${tally.answered}${others.length > 0 ? ` (${others.join(', ')})` : ''}`,
    `${tally.idpRequests}${perKey ? ` (${tally.idpPerKeyMax}/key)` : ''}`,
    `${Math.round(tally.percentile(0.5))}/${Math.round(tally.percentile(0.99))}`,
    ...(tally.late > 0 ? [`**${tally.late} late**`] : []),
    ...wrong,
  ].join(', ');
}

function row(scenario: Scenario, tallies: Tallies): string {
  const { shared, off } = tallies;
  const ratio = off.ok === 0 ? '-' : `${((shared.ok / off.ok) * 100).toFixed(0)}%`;
  const perKey = scenario.sharedPerKey !== undefined;
  return `| ${scenario.name} | ${MODES.map((mode) => cell(tallies[mode], perKey)).join(' | ')} | ${ratio} |`;
}

function progress(mode: Mode, tally: Tally): string {
  const cache = [...tally.cache].map(([header, count]) => `${count} ${header || 'without x-token-cache'}`).join(', ');
  const timeline = tally.timeline.map(({ ok, answered }) => `${ok}/${answered}`).join(' ');
  const failed = tally.lastFailedAt === undefined ? '' : `; the last not 200 sent at ${(tally.lastFailedAt / 1000).toFixed(1)} s`;
  const cpu = `, CPU ${(tally.cpuMs / Math.max(1, tally.answered)).toFixed(1)} ms an answer`;
  return `${mode.padEnd(6)} ${cell(tally, true)}, max ${Math.round(tally.percentile(1))} ms${cpu}; 200s: ${cache || 'none'}${failed}; 200s/answers by ${tally.bucketMs / 1000} s: ${timeline}`;
}

/** What a row missed: lateness, wrong tokens, too many IdP requests, or `shared` answering less than `off`. */
function missed(scenario: Scenario, tallies: Tallies): string[] {
  const misses: string[] = [];
  for (const mode of MODES) {
    const tally = tallies[mode];
    if (tally.late > 0) misses.push(`${scenario.name}: \`${mode}\` answered ${tally.late} past the deadline + 100 ms`);
    for (const [what, count] of tally.wrong) misses.push(`${scenario.name}: \`${mode}\` answered ${count} tokens: ${what}`);
  }
  const { shared, off } = tallies;
  // Callers come back to back, so a mode that answers later is asked less often: the share of 200s is what compares.
  const share = (tally: Tally) => (tally.answered === 0 ? 0 : tally.ok / tally.answered);
  if (share(shared) < 0.99 * share(off)) {
    misses.push(
      `${scenario.name}: \`shared\` answered ${shared.ok} of ${shared.answered} with 200, under 99% of \`off\`'s ${off.ok} of ${off.answered}`,
    );
  }
  if (scenario.sharedPerKey !== undefined && shared.idpPerKeyMax > scenario.sharedPerKey) {
    misses.push(`${scenario.name}: \`shared\` asked the IdP ${shared.idpPerKeyMax} times for one key (at most ${scenario.sharedPerKey})`);
  }
  return misses;
}

/** Send the replayer a command and take its one answer. */
async function command<T>(child: ChildProcess, sent: ReplayCommand): Promise<T> {
  const answered = once(child, 'message') as Promise<[T]>;
  child.send(sent);
  return (await answered)[0];
}

runScript('faults', main);
