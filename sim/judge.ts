import type { ItemKeys } from '../lambda/cache/sealed-item';
import { dominanceMs } from '../lambda/cache/claims';
import { hedgeFor } from '../lambda/cache/rules';
import { CLOCK_TOLERANCE_MS } from '../lambda/cache/time';
import type { IdpRequest, ResponseClass, SimIdp } from './idp';
import type { Scenario, SimKey } from './scenario';
import type { Answered, Violation } from './simulation';
import { openItem } from './simulation';
import type { SimTable, TableNote } from './table';

type WriteNote = Extract<TableNote, { kind: 'write' }>;
const isWrite = (note: TableNote): note is WriteNote => note.kind === 'write';

/** How far apart the instances' clocks may be, as the contract allows. */
const TOLERANCE_MS = 5000;

const STATUS_CLASS: Record<number, ResponseClass> = { 401: 'unauthorized', 502: 'error', 503: 'throttled', 504: 'timeout' };

/**
 * The invariants, checked as the simulation runs: every answer when it is given, every IdP request
 * when it is sent. Each rule says what `TOKEN_CACHE=off` or the contract allows, and what trouble in
 * the same schedule excuses a departure (an instance that died, a write that landed after its caller
 * gave up, an adversary's write, a table in trouble): nothing excuses a token across keys, an expired
 * token, a stale token after its key's rejection landed, a hold nobody earned, or a late answer.
 */
export class Judge {
  readonly violations: Violation[] = [];
  private readonly deaths: { at: number; instance: string }[] = [];
  private readonly troubles: Extract<TableNote, { kind: 'trouble' }>[] = [];
  private readonly tamperings: { pk: string; at: number }[] = [];
  private checkedRequests = 0;
  private checkedNotes = 0;
  private readonly rejections = new Map<string, { at: number; voidsBefore: number }[]>();
  private readonly lateLandings: { pk: string; at: number }[] = [];
  private readonly hedgeMs: number;
  private readonly noCacheArrivals: { key: string; at: number }[] = [];

  constructor(
    private readonly plan: Scenario,
    private readonly idp: SimIdp,
    private readonly table: SimTable,
    private readonly items: ReadonlyMap<string, ItemKeys & { key: string }>,
    private readonly note: (line: string) => void,
  ) {
    this.hedgeMs = hedgeFor(plan.upstreamTimeoutMs);
  }

  died(at: number, instance: string): void {
    this.deaths.push({ at, instance });
  }

  /** How far apart the instances' clocks are: what one dated, another may see this much earlier or later. */
  private get spread(): number {
    return Math.max(...this.plan.skewsMs) - Math.min(...this.plan.skewsMs);
  }

  /** When the instance named `instance` at `at` started: a dead instance's successor takes its name, not its memory. */
  private bornAt(instance: string, at: number): number {
    return this.deaths.filter((death) => death.instance === instance && death.at <= at).at(-1)?.at ?? -Infinity;
  }

  tampered(pk: string, at: number): void {
    this.tamperings.push({ pk, at });
  }

  /** Check one answer as it is given, and whatever reached the IdP or the table since the last check. */
  answered(answer: Answered): void {
    this.catchUp();
    const T = this.plan.upstreamTimeoutMs;
    const { key } = answer;
    if (answer.answeredAt - answer.arrivedAt > T + 1)
      this.fail('deadline', answer, `answered ${answer.answeredAt - answer.arrivedAt} ms after it arrived`);
    if (answer.noCache) this.noCacheArrivals.push({ key: key.id, at: answer.arrivedAt });
    if (answer.status === 200) this.checkToken(answer);
    else this.checkError(answer);
  }

  /** Whatever reached the IdP or the table after the last answer. */
  finish(): void {
    this.catchUp();
  }

  private checkToken(answer: Answered): void {
    const issued = this.idp.issued.get(answer.token ?? '');
    if (!issued) return this.fail('token', answer, `a token the IdP never issued: ${answer.token}`);
    if (issued.key !== answer.key.id) return this.fail('token across keys', answer, `${answer.token} was issued for ${issued.key}`);
    if (issued.expiresIn !== undefined && issued.issuedAt + issued.expiresIn * 1000 <= answer.answeredAt) {
      this.fail('expired', answer, `${answer.token} expired ${answer.answeredAt - issued.issuedAt - issued.expiresIn * 1000} ms before`);
    }
    if (answer.noCache && (answer.header === 'stale' || issued.issuedAt < answer.arrivedAt - 5000 - TOLERANCE_MS)) {
      this.fail(
        'no-cache',
        answer,
        `a no-cache request got ${answer.token}, issued ${answer.arrivedAt - issued.issuedAt} ms before it arrived`,
      );
    }
    if (answer.header === 'stale') this.checkStale(answer, issued.issuedAt);
  }

  /** Never stale with a token received before its key's rejection, once that rejection reached the table or the instance itself. */
  private checkStale(answer: Answered, issuedAt: number): void {
    const own = this.idp.requests.find(
      (request) =>
        request.key === answer.key.id &&
        request.by === answer.instance &&
        request.class === 'unauthorized' &&
        request.endedAt < answer.arrivedAt &&
        issuedAt < request.endedAt,
    );
    if (own) return this.fail('stale after 401', answer, `the instance itself was refused at ${own.endedAt}`);
    for (const landed of this.rejections.get(answer.key.id) ?? []) {
      if (landed.at < answer.arrivedAt && issuedAt < landed.voidsBefore && !this.tamperedKey(answer.key, landed.at, answer.answeredAt)) {
        return this.fail('stale after 401', answer, `the rejection landed in the table at ${landed.at}`);
      }
    }
  }

  private checkError(answer: Answered): void {
    const { key } = answer;
    const held = answer.code === 'upstream_throttled';
    // With `memory`, each instance knows only what it saw itself.
    const seen = (request: IdpRequest) => this.plan.cache === 'shared' || request.by === answer.instance;
    if (held && !this.throttles().some((request) => seen(request) && this.covers(request, key, answer.arrivedAt, answer.answeredAt))) {
      return this.fail('hold nobody earned', answer, 'no throttle of the IdP covers this key');
    }
    const phase = this.idp.phaseAt(answer.arrivedAt);
    const authentic = key.assertion || this.plan.secrets.get(key.client) === key.secret;
    const offWouldAnswer = authentic && phase.answer.kind === 'token' && phase.maxMs <= this.plan.upstreamTimeoutMs;
    if (!offWouldAnswer) return;
    const wanted = STATUS_CLASS[answer.status];
    const shared = this.idp.requests.some(
      (request) =>
        seen(request) &&
        request.class === wanted &&
        (request.class !== 'timeout' || this.realTimeout(request)) &&
        (held ? this.covers(request, key, answer.arrivedAt, answer.answeredAt) : request.key === key.id) &&
        request.sentAt <= answer.answeredAt &&
        // A hold is honoured with the clocks' tolerance on top of the writer's own skew; a failure with the skew alone.
        request.endedAt + windowOf(request) + (request.class === 'throttled' ? 2 : 1) * TOLERANCE_MS >= answer.arrivedAt,
    );
    if (
      shared ||
      this.disturbed(key, answer.arrivedAt - this.plan.upstreamTimeoutMs, answer.answeredAt) ||
      this.troubledWhileWaiting(answer) ||
      this.waitedOnStranded(answer)
    ) {
      return;
    }
    this.fail(
      'worse than off',
      answer,
      `${answer.status} where TOKEN_CACHE=off would have had a token (IdP ${phase.minMs.toFixed(0)}-${phase.maxMs.toFixed(0)} ms)`,
    );
  }

  /**
   * The table failed the request's own calls on its key after the hedge: it was waiting on the table (a
   * live holder's outcome), and lost that time. The hedge covers a table in trouble from the start.
   */
  private troubledWhileWaiting(answer: Answered): boolean {
    return this.troubles.some(
      (trouble) =>
        trouble.by === answer.instance &&
        this.concerns(trouble.pk, answer.key) &&
        trouble.at > answer.arrivedAt + this.hedgeMs &&
        trouble.at <= answer.answeredAt,
    );
  }

  /**
   * The key's item showed the request a claim whose holder's instance then died, or whose visit met the
   * table in trouble, or an adversary's item: a claim that may never be settled, or was made late.
   */
  private waitedOnStranded(answer: Answered): boolean {
    const [pk, keys] = [...this.items.entries()].find(([, candidate]) => candidate.key === answer.key.id) ?? [];
    if (!pk || !keys) return false;
    const writes = this.table.notes.filter(isWrite).filter((note) => note.pk === pk && note.at <= answer.answeredAt);
    const holderOf = (note: WriteNote | undefined) => {
      const state = note && openItem(keys, note.item);
      return state?.kind === 'key' && state.activity.kind === 'claim' ? state.activity.claim.holder : undefined;
    };
    const before = writes.filter((note) => note.at <= answer.arrivedAt).at(-1);
    // An adversary's item still in place when the request came (a replayed claim is waited out, as a dead holder's).
    const tampered = this.tamperings.filter((tampering) => tampering.pk === pk && tampering.at <= answer.arrivedAt).at(-1);
    if (tampered && tampered.at > (before?.at ?? -Infinity)) return true;
    const seen = [before, ...writes.filter((note) => note.at > answer.arrivedAt)];
    return seen.some((note) => {
      const holder = holderOf(note);
      const claimed = holder && (writes.find((write) => holderOf(write) === holder) as WriteNote);
      if (!claimed) return false;
      const since = (at: number) => at >= claimed.at && at <= answer.answeredAt;
      // Trouble before the claim counts too: a holder the table held up claims late, with less of its deadline left.
      const inVisit = (at: number) => at >= claimed.at - this.plan.upstreamTimeoutMs && at <= answer.answeredAt;
      return (
        this.deaths.some((death) => death.instance === claimed.by && since(death.at)) ||
        this.troubles.some((trouble) => trouble.by === claimed.by && trouble.pk === pk && inVisit(trouble.at))
      );
    });
  }

  /** A timeout that is the IdP's doing: it took longer than an exchange started within the hedge may wait. */
  private realTimeout(request: IdpRequest): boolean {
    return request.latencyMs > this.plan.upstreamTimeoutMs - this.hedgeMs - 10;
  }

  private throttles(): IdpRequest[] {
    return this.idp.requests.filter((request) => request.class === 'throttled');
  }

  /** Whether an IdP throttle answered to `request` held `key` between `from` and `to`: its own key, its client when proven, its client's assertions. */
  private covers(request: IdpRequest, key: SimKey, from: number, to: number): boolean {
    const retryAfter = request.answer.kind === 'throttle' ? request.answer.retryAfter * 1000 : 0;
    if (!(request.endedAt <= to && from < request.endedAt + retryAfter + 2 * TOLERANCE_MS)) return false;
    if (request.key === key.id) return true;
    const source = this.plan.keys.find((candidate) => candidate.id === request.key) as SimKey;
    if (source.client !== key.client || source.tokenUrl !== key.tokenUrl) return false;
    if (source.assertion) return key.assertion;
    return this.proven(source, request.endedAt, request.by, false);
  }

  /**
   * Whether a key had a kept token at `at` (fresh, stale, or expired less than one lifetime ago) and no
   * rejection since: in the fleet, or with `memory` on the instance `by` alone, which knows no other's.
   * `surely`: proven however the instances' clocks dated it (to demand a hold), else by some (to excuse one).
   */
  private proven(key: SimKey, at: number, by: string, surely: boolean): boolean {
    let [provenUntil, rejectedAt] = [-Infinity, -Infinity];
    // The code proves a key by a token received more than the clocks' tolerance after its rejection, each dated
    // by its own instance's clock: by true time, more than the tolerance give or take the clocks' spread.
    const doubt = CLOCK_TOLERANCE_MS + (surely ? this.spread : -this.spread);
    for (const request of this.idp.requests) {
      const memory = this.plan.cache === 'memory';
      if (request.key !== key.id || request.endedAt > at || (memory && (request.by !== by || request.sentAt < this.bornAt(by, at))))
        continue;
      const expiresIn = request.answer.kind === 'token' ? request.answer.expiresIn : undefined;
      if (request.class === 'token' && expiresIn !== undefined && expiresIn > 30 && request.endedAt > rejectedAt + doubt) {
        provenUntil = request.endedAt + 2 * expiresIn * 1000;
      }
      if (request.class === 'unauthorized') [provenUntil, rejectedAt] = [-Infinity, request.endedAt];
    }
    return at < provenUntil;
  }

  /**
   * Whether the instance a throttle answered could know its key was proven: the key was proven, and
   * the proof was in that instance's own memory (it got the token) or in the table, untouched since.
   */
  private provenKnown(key: SimKey, throttle: IdpRequest): boolean {
    if (!this.proven(key, throttle.endedAt, throttle.by, true)) return false;
    const own = this.idp.requests.some(
      (request) =>
        request.key === key.id &&
        request.by === throttle.by &&
        request.sentAt >= this.bornAt(throttle.by, throttle.sentAt) &&
        request.class === 'token' &&
        request.endedAt < throttle.sentAt,
    );
    const [pk, keys] = [...this.items.entries()].find(([, candidate]) => candidate.key === key.id) ?? [];
    const written = this.table.notes
      .filter(isWrite)
      .filter((note) => note.pk === pk && note.at < throttle.sentAt)
      .at(-1);
    const state = keys && written && openItem(keys, written.item);
    const kept = state?.kind === 'key' && state.memo.kept !== null;
    const intact =
      written !== undefined &&
      !this.tamperings.some((tampering) => tampering.pk === pk && tampering.at >= written.at && tampering.at < throttle.sentAt);
    return own || (kept && intact);
  }

  /** Check every IdP request sent since the last check: holds kept, and at most two requests per burst while the table answers. */
  private catchUp(): void {
    for (; this.checkedNotes < this.table.notes.length; this.checkedNotes++) {
      const note = this.table.notes[this.checkedNotes] as TableNote;
      if (note.kind === 'trouble') {
        this.troubles.push(note);
        continue;
      }
      const keys = this.items.get(note.pk);
      if (note.kind === 'late-landing') this.lateLandings.push({ pk: note.pk, at: note.at });
      const state = keys && openItem(keys, note.item);
      if (keys && state?.kind === 'key' && state.memo.rejectedAt > 0) {
        const refused = this.idp.requests.filter(
          (request) => request.key === keys.key && request.class === 'unauthorized' && request.endedAt <= note.at,
        );
        const last = refused.at(-1);
        if (last) this.list(keys.key).push({ at: note.at, voidsBefore: last.endedAt });
      }
    }
    for (; this.checkedRequests < this.idp.requests.length; this.checkedRequests++) {
      const sent = this.idp.requests[this.checkedRequests] as IdpRequest;
      const key = this.plan.keys.find((candidate) => candidate.id === sent.key) as SimKey;
      this.checkHolds(sent, key);
      if (!key.assertion && this.plan.cache === 'shared') this.checkBurst(sent, key);
    }
  }

  private checkHolds(sent: IdpRequest, key: SimKey): void {
    for (const throttle of this.throttles()) {
      if (throttle === sent || throttle.endedAt >= sent.sentAt) continue;
      if (this.plan.cache === 'memory' && throttle.by !== sent.by) continue;
      const retryAfter = throttle.answer.kind === 'throttle' ? throttle.answer.retryAfter * 1000 : 0;
      if (sent.sentAt >= throttle.endedAt + retryAfter) continue;
      const source = this.plan.keys.find((candidate) => candidate.id === throttle.key) as SimKey;
      const held =
        throttle.key === key.id ||
        (source.client === key.client &&
          source.tokenUrl === key.tokenUrl &&
          (source.assertion ? key.assertion : this.provenKnown(source, throttle)));
      // A request is bound by a hold from when it could know of it: its own instance at once, the others once it is in the table.
      const known = throttle.by === sent.by ? throttle.endedAt : this.landedAfter(throttle, key);
      if (held && sent.arrivedAt > known && !this.troubled(key, throttle.sentAt - this.plan.upstreamTimeoutMs, sent.sentAt)) {
        this.failAt(
          'hold shortened',
          sent.sentAt,
          `${sent.by} asked the IdP for ${key.id} ${sent.sentAt - throttle.endedAt} ms into a ${retryAfter} ms hold earned by ${throttle.key}`,
        );
        return;
      }
    }
  }

  private checkBurst(sent: IdpRequest, key: SimKey): void {
    const earlier = this.idp.requests.slice(0, this.checkedRequests).filter((request) => request.key === key.id);
    // A remembered failure is dated by its writer's clock: an instance whose clock runs s ms ahead sees it s ms shorter.
    for (const anchor of earlier) {
      // A later exchange that brought a token supersedes the burst's outcome: nothing of it is remembered after.
      const superseded = earlier.find((request) => request.sentAt > anchor.sentAt && request.class === 'token')?.endedAt ?? Infinity;
      // A timeout the cache's own waiting cut short (less than the deadline but the hedge) is never remembered (rules.ts, cutShort).
      const cut = anchor.class === 'timeout' && anchor.timeoutMs < this.plan.upstreamTimeoutMs - hedgeFor(this.plan.upstreamTimeoutMs);
      const remembered = anchor.class === 'token' || anchor.class === 'throttled' || cut ? 0 : Math.max(0, windowOf(anchor) - this.spread);
      const end = Math.min(superseded, anchor.endedAt + remembered);
      if (!(anchor.sentAt < sent.sentAt && sent.sentAt <= end)) continue;
      const inBurst = earlier.filter((request) => request.sentAt > anchor.sentAt && request.sentAt <= end).length + 1;
      if (inBurst < 2) continue;
      const noCache = this.noCacheArrivals.some(
        (arrival) => arrival.key === key.id && arrival.at >= anchor.sentAt - this.plan.upstreamTimeoutMs,
      );
      if (noCache || this.troubled(key, anchor.sentAt - this.plan.upstreamTimeoutMs, sent.sentAt)) continue;
      // A waiter with a fifth of the deadline more than every exchange in the burst takes over (claims.ts): one more, by design.
      const budgets = earlier
        .filter((request) => request.sentAt >= anchor.sentAt && request.sentAt <= end)
        .map((request) => request.timeoutMs);
      if (sent.timeoutMs > Math.max(...budgets) + dominanceMs(this.plan.upstreamTimeoutMs) - 50) continue;
      this.failAt('burst', sent.sentAt, `${sent.by} is the IdP's third request for ${key.id} in the burst that began at ${anchor.sentAt}`);
      return;
    }
  }

  /**
   * When the first write after a throttle landed where `key`'s requests read it, or never: a hold item
   * (the client's, or one the judge has no keys for: an assertion hold), or the key's own outcome.
   */
  private landedAfter(throttle: IdpRequest, key: SimKey): number {
    const tells = (pk: string) => {
      const owner = this.items.get(pk)?.key;
      return owner === undefined || owner === `hold:${key.client}` || (owner === key.id && key.id === throttle.key);
    };
    return this.table.notes.find((note) => note.kind === 'write' && note.at >= throttle.endedAt && tells(note.pk))?.at ?? Infinity;
  }

  /** Trouble that excuses a departure from what `off` would answer: a death, a late landing, an adversary's write. */
  private disturbed(key: SimKey, from: number, to: number): boolean {
    const within = (at: number) => at >= from && at <= to;
    return (
      this.deaths.some((death) => within(death.at)) ||
      this.lateLandings.some((landing) => within(landing.at) && this.concerns(landing.pk, key)) ||
      this.tamperedKey(key, from, to)
    );
  }

  /** Disturbed, or the table not answering as it should somewhere in the window. */
  private troubled(key: SimKey, from: number, to: number): boolean {
    if (this.disturbed(key, from, to)) return true;
    return this.plan.table.some((phase, index) => {
      const next = this.plan.table[index + 1];
      const ends = next ? next.from : Infinity;
      return phase.behaviour.kind !== 'normal' && phase.from <= to && ends >= from;
    });
  }

  private tamperedKey(key: SimKey, from: number, to: number): boolean {
    return this.tamperings.some((tampering) => tampering.at >= from && tampering.at <= to && this.concerns(tampering.pk, key));
  }

  /** Whether a table item is the key's own or its client's hold item. */
  private concerns(pk: string, key: SimKey): boolean {
    const owner = this.items.get(pk)?.key;
    return owner === key.id || owner === `hold:${key.client}`;
  }

  private list(key: string): { at: number; voidsBefore: number }[] {
    let list = this.rejections.get(key);
    if (!list) this.rejections.set(key, (list = []));
    return list;
  }

  private fail(rule: string, answer: Answered, detail: string): void {
    this.failAt(rule, answer.answeredAt, `${answer.instance} ${answer.key.id} (arrived ${answer.arrivedAt.toFixed(1)}): ${detail}`);
  }

  private failAt(rule: string, at: number, detail: string): void {
    this.note(`VIOLATION ${rule}: ${detail}`);
    this.violations.push({ rule, at, detail });
  }
}

/** How long an IdP answer of this class is remembered (a hold: as long as the IdP asked). */
function windowOf(request: IdpRequest): number {
  switch (request.class) {
    case 'unauthorized':
      return 5000;
    case 'throttled':
      return request.answer.kind === 'throttle' ? request.answer.retryAfter * 1000 : 0;
    default:
      return 1000;
  }
}
