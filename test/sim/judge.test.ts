import { invariants, judge } from '../../sim/judge/index';
import type {
  Answer,
  Asked,
  IdpCall,
  IdpOutcome,
  IdpPhase,
  InstanceLife,
  PepperRead,
  SimKey,
  SimRecord,
  TableCall,
  TableFault,
  Tampering,
} from '../../sim/record';

// The judge, record by record: for every invariant, a hand-built record that keeps it at its exact
// boundary (and breaks nothing else), and one that breaks it just past it, with clocks in step and,
// where clocks matter, with a spread. Times are ms of true time; tokens live 100 s unless said, so
// they refresh from 50 s, are past the window's middle at 60 s, go stale at 70 s and expire at 100 s.

const URL = 'https://idp.example/token';
const secretKey = (id: string, client = 'client-a', kind: SimKey['kind'] = 'secret'): SimKey => ({
  id,
  client,
  tokenUrl: URL,
  scope: id,
  kind,
  authentic: true,
});
const A = secretKey('a');
const B = secretKey('b');
const T = 5000;
const healthy = (expiresIn: number | string = 100): IdpPhase => ({ from: 0, minMs: 20, maxMs: 20, answer: { kind: 'token', expiresIn } });
const failing = (answer: IdpPhase['answer'], minMs = 20, maxMs = minMs): IdpPhase => ({ from: 0, minMs, maxMs, answer });

interface Options {
  readonly cache?: 'shared' | 'memory';
  readonly mode?: 'lambda' | 'concurrent';
  /** Each instance's skew, i0 first. */
  readonly skews?: readonly number[];
  readonly keys?: readonly SimKey[];
  readonly phases?: readonly IdpPhase[];
}

interface CallOptions {
  readonly sentAt?: number;
  readonly latencyMs?: number;
  readonly budgetMs?: number;
  readonly expiresIn?: number | string;
  readonly extExpiresIn?: number | string;
  readonly retryAfterS?: number;
  readonly bytes?: number;
}

interface AskOptions {
  readonly key?: string;
  readonly noCache?: boolean;
}

/** The seconds a kept answer states: as issued, less the whole seconds begun since (never below 0), in the IdP's type. */
function due(value: number | string | undefined, ageMs: number): unknown {
  const seconds = Math.ceil(Math.max(0, ageMs) / 1000);
  if (typeof value === 'number') return Math.max(0, value - seconds);
  if (typeof value === 'string') return String(Math.max(0, Number(value) - seconds));
  return undefined;
}

/**
 * When a story's time 0 falls in the record: never 0 itself, so that no age can pass for a moment. The
 * record's lists come in reverse, so that the judge must sort what it reads.
 */
const EPOCH = 7_000_000;

/** A record told as a story: requests arrive, calls reach the IdP, answers go back, trouble happens. Times are the story's. */
class Story {
  private readonly requests: Asked[] = [];
  private readonly answers: Answer[] = [];
  private readonly idp: IdpCall[] = [];
  private readonly table: TableCall[] = [];
  private readonly pepper: PepperRead[] = [];
  private readonly tamperings: Tampering[] = [];
  private readonly rotations: number[] = [];
  private readonly deletions: { at: number; item: string }[] = [];
  private readonly deaths = new Map<string, number>();
  private serial = 0;

  constructor(private readonly options: Options = {}) {}

  ask(instance: string, at: number, options: AskOptions = {}): number {
    const id = ++this.serial;
    this.requests.push({ id, instance, key: options.key ?? 'a', noCache: options.noCache === true, arrivedAt: EPOCH + at });
    return id;
  }

  /** The request's own IdP call, sent when it arrived unless said. */
  call(request: number, outcome: IdpOutcome, options: CallOptions = {}): IdpCall {
    const asked = this.asked(request);
    const sentAt = options.sentAt === undefined ? asked.arrivedAt : EPOCH + options.sentAt;
    const latencyMs = options.latencyMs ?? 0;
    const budgetMs = options.budgetMs ?? T;
    const id = ++this.serial;
    const token = outcome === 'token';
    const call: IdpCall = {
      id,
      request,
      instance: asked.instance,
      key: asked.key,
      sentAt,
      budgetMs,
      latencyMs,
      endedAt: sentAt + (outcome === 'timeout' ? budgetMs : latencyMs),
      outcome,
      retryAfterS: outcome === 'throttled' ? (options.retryAfterS ?? 1) : undefined,
      token: token ? `t${id}` : undefined,
      expiresIn: token ? (options.expiresIn ?? 100) : undefined,
      extExpiresIn: token ? options.extExpiresIn : undefined,
      bytes: options.bytes ?? 800,
    };
    this.idp.push(call);
    return call;
  }

  answer(request: number, at: number, answer: Partial<Omit<Answer, 'request' | 'answeredAt'>> & Pick<Answer, 'status'>): void {
    this.answers.push({
      request,
      answeredAt: EPOCH + at,
      code: undefined,
      header: undefined,
      token: undefined,
      expiresIn: undefined,
      extExpiresIn: undefined,
      retryAfter: undefined,
      ...answer,
    });
  }

  /** A request whose own call brings a token, answered `miss` when the call ends (or `answerAfterMs` later). */
  miss(instance: string, at: number, options: AskOptions & CallOptions & { answerAfterMs?: number; states?: Partial<Answer> } = {}) {
    const request = this.ask(instance, at, options);
    const call = this.call(request, 'token', options);
    const answeredAt = call.endedAt - EPOCH + (options.answerAfterMs ?? 0);
    this.answer(request, answeredAt, {
      status: 200,
      header: 'miss',
      token: call.token,
      expiresIn: call.expiresIn,
      extExpiresIn: call.extExpiresIn,
      ...options.states,
    });
    return { request, call, token: call.token as string, answeredAt };
  }

  /** A request answered with a kept token, `expires_in` as due, when it arrived unless said. */
  kept(
    instance: string,
    at: number,
    token: string,
    header: 'hit' | 'stale' = 'hit',
    options: AskOptions & { answeredAt?: number; states?: Partial<Answer> } = {},
  ): number {
    const issued = this.idp.find((call) => call.token === token);
    const request = this.ask(instance, at, { key: issued?.key, ...options });
    const answeredAt = options.answeredAt ?? at;
    const age = EPOCH + answeredAt - (issued?.endedAt ?? 0);
    this.answer(request, answeredAt, {
      status: 200,
      header,
      token,
      expiresIn: due(issued?.expiresIn, age),
      extExpiresIn: due(issued?.extExpiresIn, age),
      ...options.states,
    });
    return request;
  }

  /** A request whose own call fails, answered with its error when the call ends (or as `answer` says). */
  failed(
    instance: string,
    at: number,
    outcome: Exclude<IdpOutcome, 'token'>,
    options: AskOptions & CallOptions & { answerAfterMs?: number; states?: Partial<Answer> } = {},
  ) {
    const request = this.ask(instance, at, options);
    const call = this.call(request, outcome, options);
    const status = { unauthorized: 401, error: 502, throttled: 503, timeout: 504 }[outcome];
    const retryAfter = call.retryAfterS === undefined ? undefined : Math.min(60, call.retryAfterS);
    this.error(request, call.endedAt - EPOCH + (options.answerAfterMs ?? 0), status, { retryAfter, ...options.states });
    return { request, call };
  }

  /** An error answer: the status's own code, and `retry-after` for a 503. */
  error(request: number, at: number, status: number, states: Partial<Answer> = {}): void {
    const code = (
      { 401: 'unauthorized', 502: 'upstream_error', 503: 'upstream_throttled', 504: 'upstream_timeout' } as Record<number, string>
    )[status];
    this.answer(request, at, { status, code, ...states });
  }

  fault(instance: string, at: number, item = 'a', fault: TableFault = 'error', op: TableCall['op'] = 'get'): void {
    const sentAt = EPOCH + at;
    this.table.push({ instance, item, op, sentAt, answeredAt: fault === 'hang' ? undefined : sentAt + 5, fault, landedAt: undefined });
  }

  /** A read by `instance` of `item` sent at `at` and answered `ms` later: no fault, a slow table. */
  read(instance: string, at: number, item: string, ms: number): void {
    const sentAt = EPOCH + at;
    this.table.push({ instance, item, op: 'get', sentAt, answeredAt: sentAt + ms, fault: 'none', landedAt: undefined });
  }

  /** A write of `instance` to `item` sent at `at`: landed 5 ms later, or refused. */
  put(instance: string, at: number, landed: boolean, item = 'a'): void {
    const sentAt = EPOCH + at;
    this.table.push({
      instance,
      item,
      op: 'put',
      sentAt,
      answeredAt: sentAt + 5,
      fault: 'none',
      landedAt: landed ? sentAt + 5 : undefined,
    });
  }

  pepperFault(instance: string, at: number, fault: PepperRead['fault'] = 'error'): void {
    this.pepper.push({ instance, sentAt: EPOCH + at, answeredAt: EPOCH + at + 5, fault });
  }

  die(instance: string, at: number): void {
    this.deaths.set(instance, EPOCH + at);
  }

  tamper(at: number, item: string, action: Tampering['action'] = 'replay', of?: number): void {
    this.tamperings.push({ at: EPOCH + at, item, action, of: of === undefined ? undefined : EPOCH + of });
  }

  expire(at: number, item = 'a'): void {
    this.deletions.push({ at: EPOCH + at, item });
  }

  rotate(at: number): void {
    this.rotations.push(EPOCH + at);
  }

  record(endedAt?: number): SimRecord {
    const skews = this.options.skews ?? [0, 0, 0, 0];
    const instances: InstanceLife[] = skews.map((skewMs, index) => ({
      name: `i${index}`,
      skewMs,
      bornAt: EPOCH,
      diedAt: this.deaths.get(`i${index}`),
    }));
    const times = [
      ...this.requests.map((asked) => asked.arrivedAt),
      ...this.answers.map((answer) => answer.answeredAt),
      ...this.idp.map((call) => call.endedAt),
    ];
    const phases = (this.options.phases ?? [healthy()]).map((phase) => ({ ...phase, from: EPOCH + phase.from }));
    return {
      upstreamTimeoutMs: T,
      cache: this.options.cache ?? 'shared',
      mode: this.options.mode ?? 'concurrent',
      keys: [...(this.options.keys ?? [A, B])].reverse(),
      instances: instances.reverse(),
      idpPhases: phases.reverse(),
      requests: [...this.requests].reverse(),
      answers: [...this.answers].reverse(),
      idp: [...this.idp].reverse(),
      table: [...this.table].reverse(),
      pepper: [...this.pepper].reverse(),
      tamperings: [...this.tamperings].reverse(),
      rotations: [...this.rotations].reverse(),
      deletions: [...this.deletions].reverse(),
      endedAt: endedAt === undefined ? Math.max(EPOCH, ...times) + 1 : EPOCH + endedAt,
    };
  }

  /** The token of the answer `index` (from the end when negative). */
  servedToken(index: number): string {
    return this.answers.at(index)?.token as string;
  }

  private asked(request: number): Asked {
    const asked = this.requests.find((candidate) => candidate.id === request);
    if (!asked) throw new Error(`no request ${request}`);
    return asked;
  }
}

/** The names of the invariants a record breaks. */
const broken = (record: SimRecord): string[] => [...new Set(judge(record).map((violation) => violation.rule))];

/** A story, told twice: `at` the boundary it keeps, and one step past it. */
function twice(tell: (story: Story, step: number) => void, options: Options = {}): [SimRecord, SimRecord] {
  return [0, 1].map((step) => {
    const story = new Story(options);
    tell(story, step);
    return story.record();
  }) as [SimRecord, SimRecord];
}

describe('the judge', () => {
  it('names each invariant once, and cites the contract for each', () => {
    const names = invariants.map((invariant) => invariant.name);

    expect(new Set(names).size).toBe(names.length);
    for (const invariant of invariants) expect(invariant.rule).toMatch(/"[^"]+"/);
  });

  it('finds nothing in a quiet run: one miss, then hits', () => {
    const story = new Story();
    const { token } = story.miss('i0', 0);
    story.kept('i0', 1000, token);
    story.kept('i1', 2000, token);

    expect(judge(story.record())).toEqual([]);
  });

  it('reports every violation, in the order they happened', () => {
    const story = new Story();
    const late = story.ask('i0', 0);
    story.error(late, 9000, 502);
    story.answer(story.ask('i1', 100), 100, { status: 200, header: 'hit', token: 'forged' });

    expect(judge(story.record()).map((violation) => [violation.rule, violation.at - EPOCH])).toEqual([
      ['issued', 100],
      ['deadline', 9000],
      ['worse than off', 9000],
    ]);
  });

  it('reports what the record names and does not hold, and judges the rest', () => {
    const story = new Story();
    story.ask('i0', 0, { key: 'nobody' });
    story.answer(99, 10, { status: 200 });
    const twiceAnswered = story.ask('i0', 20, { key: 'b' });
    story.error(twiceAnswered, 20, 504);
    story.error(twiceAnswered, 21, 504);
    const { call } = story.miss('i0', 30);
    const record = story.record();
    const withCall = (extra: Partial<IdpCall>) => ({ ...record, idp: [...record.idp, { ...call, id: 99, request: 999, ...extra }] });

    expect(judge(record).map((violation) => violation.rule)).toEqual(['record', 'record', 'worse than off', 'record']);
    expect(broken(withCall({ key: 'nobody' }))).toEqual(['record', 'worse than off']);
    expect(broken(withCall({}))).toEqual(['record', 'worse than off']);
    expect(broken(withCall({ token: undefined }))).toEqual(['record', 'worse than off']);
  });
});

describe('deadline', () => {
  it('answers within the deadline to the millisecond, never one past it', () => {
    const [kept, past] = twice((story, step) => story.miss('i0', 0, { latencyMs: T, answerAfterMs: step }));

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['deadline']);
  });

  it('leaves no request unanswered while its instance lives past its deadline', () => {
    const story = new Story();
    story.ask('i0', 0);

    expect(judge(story.record(T))).toEqual([]);
    expect(broken(story.record(T + 1))).toEqual(['deadline']);
  });

  it('excuses a request whose instance died before its deadline, not after', () => {
    const [kept, past] = twice((story, step) => {
      story.ask('i0', 0);
      story.die('i0', T + step);
    });

    expect(judge({ ...kept, endedAt: EPOCH + 10 * T })).toEqual([]);
    expect(broken({ ...past, endedAt: EPOCH + 10 * T })).toEqual(['deadline']);
  });
});

describe('responses', () => {
  it('never answers 500', () => {
    const story = new Story();
    story.answer(story.ask('i0', 0), 0, { status: 500, code: 'internal_error' });

    expect(broken(story.record())).toEqual(['responses']);
  });

  it("answers each error with its own row's code", () => {
    const story = new Story({ phases: [failing({ kind: 'error' })] });
    story.failed('i0', 0, 'error');
    story.answer(story.ask('i0', 10), 10, { status: 502, code: 'upstream_timeout' });

    expect(broken(story.record())).toEqual(['responses']);
  });

  it('says where every 200 came from', () => {
    const story = new Story();
    story.miss('i0', 0, { states: { header: undefined } });

    expect(broken(story.record())).toEqual(['responses', 'header']);
  });

  it('holds a 503 to 60 s at most, whatever the IdP asked', () => {
    const [kept, past] = twice((story, step) => {
      story.failed('i0', 0, 'throttled', { retryAfterS: 90, states: { retryAfter: 60 + step } });
    });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['responses', 'hold earned']);
  });

  it('carries no code with a 200, and neither token nor header with an error', () => {
    const story = new Story({ phases: [failing({ kind: 'error' })] });
    story.miss('i0', 0, { states: { code: 'unauthorized' } });
    story.failed('i1', 0, 'error', { states: { token: 'leaked' } });
    story.failed('i2', 0, 'error', { states: { header: 'miss' } });

    expect(judge(story.record()).map((violation) => violation.rule)).toEqual(['responses', 'responses', 'responses']);
  });

  it('states retry-after in whole seconds, at least 1', () => {
    const tell = (retryAfter: number) => {
      const story = new Story();
      story.failed('i0', 0, 'throttled', { retryAfterS: 1, states: { retryAfter } });
      return story.record();
    };

    expect(judge(tell(1))).toEqual([]);
    expect(broken(tell(0))).toEqual(['responses', 'hold earned']);
    expect(broken(tell(1.5))).toEqual(['responses', 'hold earned']);
  });

  it('answers no status outside the table, and no 200 without a token', () => {
    const story = new Story();
    story.answer(story.ask('i0', 0), 0, { status: 418 });
    story.answer(story.ask('i1', 0), 0, { status: 200, header: 'hit' });

    expect(judge(story.record()).map((violation) => violation.rule)).toEqual(['responses', 'responses']);
  });
});

describe('issued', () => {
  it('answers only tokens the IdP issued', () => {
    const story = new Story();
    story.answer(story.ask('i0', 0), 0, { status: 200, header: 'hit', token: 'forged' });

    expect(broken(story.record())).toEqual(['issued']);
  });

  it("never answers one key's token to another key", () => {
    const story = new Story();
    const { token } = story.miss('i0', 0, { key: 'b' });
    story.kept('i0', 1000, token, 'hit', { key: 'a' });

    expect(broken(story.record())).toEqual(['issued']);
  });

  it('never answers a token before the IdP issued it', () => {
    const story = new Story();
    const waiter = story.ask('i1', 0);
    const { token } = story.miss('i0', 0, { latencyMs: 20 });
    story.answer(waiter, 19, { status: 200, header: 'hit', token, expiresIn: 100 });

    expect(broken(story.record())).toEqual(['issued']);
  });
});

describe('memory stays on its instance', () => {
  it("with memory, never answers another instance's token", () => {
    const [kept, past] = twice((story, step) => story.kept(`i${step}`, 1000, story.miss('i0', 0).token), { cache: 'memory' });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['memory stays on its instance']);
  });
});

describe('expiry margin', () => {
  it('serves its own token until 5 s before expiry, not at it', () => {
    const [kept, past] = twice((story, step) => story.kept('i0', 94_999 + step, story.miss('i0', 0).token, 'stale'));

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['expiry margin']);
  });

  it('holds to the true age at any spread: skews cancel on the clock that received it', () => {
    const [kept, past] = twice((story, step) => story.kept('i1', 94_999 + step, story.miss('i0', 0).token, 'stale'), {
      skews: [0, 5000],
    });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['expiry margin', 'copy margin']);
  });

  it("passes on the IdP's own answer to a request's own call, however short its life", () => {
    const story = new Story();
    story.miss('i0', 0, { expiresIn: 3, latencyMs: 20 });

    expect(judge(story.record())).toEqual([]);
  });

  it('reads only a number, or a string of digits alone, as a lifetime', () => {
    const later = (expiresIn: number | string) => {
      const story = new Story();
      const { token } = story.miss('i0', 0, { expiresIn });
      story.kept('i0', 1000, token, 'hit', { states: expiresIn === '100' ? {} : { expiresIn } });
      return story.record();
    };

    expect(judge(later('100'))).toEqual([]);
    for (const unkept of ['x100', '100s', '-100', Number.NaN, Number.POSITIVE_INFINITY])
      expect(broken(later(unkept))).toEqual(['unkept token']);
  });
});

describe('copy margin', () => {
  it('serves a copy until 10 s before expiry with clocks in step', () => {
    const [kept, past] = twice((story, step) => story.kept('i1', 89_999 + step, story.miss('i0', 0).token, 'stale'));

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['copy margin']);
  });

  it('serves a copy later by exactly the clock spread', () => {
    const [kept, past] = twice((story, step) => story.kept('i1', 92_999 + step, story.miss('i0', 0).token, 'stale'), {
      skews: [0, -3000],
    });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['copy margin']);
  });
});

describe('expires_in', () => {
  it("passes a miss's expires_in and ext_expires_in as the IdP gave them, a numeric string still a string", () => {
    const [kept, past] = twice((story, step) =>
      story.miss('i0', 0, { expiresIn: '100', extExpiresIn: 200, states: step ? { expiresIn: 100 } : {} }),
    );

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['expires_in']);
  });

  it('lowers its own kept token by every second begun since receipt', () => {
    const [kept, past] = twice((story, step) =>
      story.kept('i0', 1, story.miss('i0', 0).token, 'hit', { states: { expiresIn: 99 + step } }),
    );

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['expires_in']);
  });

  it("lowers each field from its own value, in the IdP's type, never below 0", () => {
    const [kept, past] = twice((story, step) =>
      story.kept('i0', 20_000, story.miss('i0', 0, { expiresIn: '100', extExpiresIn: 10 }).token, 'hit', {
        states: { expiresIn: '80', extExpiresIn: -step },
      }),
    );
    const typed = new Story();
    typed.kept('i0', 20_000, typed.miss('i0', 0, { expiresIn: '100' }).token, 'hit', { states: { expiresIn: 80 } });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['expires_in']);
    expect(broken(typed.record())).toEqual(['expires_in']);
  });

  it('lets a copy say up to 5 s less (and 1 for rounding) with clocks in step, never more than is left', () => {
    const copy = (states: Partial<Answer>) => {
      const story = new Story();
      story.kept('i1', 10_000, story.miss('i0', 0).token, 'hit', { states });
      return story.record();
    };

    expect(judge(copy({ expiresIn: 90 }))).toEqual([]);
    expect(judge(copy({ expiresIn: 84 }))).toEqual([]);
    expect(broken(copy({ expiresIn: 91 }))).toEqual(['expires_in']);
    expect(broken(copy({ expiresIn: 83 }))).toEqual(['expires_in']);
    expect(broken(copy({ expiresIn: '90' }))).toEqual(['expires_in']);
    expect(broken(copy({ extExpiresIn: 'later' }))).toEqual(['expires_in']);
  });

  it('lets a copy say less by the clock spread too, and never more than is left at any spread', () => {
    const copy = (states: Partial<Answer>) => {
      const story = new Story({ skews: [0, 2000] });
      story.kept('i1', 10_000, story.miss('i0', 0).token, 'hit', { states });
      return story.record();
    };

    expect(judge(copy({ expiresIn: 82 }))).toEqual([]);
    expect(broken(copy({ expiresIn: 81 }))).toEqual(['expires_in']);
    expect(broken(copy({ expiresIn: 91 }))).toEqual(['expires_in']);
  });

  it('never lets a copy say a word where the IdP said a number of seconds, nor NaN', () => {
    const copy = (expiresIn: unknown) => {
      const story = new Story();
      story.kept('i1', 10_000, story.miss('i0', 0, { expiresIn: '100' }).token, 'hit', { states: { expiresIn } });
      return story.record();
    };
    const own = new Story();
    own.kept('i0', 1000, own.miss('i0', 0).token, 'hit', { states: { expiresIn: Number.NaN } });

    expect(judge(copy('90'))).toEqual([]);
    expect(broken(copy('soon'))).toEqual(['expires_in']);
    expect(broken(own.record())).toEqual(['expires_in']);
  });
});

describe('header', () => {
  it('says miss only for a token its own call got', () => {
    const [kept, past] = twice((story, step) => {
      const { token } = story.miss('i0', 0);
      if (step) story.kept('i0', 1000, token, 'hit', { states: { header: 'miss' } });
    });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['header']);
  });

  it('says miss, not hit, for the token its own call got', () => {
    const story = new Story();
    story.miss('i0', 0, { states: { header: 'hit' } });

    expect(broken(story.record())).toEqual(['header']);
  });

  it('answers hit until its own token goes stale, and stale from then on', () => {
    const tell = (at: number, header: 'hit' | 'stale') => {
      const story = new Story();
      const { token } = story.miss('i0', 0);
      story.miss('i0', 50_000); // the refresh
      story.kept('i0', at, token, header);
      return story.record();
    };

    expect(judge(tell(69_999, 'hit'))).toEqual([]);
    expect(broken(tell(70_000, 'hit'))).toEqual(['header']);
    expect(judge(tell(70_000, 'stale'))).toEqual([]);
    expect(broken(tell(69_999, 'stale'))).toEqual(['header']);
  });

  it("reckons a copy's phase give or take the clock spread", () => {
    const tell = (at: number, header: 'hit' | 'stale') => {
      const story = new Story({ skews: [0, 2000] });
      const { token } = story.miss('i0', 0);
      story.miss('i0', 50_000);
      story.kept('i1', at, token, header);
      return story.record();
    };

    expect(judge(tell(71_999, 'hit'))).toEqual([]);
    expect(broken(tell(72_000, 'hit'))).toEqual(['header']);
    expect(judge(tell(68_000, 'stale'))).toEqual([]);
    expect(broken(tell(67_999, 'stale'))).toEqual(['header']);
  });

  it('lets a token whose exchange outlived its request go stale as dated from its send (seed 1853173579@60)', () => {
    const tell = (at: number, outlived: boolean) => {
      const story = new Story();
      const first = story.miss('i0', 0).token;
      // A refresh ahead: its request answered at once with the kept token, its call ending 3 s later.
      const request = story.ask('i0', 55_000);
      const refresh = story.call(request, 'token', { latencyMs: 3000 });
      story.answer(request, outlived ? 55_000 : 58_000, { status: 200, header: 'hit', token: first, expiresIn: outlived ? 45 : 42 });
      story.kept('i0', at, refresh.token as string, 'stale');
      return story.record();
    };

    expect(judge(tell(125_000, true))).toEqual([]);
    expect(broken(tell(124_999, true))).toEqual(['header']);
    expect(broken(tell(125_000, false))).toEqual(['header']);
  });

  it("answers hit to those who waited on another request's exchange", () => {
    const story = new Story();
    const waiter = story.ask('i1', 0);
    const { token } = story.miss('i0', 0, { latencyMs: 20 });
    story.answer(waiter, 20, { status: 200, header: 'hit', token, expiresIn: 100 });

    expect(judge(story.record())).toEqual([]);
  });

  it('never answers stale when its own call got a token', () => {
    const story = new Story();
    const { token } = story.miss('i0', 0);
    const request = story.ask('i0', 80_000);
    story.call(request, 'token');
    story.answer(request, 80_000, { status: 200, header: 'stale', token, expiresIn: 20 });

    expect(broken(story.record())).toEqual(['header']);
  });

  it('takes the larger of 30 s and 10% as the margin before stale', () => {
    const tell = (at: number) => {
      const story = new Story();
      story.kept('i0', at, story.miss('i0', 0, { expiresIn: 3600 }).token, 'stale');
      return story.record();
    };

    expect(judge(tell(3_240_000))).toEqual([]);
    expect(broken(tell(3_239_999))).toEqual(['header']);
  });

  it('answers hit to a waiter even when a short-lived token went stale while it was handed over', () => {
    const tell = (arrivedAt: number) => {
      const story = new Story();
      const { call } = story.miss('i0', 0, { expiresIn: 31, latencyMs: 20 });
      story.kept('i1', arrivedAt, call.token as string, 'hit', { answeredAt: 1520 });
      return story.record();
    };

    expect(judge(tell(20))).toEqual([]);
    expect(broken(tell(21))).toEqual(['header']);
  });
});

describe('unkept token', () => {
  it('gives a token that cannot be kept only to those who came before it was issued', () => {
    const [kept, past] = twice((story, step) => {
      const { token } = story.miss('i0', 0, { expiresIn: 30, latencyMs: 20 });
      story.kept('i0', 20 + step, token);
    });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['unkept token']);
  });

  it('lets another instance come later by the clock spread, no more', () => {
    const [kept, past] = twice(
      (story, step) => {
        const { token } = story.miss('i0', 0, { expiresIn: 'soon', latencyMs: 20 });
        story.kept('i1', 2020 + step, token, 'hit', { states: { expiresIn: 'soon' } });
      },
      { skews: [0, 2000] },
    );

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['unkept token']);
  });
});

describe('no-cache', () => {
  it('never gets a stale token', () => {
    const story = new Story({ phases: [failing({ kind: 'error' })] });
    const { token } = story.miss('i0', 0);
    const request = story.ask('i0', 80_000, { noCache: true });
    story.call(request, 'error');
    story.answer(request, 80_000, { status: 200, header: 'stale', token, expiresIn: 20 });

    expect(broken(story.record())).toEqual(['no-cache']);
  });

  it('gets a token received up to 5 s before it arrived, not one older', () => {
    const [kept, past] = twice((story, step) => story.kept('i0', 5000 + step, story.miss('i0', 0).token, 'hit', { noCache: true }));

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['no-cache']);
  });

  it("gets another instance's token up to the clock spread older", () => {
    const [kept, past] = twice((story, step) => story.kept('i1', 7000 + step, story.miss('i0', 0).token, 'hit', { noCache: true }), {
      skews: [0, 2000],
    });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['no-cache']);
  });

  it('gets an error only from a call that ended after it arrived, never a remembered one', () => {
    const [kept, past] = twice(
      (story, step) => {
        story.failed('i0', 0, 'error');
        const request = story.ask('i1', 500, { noCache: true });
        if (step === 0) story.call(request, 'error');
        story.error(request, 500, 502);
      },
      { phases: [failing({ kind: 'error' })] },
    );

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['no-cache']);
  });

  it("takes another instance's error that ended up to the clock spread before it arrived, as dated, not one older", () => {
    const [kept, past] = twice(
      (story, step) => {
        story.failed('i0', 0, 'error', { latencyMs: 100 });
        story.error(story.ask('i1', 2100 + step, { noCache: true }), 2100 + step, 502);
      },
      { phases: [failing({ kind: 'error' })], skews: [0, 2000] },
    );

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['no-cache']);
  });

  it("takes another instance's 401 that ended up to the clock spread before it arrived, as `worse than off` sees it too", () => {
    const [kept, past] = twice(
      (story, step) => {
        story.failed('i0', 0, 'unauthorized', { latencyMs: 100 });
        story.error(story.ask('i1', 2100 + step, { noCache: true }), 2100 + step, 401);
      },
      { phases: [healthy()], skews: [0, 2000] },
    );

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['no-cache', 'worse than off']);
  });

  it('may time out at its own deadline, never before it without a call that timed out', () => {
    const [kept, past] = twice(
      (story, step) => {
        const request = story.ask('i0', 0, { noCache: true });
        story.error(request, T - step, 504);
      },
      { phases: [failing({ kind: 'token', expiresIn: 100 }, 2 * T)] },
    );

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['no-cache']);
  });

  it("with memory, never takes another instance's failure", () => {
    const story = new Story({ cache: 'memory', phases: [failing({ kind: 'error' })] });
    story.failed('i0', 0, 'error', { latencyMs: 100 });
    story.error(story.ask('i1', 50, { noCache: true }), 100, 502);

    expect(broken(story.record())).toEqual(['no-cache']);
  });

  it('takes no failure of another kind, nor a remembered one even at its deadline', () => {
    const story = new Story();
    story.failed('i0', 0, 'unauthorized', { latencyMs: 100 });
    story.error(story.ask('i1', 50, { noCache: true }), 100, 502);
    story.failed('i2', 200, 'error');
    story.error(story.ask('i2', 300, { noCache: true }), 300 + T, 502);

    expect(judge(story.record()).map((violation) => violation.rule)).toEqual(['no-cache', 'worse than off', 'no-cache', 'worse than off']);
  });

  it("with memory, takes its own instance's failure", () => {
    const story = new Story({ cache: 'memory', phases: [failing({ kind: 'error' })] });
    story.failed('i0', 0, 'error', { latencyMs: 100 });
    story.error(story.ask('i0', 50, { noCache: true }), 100, 502);

    expect(judge(story.record())).toEqual([]);
  });
});

describe('401 outlived', () => {
  /** i0 holds a token from 0; at 80 s its refresh is rejected, answered 10 ms later. */
  function rejected(story: Story): string {
    const { token } = story.miss('i0', 0);
    story.failed('i0', 80_000, 'unauthorized', { answerAfterMs: 10 });
    return token;
  }

  it('binds the instance that got the 401 from the moment it got it', () => {
    const [kept, past] = twice((story, step) => {
      const token = rejected(story);
      story.kept('i0', 79_990, token, 'stale', { answeredAt: 80_000 + step });
    });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['401 outlived']);
  });

  it('binds every instance for requests that arrive after the answer it was published before', () => {
    const [kept, past] = twice((story, step) => story.kept('i1', 80_010 + step, rejected(story), 'stale'));

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['401 outlived']);
  });

  it('binds the fleet for a 401 answered at its deadline only once a write it sent then landed (seed 1001087758@60)', () => {
    const tell = (landed: boolean) => {
      const story = new Story();
      const { token } = story.miss('i0', 0);
      story.failed('i0', 80_000, 'unauthorized', { latencyMs: T - 20, answerAfterMs: 20 });
      story.put('i0', 80_000 + T, landed);
      story.kept('i1', 80_000 + T + 100, token, 'stale');
      return story.record();
    };

    expect(judge(tell(false))).toEqual([]);
    expect(broken(tell(true))).toEqual(['401 outlived']);
  });

  it('binds the fleet strictly at any spread', () => {
    const [kept, past] = twice((story, step) => story.kept('i1', 80_010 + step, rejected(story), 'stale'), { skews: [-2500, 2500] });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['401 outlived']);
  });

  it("excuses an old copy of the key's item written back after the 401, and no other item's", () => {
    const tell = (item: string) => {
      const story = new Story();
      const token = rejected(story);
      story.tamper(85_000, item, 'replay', 1000);
      story.kept('i0', 86_000, token, 'stale');
      story.kept('i1', 86_000, token, 'stale');
      return story.record();
    };

    expect(judge(tell('a'))).toEqual([]);
    expect(broken(tell('b'))).toEqual(['401 outlived']);
  });

  it('excuses only a copy written back from before the 401 was published', () => {
    const tell = (of: number | undefined) => {
      const story = new Story();
      const token = rejected(story);
      story.tamper(85_000, 'a', 'replay', of);
      story.kept('i1', 86_000, token, 'stale');
      return story.record();
    };

    expect(judge(tell(80_009))).toEqual([]);
    expect(judge(tell(undefined))).toEqual([]);
    expect(broken(tell(80_010))).toEqual(['401 outlived']);
  });

  it("excuses the key's item deleted or overwritten with garbage after the 401 (its first copy, none, written back) for the fleet alone", () => {
    const tell = (action: 'delete' | 'garbage' | 'retype', instance = 'i1') => {
      const story = new Story();
      const token = rejected(story);
      story.tamper(85_000, 'a', action);
      story.kept(instance, 86_000, token, 'stale');
      return story.record();
    };

    expect(judge(tell('delete'))).toEqual([]);
    expect(judge(tell('garbage'))).toEqual([]);
    expect(broken(tell('retype'))).toEqual(['401 outlived']);
    expect(broken(tell('delete', 'i0'))).toEqual(['401 outlived']);
  });

  it("excuses the fleet when the 401's instance could not publish it, not when the answering one failed", () => {
    const tell = (instance: string) => {
      const story = new Story();
      const token = rejected(story);
      story.fault(instance, instance === 'i0' ? 80_005 : 85_000);
      story.kept('i1', 86_000, token, 'stale');
      return story.record();
    };

    expect(judge(tell('i0'))).toEqual([]);
    expect(broken(tell('i1'))).toEqual(['401 outlived']);
  });

  it('excuses the fleet within 60 s of a pepper rotation', () => {
    const [kept, past] = twice((story, step) => {
      const token = rejected(story);
      story.kept('i1', 1000, token); // read before the rotation: the pepper's rule is kept
      story.rotate(26_000 - step);
      story.kept('i1', 86_000, token, 'stale');
    });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['401 outlived']);
  });

  it('with memory, binds only the instance that got it', () => {
    const tell = (cache: 'memory' | 'shared') => {
      const story = new Story({ cache });
      const { token } = story.miss('i1', 0);
      rejected(story);
      story.kept('i1', 86_000, token, 'stale');
      return story.record();
    };

    expect(judge(tell('memory'))).toEqual([]);
    expect(broken(tell('shared'))).toEqual(['401 outlived']);
  });

  it('binds no other instance when the request that got it was never answered', () => {
    const story = new Story();
    const { token } = story.miss('i0', 0);
    story.call(story.ask('i0', 80_000), 'unauthorized');
    story.die('i0', 80_005);
    story.kept('i1', 86_000, token, 'stale');

    expect(judge(story.record())).toEqual([]);
  });

  it('is excused by no rotation after the stale answer', () => {
    const story = new Story();
    const token = rejected(story);
    story.kept('i1', 86_000, token, 'stale');
    story.rotate(90_000);

    expect(broken(story.record())).toEqual(['401 outlived']);
  });
});

describe('401 remembered', () => {
  /** i0 holds a token from 0; at 10 s a request on `instance` is rejected, answered 10 ms later. */
  function rejected(story: Story, instance = 'i0'): string {
    const { token } = story.miss('i0', 0);
    story.failed(instance, 10_000, 'unauthorized', { answerAfterMs: 10 });
    return token;
  }

  it('binds the instance that answered the 401, from its answer, for 5 s by its one clock', () => {
    const tell = (at: number, cache: 'shared' | 'memory' = 'shared') => {
      const story = new Story({ cache, skews: [0, 3000] });
      story.kept('i0', at, rejected(story));
      return story.record();
    };

    expect(judge(tell(10_010))).toEqual([]);
    expect(broken(tell(10_011))).toEqual(['401 remembered']);
    expect(broken(tell(14_999))).toEqual(['401 remembered']);
    expect(judge(tell(15_000))).toEqual([]);
    expect(broken(tell(14_999, 'memory'))).toEqual(['401 remembered']);
  });

  it('owes no refusal of a token received after the rejecting call was sent, as both clocks dated them', () => {
    const tell = (receiver: string, endsAt: number) => {
      const story = new Story({ skews: [0, 1000] });
      // The rejected request came at 8.5 s, while the token's exchange ran, and sent its own call at 10 s.
      story.failed('i0', 8500, 'unauthorized', { sentAt: 10_000, latencyMs: 20 });
      const { token } = story.miss(receiver, 8000, { latencyMs: endsAt - 8000 });
      story.kept('i0', 11_000, token);
      return story.record();
    };

    expect(judge(tell('i0', 10_000))).toEqual([]);
    expect(broken(tell('i0', 9999))).toEqual(['401 remembered']);
    // Another clock's receipt may be dated up to the spread later.
    expect(judge(tell('i1', 9000))).toEqual([]);
    expect(broken(tell('i1', 8999))).toEqual(['401 remembered']);
  });

  it('binds no no-cache request, which takes no remembered failure, and excuses an old copy of the item written back', () => {
    const tell = (noCache: boolean, tampering?: Tampering['action']) => {
      const story = new Story();
      const { token } = story.miss('i0', 9000);
      story.failed('i0', 10_000, 'unauthorized', { answerAfterMs: 10 });
      if (tampering) story.tamper(11_000, 'a', tampering, 9500);
      story.kept('i0', 12_000, token, 'hit', { noCache });
      return story.record();
    };

    expect(judge(tell(true))).toEqual([]);
    expect(judge(tell(false, 'replay'))).toEqual([]);
    expect(broken(tell(false))).toEqual(['401 remembered']);
    expect(broken(tell(false, 'garbage'))).toEqual(['401 remembered']);
  });

  it("binds another instance, with shared, once it read the key's item after the 401 was published, until 5 s less the spread", () => {
    const tell = (options: { readAt?: number; at?: number; cache?: 'shared' | 'memory'; skews?: number[] } = {}) => {
      const story = new Story({ cache: options.cache, skews: options.skews });
      const token = rejected(story, 'i1');
      if (options.readAt !== undefined) story.read('i0', options.readAt, 'a', 2);
      story.kept('i0', options.at ?? 11_000, token);
      return story.record();
    };

    expect(judge(tell())).toEqual([]);
    expect(judge(tell({ readAt: 10_010 }))).toEqual([]);
    expect(broken(tell({ readAt: 10_011 }))).toEqual(['401 remembered']);
    expect(judge(tell({ readAt: 10_011, cache: 'memory' }))).toEqual([]);
    expect(broken(tell({ readAt: 10_011, at: 14_999 }))).toEqual(['401 remembered']);
    expect(judge(tell({ readAt: 10_011, at: 15_000 }))).toEqual([]);
    expect(broken(tell({ readAt: 10_011, at: 13_999, skews: [0, 1000] }))).toEqual(['401 remembered']);
    expect(judge(tell({ readAt: 10_011, at: 14_000, skews: [0, 1000] }))).toEqual([]);
  });

  it('counts a read within the request (its 30 s look) only while no other request was under way on its instance', () => {
    const tell = (other: boolean) => {
      const story = new Story();
      const token = rejected(story, 'i1');
      if (other) story.kept('i0', 10_500, token, 'hit', { key: 'a', answeredAt: 11_005 });
      story.read('i0', 11_000, 'a', 2);
      story.kept('i0', 11_000, token, 'hit', { answeredAt: 11_002 });
      return story.record();
    };

    expect(judge(tell(true))).toEqual([]);
    expect(broken(tell(false))).toEqual(['401 remembered']);
  });

  it("excuses the fleet when the 401's instance could not publish it, or the reader's item, pepper or item's seal failed it", () => {
    const tell = (trouble?: (story: Story) => void) => {
      const story = new Story();
      const token = rejected(story, 'i1');
      story.read('i0', 10_500, 'a', 2);
      trouble?.(story);
      story.kept('i0', 11_000, token);
      return story.record();
    };

    expect(broken(tell())).toEqual(['401 remembered']);
    expect(judge(tell((story) => story.fault('i1', 10_005)))).toEqual([]);
    expect(judge(tell((story) => story.fault('i0', 10_700)))).toEqual([]);
    expect(judge(tell((story) => story.pepperFault('i0', 10_700)))).toEqual([]);
    expect(judge(tell((story) => story.tamper(10_200, 'a', 'delete')))).toEqual([]);
    expect(judge(tell((story) => story.rotate(1000)))).toEqual([]);
    // Trouble elsewhere excuses nothing.
    expect(broken(tell((story) => story.fault('i0', 10_700, 'b')))).toEqual(['401 remembered']);
    expect(broken(tell((story) => story.fault('i2', 10_005)))).toEqual(['401 remembered']);
  });
});

describe('stale if error', () => {
  it('answers its own kept token rather than an error until 5 s before expiry', () => {
    const [kept, past] = twice((story, step) => {
      story.miss('i0', 0);
      story.failed('i0', 95_000 - step, 'error');
    });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['stale if error']);
  });

  it('answers a published copy rather than an error until 10 s before expiry', () => {
    const [kept, past] = twice((story, step) => {
      story.miss('i0', 0);
      story.failed('i1', 90_000 - step, 'error');
    });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['stale if error']);
  });

  it('owes a copy whose exchange outlived its request only until 10 s before expiry as dated from its send (seed 1697083292@600)', () => {
    const tell = (outlived: boolean) => {
      const story = new Story();
      const first = story.miss('i0', 0).token;
      // Sent at 55 s, its token received at 58 s: a refresh ahead (its request answered at once) may be dated from its send.
      if (outlived) {
        const request = story.ask('i0', 55_000);
        story.call(request, 'token', { latencyMs: 3000 });
        story.answer(request, 55_000, { status: 200, header: 'hit', token: first, expiresIn: 45 });
      } else story.miss('i0', 55_000, { latencyMs: 3000 });
      story.failed('i1', 146_000, 'error');
      return story.record();
    };

    expect(judge(tell(true))).toEqual([]);
    expect(broken(tell(false))).toEqual(['stale if error']);
  });

  it('owes no copy an old item written back after its receipt hid, even before its request was answered', () => {
    const tell = (replayAt: number) => {
      const story = new Story();
      story.miss('i0', 0, { latencyMs: 20, answerAfterMs: 10 });
      story.tamper(replayAt, 'a', 'replay', 0);
      // In its window's second half: any instance may refresh the copy.
      story.failed('i1', 60_030, 'error');
      return story.record();
    };

    expect(judge(tell(25))).toEqual([]);
    expect(broken(tell(15))).toEqual(['stale if error']);
  });

  it('demands a copy only where every clock would still serve it', () => {
    const [kept, past] = twice(
      (story, step) => {
        story.miss('i0', 0);
        story.failed('i1', 88_000 - step, 'error');
      },
      { skews: [0, 2000] },
    );

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['stale if error']);
  });

  it("takes a kept token issued up to the clocks' spread before it as newer: the one the fleet may keep in its place", () => {
    const tell = (gap: number) => {
      const story = new Story({ skews: [0, 2000] });
      story.miss('i0', 0, { latencyMs: 3000 });
      story.miss('i1', 1, { latencyMs: 2999 - gap });
      story.failed('i0', 97_500, 'error');
      return story.record();
    };

    expect(judge(tell(2000))).toEqual([]);
    expect(broken(tell(2001))).toEqual(['stale if error']);
  });

  it('demands it under a hold too', () => {
    const story = new Story();
    story.miss('i0', 0);
    story.failed('i0', 80_000, 'throttled', { retryAfterS: 5 });

    expect(broken(story.record())).toEqual(['stale if error']);
  });

  it("excuses the answering instance's own table trouble, and no other's", () => {
    const tell = (instance: string) => {
      const story = new Story();
      story.miss('i0', 0, { answerAfterMs: 10 });
      story.fault(instance, 80_000);
      story.failed('i1', 80_000, 'error');
      return story.record();
    };

    expect(judge(tell('i1'))).toEqual([]);
    expect(broken(tell('i0'))).toEqual(['stale if error']);
  });

  it('demands no copy that was never surely published', () => {
    const story = new Story();
    story.miss('i0', 0, { answerAfterMs: 10 });
    story.fault('i0', 5, 'a', 'slow', 'put');
    story.failed('i1', 80_000, 'error');

    expect(judge(story.record())).toEqual([]);
  });

  it("demands no token issued within 5 s after another instance's 401 and the clock spread, and one issued later", () => {
    const tell = (after: number) => {
      const story = new Story({ skews: [0, 2000] });
      story.failed('i1', 10_000, 'unauthorized');
      story.miss('i0', 10_000 + after);
      story.failed('i0', 80_000, 'error');
      return story.record();
    };

    expect(judge(tell(7000))).toEqual([]);
    expect(broken(tell(7001))).toEqual(['stale if error']);
  });

  it('demands no token a 401 has ended, nor one for a no-cache request', () => {
    const story = new Story();
    story.miss('i0', 0);
    story.failed('i1', 60_000, 'unauthorized', { noCache: true });
    story.failed('i0', 80_000, 'error');
    story.failed('i0', 1000, 'error', { noCache: true });

    expect(judge(story.record())).toEqual([]);
  });

  it('demands not even its own kept token of an instance whose table failed it (with shared it cannot rule out a 401)', () => {
    const tell = (cache: 'memory' | 'shared') => {
      const story = new Story({ cache });
      story.miss('i0', 0);
      story.fault('i0', 80_000);
      story.failed('i0', 80_000, 'error');
      return story.record();
    };

    expect(judge(tell('shared'))).toEqual([]);
    expect(broken(tell('memory'))).toEqual(['stale if error']);
  });

  it('demands no copy the table may have lost: a TTL deletion, or a rotation within 60 s of its publication', () => {
    const tell = (trouble: (story: Story) => void) => {
      const story = new Story();
      story.miss('i0', 70_000);
      trouble(story);
      story.failed('i1', 150_000, 'error');
      return story.record();
    };

    expect(judge(tell((story) => story.expire(100_000)))).toEqual([]);
    expect(judge(tell((story) => story.rotate(10_000)))).toEqual([]);
    expect(broken(tell((story) => story.rotate(9999)))).toEqual(['stale if error']);
    expect(broken(tell((story) => story.expire(100_000, 'b')))).toEqual(['stale if error']);
  });

  it('demands a copy sealed after a rotation by an instance that had switched, of a reader that had switched too', () => {
    const tell = (reads: (story: Story) => void, mode: 'lambda' | 'concurrent' = 'concurrent') => {
      const story = new Story({ mode });
      story.rotate(10_000);
      reads(story);
      story.miss('i0', 70_000);
      story.failed('i1', 150_000, 'error');
      return story.record();
    };
    const switched = (instance: string, at: number) => (story: Story) => story.pepperFault(instance, at, 'none');
    const both = (first: (story: Story) => void, second: (story: Story) => void) => (story: Story) => {
      first(story);
      second(story);
    };

    expect(broken(tell(both(switched('i0', 40_000), switched('i1', 100_000))))).toEqual(['stale if error']);
    expect(judge(tell(switched('i0', 40_000)))).toEqual([]);
    // A frozen Lambda meets the new pepper as its next request thaws it, in either order: not before that request.
    expect(judge(tell(both(switched('i0', 40_000), switched('i1', 100_000)), 'lambda'))).toEqual([]);
    expect(judge(tell(both(switched('i0', 70_001), switched('i1', 100_000))))).toEqual([]);
    expect(judge(tell(both(switched('i0', 9999), switched('i1', 100_000))))).toEqual([]);
    expect(judge(tell(both(switched('i0', 40_000), switched('i1', 150_000))))).toEqual([]);
    expect(judge(tell(both(switched('i0', 40_000), (story) => story.pepperFault('i1', 100_000))))).toEqual([]);
  });

  it("with memory, keeps demanding its token after another instance's 401", () => {
    const story = new Story({ cache: 'memory' });
    story.miss('i0', 0);
    story.failed('i1', 60_000, 'unauthorized');
    story.failed('i0', 80_000, 'error');

    expect(broken(story.record())).toEqual(['stale if error']);
  });

  it("demands no token of a caller's own assertion", () => {
    const J = secretKey('j', 'client-a', 'assertion');
    const story = new Story({ keys: [A, J] });
    story.miss('i0', 0, { key: 'j' });
    story.failed('i0', 1000, 'error', { key: 'j' });

    expect(judge(story.record())).toEqual([]);
  });
});

describe('worse than off', () => {
  /** A request answered `status` when it arrives, with no call of its own. */
  const refused = (story: Story, instance: string, at: number, status: number, options: AskOptions = {}) =>
    story.error(story.ask(instance, at, options), at, status);

  it('remembers a 401 for 5 s on its instance, not one more', () => {
    const [kept, past] = twice((story, step) => {
      story.failed('i0', 0, 'unauthorized');
      refused(story, 'i0', 5000 + step, 401);
    });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['worse than off']);
  });

  it("remembers another instance's 401 for 5 s give or take the clock spread", () => {
    const [kept, past] = twice(
      (story, step) => {
        story.failed('i0', 0, 'unauthorized');
        refused(story, 'i1', 7000 + step, 401);
      },
      { skews: [0, 2000] },
    );

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['worse than off']);
  });

  it("with memory, never answers another instance's 401", () => {
    const tell = (instance: string) => {
      const story = new Story({ cache: 'memory' });
      story.failed('i0', 0, 'unauthorized');
      refused(story, instance, 1000, 401);
      return story.record();
    };

    expect(judge(tell('i0'))).toEqual([]);
    expect(broken(tell('i1'))).toEqual(['worse than off']);
  });

  it('with memory, shares only a call already running on its instance when it came', () => {
    const tell = (cache: 'memory' | 'shared', sentAt: number) => {
      const story = new Story({ cache });
      const waiter = story.ask('i0', 100);
      story.failed('i0', sentAt, 'error', { latencyMs: 200 - sentAt });
      story.error(waiter, 200, 502);
      return story.record();
    };

    expect(judge(tell('memory', 100))).toEqual([]);
    expect(broken(tell('memory', 101))).toEqual(['worse than off']);
    expect(judge(tell('shared', 101))).toEqual([]);
  });

  it('never answers a no-cache request with a remembered 401', () => {
    const story = new Story();
    story.failed('i0', 0, 'unauthorized');
    refused(story, 'i0', 1000, 401, { noCache: true });

    expect(broken(story.record())).toEqual(['no-cache', 'worse than off']);
  });

  it('remembers any other failure for 1 s', () => {
    const [kept, past] = twice((story, step) => {
      story.failed('i0', 0, 'error');
      refused(story, 'i0', 1000 + step, 502);
    });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['worse than off']);
  });

  it('shares a timeout with those whose deadline ends within a fifth and a twentieth of the deadline after its own, no later', () => {
    // A fifth is where the contract lets a request take over; the judge owes it only a twentieth beyond (TAKE_OVER_RESOLUTION_SHARE).
    const [kept, past] = twice((story, step) => {
      story.failed('i0', 0, 'timeout');
      story.error(story.ask('i1', T / 5 + T / 20 + step), T, 504);
    });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['worse than off']);
  });

  it('excuses no timeout by an exchange still running at its deadline whose request it outlasts by a fifth and a twentieth', () => {
    const [kept, past] = twice((story, step) => {
      // Sent late, its table hanging: it runs past its own request's deadline, and this waiter's.
      const leader = story.ask('i0', 0);
      story.fault('i0', 100, 'a', 'hang');
      story.call(leader, 'timeout', { sentAt: 1300 });
      story.error(leader, T, 504);
      const waiter = story.ask('i1', T / 5 + T / 20 + step);
      story.error(waiter, T / 5 + T / 20 + step + T, 504);
    });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['worse than off']);
  });

  it('excuses no timeout of its own call sent only once the exchange whose request it outlasts had ended', () => {
    const tell = (arrives: number, sentAt: number) => {
      const story = new Story({ phases: [failing({ kind: 'token', expiresIn: 100 }, 2500)] });
      story.failed('i0', 0, 'timeout');
      const waiter = story.ask('i1', arrives);
      story.call(waiter, 'timeout', { sentAt, budgetMs: arrives + T - sentAt });
      story.error(waiter, arrives + T, 504);
      return story.record();
    };

    // Sent while the exchange it outlasts still ran, or outlasting it by no more than a fifth and a twentieth: excused.
    expect(judge(tell(1500, T - 1))).toEqual([]);
    expect(judge(tell(T / 5 + T / 20, T))).toEqual([]);
    expect(broken(tell(1500, T))).toEqual(['worse than off']);
    expect(broken(tell(T / 5 + T / 20 + 1, T))).toEqual(['worse than off']);
  });

  it('remembers a timeout that had the whole deadline, never one cut short', () => {
    const [kept, past] = twice((story, step) => {
      const leader = story.ask('i0', 0);
      story.call(leader, 'timeout', { sentAt: 200 + step, budgetMs: T - 200 - step });
      story.error(leader, T, 504);
      refused(story, 'i0', 5500, 504);
    });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['worse than off']);
  });

  it.each<[string, IdpPhase['answer']]>([
    ['a token', { kind: 'token', expiresIn: 100 }],
    ['a 401', { kind: 'reject' }],
  ])('excuses a dead holder only where off, 1 s shorter, would not surely have answered (%s)', (_case, answer) => {
    const tell = (maxMs: number) => {
      const story = new Story({ phases: [failing(answer, 20, maxMs)] });
      story.ask('i1', 0);
      story.die('i1', 100);
      story.error(story.ask('i0', 1100), 1100 + T, 504);
      return story.record();
    };

    expect(judge(tell(4001))).toEqual([]);
    expect(broken(tell(4000))).toEqual(['worse than off']);
  });

  it('excuses a dead holder while its claim may stand: for 1 s after its death, and until another instance sends for the key', () => {
    const tell = (arrives: number, takeover?: number) => {
      const story = new Story({ phases: [failing({ kind: 'token', expiresIn: 100 }, 20, 4500)] });
      story.ask('i1', 0);
      story.die('i1', 100);
      if (takeover !== undefined) story.miss('i2', takeover, { expiresIn: 20 });
      story.error(story.ask('i0', arrives), arrives + T, 504);
      return story.record();
    };

    expect(judge(tell(1100, 1050))).toEqual([]);
    expect(judge(tell(5000, 5001))).toEqual([]);
    expect(broken(tell(1101, 1050))).toEqual(['worse than off']);
  });

  it('excuses a timeout at its deadline while an exchange for its key, sent after it came, still runs', () => {
    const tell = (latencyMs: number) => {
      const story = new Story({ phases: [failing({ kind: 'error' })] });
      const leader = story.ask('i1', 10);
      story.error(leader, story.call(leader, 'error', { sentAt: 17, latencyMs }).endedAt - EPOCH, 502);
      story.error(story.ask('i0', 0), T, 504);
      return story.record();
    };

    expect(judge(tell(T - 16))).toEqual([]);
    expect(broken(tell(T - 17))).toEqual(['worse than off']);
  });

  it('excuses no timeout by a running exchange when one that ran as it came brought a token the fleet was told of', () => {
    const tell = (faultAt?: number) => {
      const story = new Story();
      // i0's token cannot be kept: it goes to those who came while it ran (i1), by its answer at 200.
      story.miss('i0', 0, { latencyMs: 200, expiresIn: 20 });
      if (faultAt !== undefined) story.fault('i0', faultAt);
      story.error(story.ask('i1', 10), T + 10, 504);
      const next = story.ask('i2', 211);
      story.call(next, 'timeout');
      story.error(next, T + 211, 504);
      return story.record();
    };

    expect(judge(tell(100))).toEqual([]);
    expect(broken(tell())).toEqual(['worse than off']);
  });

  it("excuses a timeout while its own instance's calls on the key's item failed, and nothing else's", () => {
    const tell = (instance: string, item: string) => {
      const story = new Story();
      story.fault(instance, 100, item, 'hang');
      story.error(story.ask('i0', 0), T, 504);
      return story.record();
    };

    expect(judge(tell('i0', 'a'))).toEqual([]);
    expect(broken(tell('i0', 'b'))).toEqual(['worse than off']);
    expect(broken(tell('i1', 'a'))).toEqual(['worse than off']);
  });

  it('lets an error stand where off would surely have answered the same', () => {
    const story = new Story({ phases: [failing({ kind: 'error' })] });
    refused(story, 'i0', 0, 502);

    expect(judge(story.record())).toEqual([]);
  });

  it('holds off to its exact deadline: an IdP that always answers in T surely answers', () => {
    const tell = (maxMs: number) => {
      const story = new Story({ phases: [failing({ kind: 'token', expiresIn: 100 }, maxMs)] });
      story.error(story.ask('i0', 0), T, 504);
      return story.record();
    };

    expect(judge(tell(T + 1))).toEqual([]);
    expect(broken(tell(T))).toEqual(['worse than off']);
  });

  it('never justifies one failure by another kind', () => {
    const story = new Story();
    story.failed('i0', 0, 'error');
    refused(story, 'i0', 500, 401);

    expect(broken(story.record())).toEqual(['worse than off']);
  });

  it("with memory, takes its own call's failure however late it was sent", () => {
    const story = new Story({ cache: 'memory' });
    const request = story.ask('i0', 0);
    story.call(request, 'unauthorized', { sentAt: 100 });
    story.error(request, 100, 401);

    expect(judge(story.record())).toEqual([]);
  });

  it('shares any failure but a timeout whatever the deadlines', () => {
    const story = new Story();
    story.failed('i0', 0, 'error', { latencyMs: 4000 });
    story.error(story.ask('i1', 3000), 4000, 502);

    expect(judge(story.record())).toEqual([]);
  });

  it("excuses only a timeout by the table's failure", () => {
    const story = new Story();
    story.fault('i0', 100, 'a', 'hang');
    story.error(story.ask('i0', 0), 200, 502);

    expect(broken(story.record())).toEqual(['worse than off']);
  });

  it('excuses a holder whose claim stopped landing, not one whose writes landed', () => {
    const tell = (fault: 'hang' | 'slow') => {
      const story = new Story({ phases: [failing({ kind: 'token', expiresIn: 100 }, 20, 4500)] });
      story.fault('i1', 100, 'a', fault, 'put');
      story.error(story.ask('i0', 500), 500 + T, 504);
      return story.record();
    };

    expect(judge(tell('hang'))).toEqual([]);
    expect(broken(tell('slow'))).toEqual(['worse than off']);
  });

  it('remembers a failure on its own instance exactly, whatever the spread', () => {
    const [kept, past] = twice(
      (story, step) => {
        story.failed('i0', 0, 'error');
        refused(story, 'i0', 1000 + step, 502);
      },
      { skews: [0, 2000] },
    );

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['worse than off']);
  });

  it('never remembers a timeout cut short, whatever the spread', () => {
    const story = new Story({ skews: [0, 2000] });
    const leader = story.ask('i0', 0);
    story.call(leader, 'timeout', { budgetMs: 4000 });
    story.error(leader, 4000, 504);
    refused(story, 'i1', 4500, 504);

    expect(broken(story.record())).toEqual(['worse than off']);
  });

  it('finds a remembered failure however the calls overlapped', () => {
    const story = new Story();
    story.failed('i0', 0, 'error', { latencyMs: 3000 });
    story.failed('i1', 100, 'unauthorized');
    refused(story, 'i2', 5100, 401);

    expect(judge(story.record())).toEqual([]);
  });
});

describe('assertion', () => {
  const J = secretKey('j', 'client-a', 'assertion');

  it("answers a caller's assertion only with its own call's token", () => {
    const [kept, past] = twice(
      (story, step) => {
        const { token } = story.miss('i0', 0, { key: 'j' });
        if (step) story.kept('i0', 1000, token, 'hit', { key: 'j' });
      },
      { keys: [A, J] },
    );

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['assertion']);
  });

  it('answers it an error only from its own call, never a remembered one', () => {
    const [kept, past] = twice(
      (story, step) => {
        story.failed('i0', 0, 'error', { key: 'j' });
        const request = story.ask('i0', 500, { key: 'j' });
        if (step === 0) story.call(request, 'error');
        story.error(request, 500, 502);
      },
      { keys: [A, J] },
    );

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['assertion']);
  });

  it('answers it only miss, only with the token its own call got', () => {
    const tell = (header: 'miss' | 'hit', token?: string) => {
      const story = new Story({ keys: [A, J] });
      const other = story.miss('i1', 0, { key: 'j' }).token;
      story.miss('i0', 10, { key: 'j', states: { header, ...(token ? { token: other } : {}) } });
      return story.record();
    };

    expect(judge(tell('miss'))).toEqual([]);
    expect(broken(tell('hit'))).toEqual(['assertion']);
    expect(broken(tell('miss', 'other'))).toEqual(['expires_in', 'assertion']);
  });

  it('answers it a 503 under a hold, and no error its own call did not get', () => {
    const story = new Story({ keys: [A, J] });
    story.failed('i0', 0, 'throttled', { key: 'j', retryAfterS: 10 });
    story.error(story.ask('i0', 1000, { key: 'j' }), 1000, 503, { retryAfter: 9 });
    const held = story.record();
    story.failed('i1', 0, 'error', { key: 'j', states: { status: 504, code: 'upstream_timeout' } });

    expect(judge(held)).toEqual([]);
    expect(broken(story.record())).toEqual(['assertion']);
  });

  it('answers it the token its own second call got', () => {
    const story = new Story({ keys: [A, J] });
    const request = story.ask('i0', 0, { key: 'j' });
    story.call(request, 'error');
    const { token, expiresIn } = story.call(request, 'token', { sentAt: 10 });
    story.answer(request, 10, { status: 200, header: 'miss', token, expiresIn });

    expect(judge(story.record())).toEqual([]);
  });
});

describe('hold kept', () => {
  /** i0 is throttled for 10 s at 0; the 503 is answered at 10, when the fleet may know. */
  const throttled = (story: Story, key = 'a') => story.failed('i0', 0, 'throttled', { key, retryAfterS: 10, answerAfterMs: 10 });

  it('sends nothing more for the key from the instance that got the throttle until it ends', () => {
    const [kept, past] = twice((story, step) => {
      throttled(story);
      story.miss('i0', 10_000 - step);
    });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['hold kept']);
  });

  it('binds the fleet for requests that arrive after the answer it was published before', () => {
    const [kept, past] = twice((story, step) => {
      throttled(story);
      story.miss('i1', 10 + step, { sentAt: 4000 });
    });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['hold kept']);
  });

  it("binds the fleet once a refresh ahead's throttle reached its instance, which a frozen Lambda meets when thawed (seed 1954613870@60)", () => {
    const tell = (mode: 'lambda' | 'concurrent', askedAt: number) => {
      const story = new Story({ mode });
      const { token } = story.miss('i0', 0);
      // Answered at once with the kept token; the refresh's 429 comes at 61 s, and i0 is next thawed at 70 s: with i1's token
      // if i1 asked before, else its own, stale under the hold.
      story.call(story.kept('i0', 60_000, token), 'throttled', { retryAfterS: 60, latencyMs: 1000 });
      const fresh = askedAt < 70_000 ? story.miss('i1', askedAt).token : undefined;
      story.kept('i0', 70_000, fresh ?? token, fresh ? 'hit' : 'stale');
      if (!fresh) story.miss('i1', askedAt);
      return story.record();
    };

    expect(judge(tell('lambda', 62_000))).toEqual([]);
    expect(broken(tell('lambda', 71_000))).toEqual(['hold kept']);
    expect(judge(tell('concurrent', 61_000))).toEqual([]);
    expect(broken(tell('concurrent', 62_000))).toEqual(['hold kept']);
  });

  it('lets the fleet end it early by the clock spread, not more', () => {
    const [kept, past] = twice(
      (story, step) => {
        throttled(story);
        story.miss('i1', 8000 - step);
      },
      { skews: [0, 2000] },
    );

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['hold kept']);
  });

  it('excuses the fleet for a rotation within the 60 s before the hold began (its instance may have sealed it with the old pepper), not earlier', () => {
    const tell = (rotatedAt: number) => {
      const story = new Story();
      story.rotate(rotatedAt);
      throttled(story);
      story.miss('i1', 5000);
      return story.record();
    };

    expect(judge(tell(-60_000))).toEqual([]);
    expect(broken(tell(-60_001))).toEqual(['hold kept']);
  });

  it("excuses the fleet's calls when its table or pepper failed the caller, or the holder before publishing", () => {
    const tell = (trouble: (story: Story) => void) => {
      const story = new Story();
      throttled(story);
      trouble(story);
      story.miss('i1', 5000);
      return story.record();
    };

    expect(judge(tell((story) => story.fault('i1', 5000, 'hold:client-a')))).toEqual([]);
    expect(judge(tell((story) => story.pepperFault('i1', 5000)))).toEqual([]);
    expect(judge(tell((story) => story.fault('i0', 5, 'hold:client-a', 'error', 'put')))).toEqual([]);
    expect(judge(tell((story) => story.tamper(3000, 'hold:client-a', 'delete')))).toEqual([]);
    expect(judge(tell((story) => story.rotate(1000)))).toEqual([]);
    expect(broken(tell((story) => story.fault('i2', 5000, 'hold:client-a')))).toEqual(['hold kept']);
    expect(broken(tell((story) => story.tamper(3000, 'hold:client-b', 'delete')))).toEqual(['hold kept']);
  });

  it("excuses a call sent while the caller's read of the hold's item was still out (a slow table), not once one had answered", () => {
    const tell = (...readsMs: number[]) => {
      const story = new Story();
      throttled(story);
      for (const ms of readsMs) story.read('i1', 5000, 'hold:client-a', ms);
      story.miss('i1', 5000, { sentAt: 5200 });
      return story.record();
    };

    expect(judge(tell(300))).toEqual([]);
    expect(broken(tell(200))).toEqual(['hold kept']);
    expect(broken(tell(300, 100))).toEqual(['hold kept']);
    expect(broken(tell())).toEqual(['hold kept']);
  });

  it('with memory, binds only the instance that got it', () => {
    const story = new Story({ cache: 'memory' });
    throttled(story);
    story.miss('i1', 5000);

    expect(judge(story.record())).toEqual([]);
  });

  it('holds the whole client id while its secret is proven by a token up to a lifetime past its expiry', () => {
    const [kept, past] = twice((story, step) => {
      story.miss('i0', 0);
      story.failed('i0', 199_999 + step, 'throttled', { retryAfterS: 10 });
      story.miss('i0', 200_001, { key: 'b' });
    });

    expect(broken(kept)).toEqual(['hold kept']);
    expect(judge(past)).toEqual([]);
  });

  it("holds a stored credential's hold to that credential alone", () => {
    const C = secretKey('c', 'client-a', 'credential');
    const story = new Story({ keys: [A, C] });
    story.miss('i0', 0, { key: 'c' });
    story.failed('i0', 1000, 'throttled', { key: 'c', retryAfterS: 10, noCache: true });
    story.miss('i0', 2000);
    const held = story.record();
    story.miss('i0', 3000, { key: 'c', noCache: true });

    expect(judge(held)).toEqual([]);
    expect(broken(story.record())).toEqual(['hold kept']);
  });

  it("holds a caller's assertion's hold to the client's assertions", () => {
    const J = secretKey('j', 'client-a', 'assertion');
    const K = secretKey('k', 'client-a', 'assertion');
    const story = new Story({ keys: [A, J, K] });
    story.failed('i0', 0, 'throttled', { key: 'j', retryAfterS: 10 });
    story.miss('i0', 2000);
    const held = story.record();
    story.miss('i0', 3000, { key: 'k' });

    expect(judge(held)).toEqual([]);
    expect(broken(story.record())).toEqual(['hold kept']);
  });

  it('lets a call sent the very moment the throttle ended through', () => {
    const story = new Story();
    story.failed('i0', 0, 'throttled', { retryAfterS: 10, latencyMs: 100 });
    story.miss('i0', 50, { sentAt: 100 });

    expect(judge(story.record())).toEqual([]);
  });

  it('binds its own instance at once, before the throttle was answered', () => {
    const story = new Story();
    throttled(story);
    story.miss('i0', 5);

    expect(broken(story.record())).toEqual(['hold kept']);
  });

  it('binds no other instance when the request that earned it was never answered', () => {
    const story = new Story();
    story.call(story.ask('i0', 0), 'throttled', { retryAfterS: 10 });
    story.die('i0', 5);
    story.miss('i1', 1000);

    expect(judge(story.record())).toEqual([]);
  });

  it('holds the client id on a proof read from the table, and not on one never surely published', () => {
    const tell = (trouble: (story: Story) => void) => {
      const story = new Story();
      story.miss('i1', 0, { answerAfterMs: 10 });
      trouble(story);
      story.failed('i0', 1000, 'throttled', { retryAfterS: 10, noCache: true });
      story.miss('i0', 2000, { key: 'b' });
      return story.record();
    };

    expect(broken(tell(() => undefined))).toEqual(['hold kept']);
    expect(judge(tell((story) => story.fault('i1', 5, 'a', 'error', 'put')))).toEqual([]);
    expect(broken(tell((story) => story.fault('i1', 5, 'a', 'none', 'put')))).toEqual(['hold kept']);
  });

  it('holds the client id on no proof a 401 ended, nor beyond its client id and token URL', () => {
    const C = { ...secretKey('c', 'client-b'), tokenUrl: URL };
    const D = { ...secretKey('d'), tokenUrl: `${URL}?tenant=2` };
    const tell = (rejectedFirst: boolean, key: string) => {
      const story = new Story({ keys: [A, B, C, D] });
      story.miss('i0', 0);
      if (rejectedFirst) story.failed('i1', 500, 'unauthorized', { noCache: true });
      story.failed('i0', 1000, 'throttled', { retryAfterS: 10, noCache: true });
      story.miss('i0', 2000, { key });
      return story.record();
    };

    expect(broken(tell(false, 'b'))).toEqual(['hold kept']);
    expect(judge(tell(true, 'b'))).toEqual([]);
    expect(judge(tell(false, 'c'))).toEqual([]);
    expect(judge(tell(false, 'd'))).toEqual([]);
  });

  it("holds the client id on another instance's proof only while every clock counts it alive", () => {
    const tell = (at: number) => {
      const story = new Story({ skews: [0, 2000] });
      story.miss('i1', 0);
      story.failed('i0', at, 'throttled', { retryAfterS: 10 });
      story.miss('i0', at + 1, { key: 'b' });
      return story.record();
    };

    expect(broken(tell(197_999))).toEqual(['hold kept']);
    expect(judge(tell(198_000))).toEqual([]);
  });

  it("excuses the fleet when the source key's own item was tampered with", () => {
    const story = new Story();
    throttled(story);
    story.tamper(3000, 'a', 'rewrite');
    story.miss('i1', 5000);

    expect(judge(story.record())).toEqual([]);
  });
});

describe('hold earned', () => {
  it("lets a Lambda instance frozen when the IdP throttled it count the retry-after from its thaw, or its request's deadline", () => {
    const tell = (mode: 'lambda' | 'concurrent', retryAfter: number) => {
      const story = new Story({ mode });
      const { token } = story.miss('i0', 0);
      story.call(story.kept('i0', 60_000, token), 'throttled', { retryAfterS: 60, latencyMs: 1000 });
      story.error(story.ask('i0', 103_000), 103_000, 503, { retryAfter });
      return story.record();
    };

    // The IdP's hold has 18 s left; dated at the deadline (65 s), 22.
    expect([judge(tell('lambda', 18)), judge(tell('lambda', 22)), judge(tell('concurrent', 18))]).toEqual([[], [], []]);
    expect(broken(tell('lambda', 23))).toEqual(['hold earned']);
    expect(broken(tell('lambda', 17))).toEqual(['hold earned']);
    expect(broken(tell('concurrent', 19))).toEqual(['hold earned']);
  });

  it('answers 503 only under a hold', () => {
    const story = new Story();
    story.error(story.ask('i0', 0), 0, 503, { retryAfter: 1 });

    expect(broken(story.record())).toEqual(['hold earned']);
  });

  it("states its own throttle's retry-after", () => {
    const [kept, past] = twice((story, step) => story.failed('i0', 0, 'throttled', { retryAfterS: 10, states: { retryAfter: 10 + step } }));

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['hold earned']);
  });

  it('counts the seconds left down, rounded up, on the instance that got it', () => {
    const tell = (at: number, retryAfter: number) => {
      const story = new Story();
      story.failed('i0', 0, 'throttled', { retryAfterS: 10 });
      story.error(story.ask('i0', at), at, 503, { retryAfter });
      return story.record();
    };

    expect(judge(tell(4000, 6))).toEqual([]);
    expect(broken(tell(4000, 7))).toEqual(['hold earned']);
    expect(broken(tell(4000, 5))).toEqual(['hold earned']);
    expect(judge(tell(9999, 1))).toEqual([]);
    expect(broken(tell(10_000, 1))).toEqual(['hold earned']);
    // Within a millisecond of a whole second, not on it: give or take one.
    expect([judge(tell(3999.9995, 6)), judge(tell(3999.9995, 7)), judge(tell(4000.0005, 6)), judge(tell(4000.0005, 5))]).toEqual([
      [],
      [],
      [],
      [],
    ]);
    expect(broken(tell(3999.9995, 9))).toEqual(['hold earned']);
  });

  it('lets the fleet count it down give or take the clock spread', () => {
    const tell = (retryAfter: number) => {
      const story = new Story({ skews: [0, 2000] });
      story.failed('i0', 0, 'throttled', { retryAfterS: 10 });
      story.error(story.ask('i1', 4000), 4000, 503, { retryAfter });
      return story.record();
    };

    expect(judge(tell(8))).toEqual([]);
    expect(judge(tell(4))).toEqual([]);
    expect(broken(tell(9))).toEqual(['hold earned']);
    expect(broken(tell(3))).toEqual(['hold earned']);
  });

  it('never shortens a known hold for a later, shorter one', () => {
    const tell = (retryAfter: number) => {
      const story = new Story();
      story.failed('i0', 0, 'throttled', { retryAfterS: 30, latencyMs: 100 });
      story.failed('i1', 50, 'throttled', { retryAfterS: 5, latencyMs: 10 });
      story.error(story.ask('i0', 1000), 1000, 503, { retryAfter });
      return story.record();
    };

    expect(judge(tell(30))).toEqual([]);
    expect(broken(tell(5))).toEqual(['hold earned']);
  });

  it("with memory, answers no other instance's hold", () => {
    const story = new Story({ cache: 'memory' });
    story.failed('i0', 0, 'throttled', { retryAfterS: 10 });
    story.error(story.ask('i1', 4000), 4000, 503, { retryAfter: 6 });

    expect(broken(story.record())).toEqual(['hold earned']);
  });

  it("answers a proven client's hold to its other keys", () => {
    const story = new Story();
    story.miss('i0', 0);
    story.failed('i0', 1000, 'throttled', { retryAfterS: 10, noCache: true });
    story.error(story.ask('i0', 2000, { key: 'b' }), 2000, 503, { retryAfter: 9 });

    expect(judge(story.record())).toEqual([]);
  });

  it('answers those who waited on a throttled exchange its retry-after', () => {
    const tell = (answeredAt: number) => {
      const story = new Story();
      const waiter = story.ask('i1', 0);
      story.failed('i0', 0, 'throttled', { retryAfterS: 10, latencyMs: 100 });
      story.error(waiter, answeredAt, 503, { retryAfter: 10 });
      return story.record();
    };

    expect(judge(tell(100))).toEqual([]);
    expect(broken(tell(99))).toEqual(['hold earned']);
  });

  it("never shortens a hold its holder's exchange earned while it waited, once its instance read the hold's item after it was told", () => {
    const tell = (readAt: number, retryAfter: number, holderAt = 0) => {
      const story = new Story();
      const waiter = story.ask('i1', 50);
      // Its poll failed, so it asked the IdP itself, and was throttled 2 s; its holder's 10 s hold is told at 1000.
      story.call(waiter, 'throttled', { sentAt: 150, latencyMs: 200, retryAfterS: 2 });
      story.failed('i0', holderAt, 'throttled', { retryAfterS: 10, latencyMs: 1000 - holderAt });
      story.read('i1', readAt, 'a', 2);
      story.error(waiter, 1073, 503, { retryAfter });
      return story.record();
    };

    expect(judge(tell(1071, 10))).toEqual([]);
    // Read as the hold was told, or an exchange sent after it came (it may not have waited on that one): its own 2 s may stand.
    expect(judge(tell(1000, 2))).toEqual([]);
    expect(judge(tell(1071, 2, 51))).toEqual([]);
    expect(broken(tell(1001, 2))).toEqual(['hold earned']);
    expect(broken(tell(1071, 9))).toEqual(['hold earned']);
  });

  it("never shortens another instance's hold published before the request came, unless its table was in trouble", () => {
    const tell = (retryAfter: number, trouble?: (story: Story) => void) => {
      const story = new Story();
      story.failed('i0', 0, 'throttled', { retryAfterS: 30 });
      story.failed('i1', 0, 'throttled', { retryAfterS: 5 });
      trouble?.(story);
      story.error(story.ask('i1', 1000), 1010, 503, { retryAfter });
      return story.record();
    };

    expect(judge(tell(29))).toEqual([]);
    expect(broken(tell(4))).toEqual(['hold earned']);
    expect(judge(tell(4, (story) => story.fault('i1', 1000, 'hold:client-a', 'hang')))).toEqual([]);
    expect(broken(tell(4, (story) => story.fault('i1', 999, 'hold:client-a', 'hang')))).toEqual(['hold earned']);
  });

  it("answers another key's hold of a proven secret, published before the request came", () => {
    const tell = (retryAfter: number) => {
      const story = new Story();
      story.miss('i0', 0);
      story.failed('i0', 1000, 'throttled', { retryAfterS: 30, noCache: true });
      story.failed('i1', 1000, 'throttled', { key: 'b', retryAfterS: 5 });
      story.error(story.ask('i1', 2000, { key: 'b' }), 2000, 503, { retryAfter });
      return story.record();
    };

    expect(judge(tell(29))).toEqual([]);
    expect(broken(tell(4))).toEqual(['hold earned']);
  });

  it("answers a client's other keys the hold of a secret possibly proven, and never of one unproven", () => {
    const tell = (proof: (story: Story) => void) => {
      const story = new Story();
      proof(story);
      story.failed('i0', 1000, 'throttled', { retryAfterS: 10, noCache: true });
      story.error(story.ask('i1', 2000, { key: 'b' }), 2000, 503, { retryAfter: 9 });
      return story.record();
    };
    const unpublished = (story: Story) => {
      story.miss('i2', 0, { answerAfterMs: 10 });
      story.fault('i2', 5, 'a', 'error', 'put');
    };

    expect(judge(tell(unpublished))).toEqual([]);
    expect(broken(tell(() => undefined))).toEqual(['hold earned']);
  });

  it('answers the hold of a secret proven up to the clock spread before the throttle, which its sharers may judge by their clocks', () => {
    const tell = (at: number) => {
      const story = new Story({ skews: [0, 2000] });
      story.miss('i0', 0);
      story.failed('i0', at, 'throttled', { retryAfterS: 10, noCache: true });
      story.error(story.ask('i1', at + 1000, { key: 'b' }), at + 1000, 503, { retryAfter: 11 });
      return story.record();
    };

    expect(judge(tell(201_999))).toEqual([]);
    expect(broken(tell(202_001))).toEqual(['hold earned']);
  });

  it("with memory, answers its own instance's hold", () => {
    const story = new Story({ cache: 'memory' });
    story.failed('i0', 0, 'throttled', { retryAfterS: 10 });
    story.error(story.ask('i0', 4000), 4000, 503, { retryAfter: 6 });

    expect(judge(story.record())).toEqual([]);
  });

  it("knows its own instance's hold before the fleet does", () => {
    const tell = (retryAfter: number) => {
      const story = new Story();
      story.failed('i0', 0, 'throttled', { retryAfterS: 30, answerAfterMs: 10 });
      story.failed('i1', 0, 'throttled', { retryAfterS: 5, latencyMs: 2, answerAfterMs: 1 });
      story.error(story.ask('i0', 5), 5, 503, { retryAfter });
      return story.record();
    };

    expect(judge(tell(30))).toEqual([]);
    expect(broken(tell(5))).toEqual(['hold earned']);
  });
});

describe('hold over failure', () => {
  it("answers a client-wide hold published before the request came, not another instance's remembered failure", () => {
    const tell = (instance: string, arrives: number, status = 502) => {
      const story = new Story();
      // b's secret is proven: its throttle holds the whole client id, a among its keys; told at 9720.
      story.miss('i1', 0, { key: 'b' });
      story.failed('i0', 9500, 'error', { latencyMs: 20 });
      story.failed('i1', 9700, 'throttled', { key: 'b', retryAfterS: 30, noCache: true, latencyMs: 20 });
      const request = story.ask(instance, arrives);
      if (status === 503) story.error(request, arrives + 5, 503, { retryAfter: 30 });
      else story.error(request, arrives + 5, status);
      return story.record();
    };

    expect(judge(tell('i2', 10_000, 503))).toEqual([]);
    // Asked as the hold was told, or on the instance that met the failure (its memory's): the failure may stand.
    expect(judge(tell('i2', 9720))).toEqual([]);
    expect(judge(tell('i0', 10_000))).toEqual([]);
    expect(broken(tell('i2', 9721))).toEqual(['hold over failure']);
  });
});

describe('burst', () => {
  const erring = { phases: [failing({ kind: 'error' })] };

  /** i0's exchange fails from 0 to 20, remembered until 1020; then calls by requests that arrive in the burst. */
  function burst(story: Story, ...calls: [instance: string, at: number, options?: AskOptions][]): void {
    story.failed('i0', 0, 'error', { latencyMs: 20 });
    for (const [instance, at, options] of calls) story.failed(instance, at, 'error', options);
  }

  it('lets the requests that arrive while an exchange runs or its failure is remembered reach the IdP twice, not thrice', () => {
    const [kept, past] = twice((story, step) => burst(story, ['i1', 500], ['i2', 600], ['i1', 1021 - step]), erring);

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['burst']);
  });

  it('counts a request by when it came: one that came while a token that cannot be kept was fetched asks no later, unless its outcome went unpublished', () => {
    const tell = (asking: number, faultAt?: number) => {
      const story = new Story();
      // Not kept (20 s): remembered by nobody, so the burst is only those who came while it ran (0 to 200).
      story.miss('i0', 0, { latencyMs: 200, expiresIn: 20 });
      if (faultAt !== undefined) story.fault('i0', faultAt);
      for (let n = 1; n <= asking; n++) story.miss(`i${n}`, 50 + n, { sentAt: 300 + 100 * n, latencyMs: 20, expiresIn: 20 });
      return story.record();
    };

    expect(judge(tell(2))).toEqual([]);
    expect(judge(tell(3, 150))).toEqual([]);
    expect(broken(tell(3))).toEqual(['burst']);
  });

  it("counts the fleet's calls after the exchange only when its outcome was surely published: its instance's table answered until it answered", () => {
    const tell = (faultAt: number) => {
      const story = new Story(erring);
      story.fault('i0', faultAt);
      burst(story, ['i1', 500], ['i2', 600], ['i1', 700]);
      return story.record();
    };

    expect(judge(tell(10))).toEqual([]);
    expect(broken(tell(30))).toEqual(['burst']);
  });

  it('excuses a request that came within the clock spread before another instance received a token that cannot be kept', () => {
    const tell = (skews: number[]) => {
      const story = new Story({ ...erring, skews });
      burst(story, ['i1', 500]);
      story.miss('i2', 700, { expiresIn: 20 });
      story.failed('i1', 650, 'error', { sentAt: 800 });
      return story.record();
    };

    expect(judge(tell([0, 100, 0]))).toEqual([]);
    expect(broken(tell([0, 0, 0]))).toEqual(['burst']);
  });

  it('remembers a timeout at its deadline across the fleet once the write sent then landed, not when it was refused', () => {
    const tell = (landed: boolean | undefined) => {
      const story = new Story(erring);
      story.failed('i0', 0, 'timeout');
      if (landed !== undefined) story.put('i0', T, landed);
      for (const at of [T + 100, T + 200, T + 300]) story.failed('i1', at, 'error');
      return story.record();
    };

    expect(judge(tell(false))).toEqual([]);
    expect(broken(tell(true))).toEqual(['burst']);
    expect(broken(tell(undefined))).toEqual(['burst']);
  });

  it('reads any outcome answered at its deadline as a timeout: remembered by the fleet once the write sent then landed', () => {
    const tell = (landed: boolean) => {
      const story = new Story(erring);
      story.failed('i0', 0, 'error', { latencyMs: T - 20, answerAfterMs: 20 });
      story.put('i0', T, landed);
      for (const at of [T + 100, T + 200, T + 300]) story.failed('i1', at, 'error');
      return story.record();
    };

    expect(judge(tell(false))).toEqual([]);
    expect(broken(tell(true))).toEqual(['burst']);
  });

  it('with memory, lets them reach it once per instance', () => {
    const [kept, past] = twice((story, step) => burst(story, ['i0', 500], ...(step ? ([['i0', 600]] as [string, number][]) : [])), {
      ...erring,
      cache: 'memory',
    });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['burst']);
  });

  it("ends another instance's burst early by the clock spread", () => {
    const [kept, past] = twice((story, step) => burst(story, ['i1', 300], ['i2', 400], ['i1', 521 - step]), {
      ...erring,
      skews: [0, 500, 500],
    });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['burst']);
  });

  it('lets a request whose deadline ends more than a fifth of the deadline later make its own call', () => {
    const [kept, past] = twice(
      (story, step) => {
        // Every exchange still runs when the last request comes: it may take over any of them.
        story.failed('i0', 0, 'unauthorized', { latencyMs: 2000 });
        for (const [instance, at] of [
          ['i1', 100],
          ['i2', 200],
          ['i1', 1201 - step],
        ] as const)
          story.failed(instance, at, 'unauthorized', { latencyMs: 2000 });
      },
      { phases: [failing({ kind: 'reject' })] },
    );

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['burst']);
  });

  it("waits no request of another instance on an exchange sent after its instance's table failed it", () => {
    const tell = (unknown: boolean) => {
      const story = new Story({ phases: [failing({ kind: 'reject' })] });
      story.failed('i0', 0, 'unauthorized', { latencyMs: 2000 });
      if (unknown) story.fault('i1', 300);
      story.failed('i1', 300, 'unauthorized', { latencyMs: 2000 });
      // Outlasts i0's exchange by more than a fifth of the deadline, not i1's: takes over only if i1's is unknown.
      for (const [instance, at] of [
        ['i2', 1201],
        ['i3', 1250],
        ['i2', 1260],
      ] as const)
        story.failed(instance, at, 'unauthorized', { latencyMs: 2000 });
      return story.record();
    };

    expect(judge(tell(true))).toEqual([]);
    expect(broken(tell(false))).toEqual(['burst']);
  });

  it("counts another instance's calls in no burst begun by an exchange its instance's table failed", () => {
    const tell = (unknown: boolean) => {
      const story = new Story(erring);
      if (unknown) story.fault('i0', 0);
      story.failed('i0', 0, 'error', { latencyMs: 2000 });
      for (const [instance, at] of [
        ['i1', 100],
        ['i2', 200],
        ['i1', 300],
      ] as const)
        story.failed(instance, at, 'error', { latencyMs: 20 });
      return story.record();
    };

    expect(judge(tell(true))).toEqual([]);
    expect(broken(tell(false))).toEqual(['burst']);
  });

  it("excuses a caller whose table or pepper failed it, a holder that died, the key's item tampered with, a rotation", () => {
    const tell = (trouble: (story: Story) => void, third: AskOptions = {}) => {
      const story = new Story(erring);
      trouble(story);
      burst(story, ['i1', 500], ['i2', 600], ['i1', 1020, third]);
      return story.record();
    };
    const holder = (key: string) => (story: Story) => {
      story.ask('i3', 100, { key });
      story.die('i3', 200);
    };

    expect(judge(tell((story) => story.fault('i1', 1000)))).toEqual([]);
    expect(judge(tell((story) => story.pepperFault('i1', 1000)))).toEqual([]);
    expect(judge(tell(holder('a')))).toEqual([]);
    expect(judge(tell((story) => story.tamper(700, 'a', 'garbage')))).toEqual([]);
    expect(judge(tell((story) => story.rotate(900)))).toEqual([]);
    expect(judge(tell(() => undefined, { noCache: true }))).toEqual([]);
    expect(broken(tell((story) => story.fault('i3', 1000)))).toEqual(['burst']);
    expect(broken(tell(holder('b')))).toEqual(['burst']);
    expect(broken(tell((story) => story.tamper(700, 'b', 'garbage')))).toEqual(['burst']);
  });

  it("excuses no-cache requests that came while another instance's exchange ran, when its clock may date the failure before they came", () => {
    const tell = (skews: number[]) => {
      const story = new Story({ ...erring, skews });
      story.failed('i0', 1000, 'error', { latencyMs: 200 });
      for (const [instance, at, sentAt] of [
        ['i1', 1050, 1210],
        ['i2', 1100, 1220],
        ['i3', 1150, 1230],
      ] as const)
        story.failed(instance, at, 'error', { noCache: true, sentAt });
      return story.record();
    };

    expect(judge(tell([0, 100, 100, 100]))).toEqual([]);
    // In step (or apart by less than the exchange ran after they came), they should have shared its failure.
    expect(broken(tell([0, 0, 0, 0]))).toEqual(['burst']);
    expect(broken(tell([0, 40, 40, 40]))).toEqual(['burst']);
  });

  it('excuses the calls after a token too big to share (over 300 KB, as the docs say)', () => {
    const tell = (bytes: number) => {
      const story = new Story({ phases: [failing({ kind: 'reject' })] });
      story.failed('i0', 0, 'unauthorized', { latencyMs: 20 });
      story.miss('i1', 100, { latencyMs: 20, bytes });
      story.miss('i2', 110, { sentAt: 200 });
      story.miss('i3', 115, { sentAt: 300 });
      return story.record();
    };

    expect(judge(tell(300_001))).toEqual([]);
    expect(broken(tell(300_000))).toEqual(['burst']);
  });

  it("excuses no 504 of a request that waited on a claim once the fleet knew the key's tokens do not fit in its item", () => {
    const tell = (knownBefore: boolean, tampered = false) => {
      const story = new Story({ phases: [{ from: 0, minMs: 3000, maxMs: 3000, answer: { kind: 'token', expiresIn: 20 } }] });
      if (knownBefore) story.miss('i0', 0, { latencyMs: 3000, expiresIn: 20, bytes: 400_000 });
      if (tampered) story.tamper(10_000, 'a', 'delete');
      story.miss('i0', 20_000, { latencyMs: 3000, expiresIn: 20, bytes: 400_000 });
      const late = story.ask('i1', 20_010);
      story.call(late, 'timeout', { sentAt: 23_010, budgetMs: 2000 });
      story.error(late, 25_010, 504);
      return story.record();
    };

    expect(judge(tell(false))).toEqual([]);
    expect(broken(tell(true))).toEqual(['worse than off']);
    // Its item deleted since, the fleet may have forgotten.
    expect(judge(tell(true, true))).toEqual([]);
  });

  it('excuses the calls after a token that cannot be kept found no room beside the kept one (360 KB together, as the docs say)', () => {
    const tell = (bytes: number, keptS = 3600, firstAt = 0) => {
      const story = new Story({ skews: [0, 0, 0, 0, 0] });
      story.miss('i0', firstAt, { bytes: 150_000, expiresIn: keptS });
      story.miss('i1', 40_000, { noCache: true, latencyMs: 1000, expiresIn: 20, bytes });
      story.miss('i2', 40_010, { noCache: true, sentAt: 41_030 });
      story.miss('i3', 40_020, { noCache: true, sentAt: 41_040 });
      story.miss('i4', 40_030, { noCache: true, sentAt: 41_050 });
      return story.record();
    };

    expect(judge(tell(210_001))).toEqual([]);
    expect(broken(tell(210_000))).toEqual(['burst']);
    // Expired, the kept token leaves its room (only its dates stay).
    expect(broken(tell(210_001, 35))).toEqual(['burst']);
    // One that cannot be kept takes the room while its own waiters may still come for it, and no longer.
    expect(judge(tell(210_001, 20, 39_000))).toEqual([]);
    expect(broken(tell(210_001, 20, 30_000))).toEqual(['burst']);
  });

  it('with memory, counts only the calls of the instance whose exchange began the burst', () => {
    const story = new Story({ ...erring, cache: 'memory' });
    burst(story, ['i0', 500], ['i1', 600], ['i2', 700]);

    expect(judge(story.record())).toEqual([]);
  });

  it('counts only requests that arrived after its exchange was sent', () => {
    const story = new Story(erring);
    const early = story.ask('i1', 0);
    story.call(early, 'error', { sentAt: 900 });
    story.error(early, 900, 502);
    burst(story, ['i1', 500], ['i2', 600]);

    expect(judge(story.record())).toEqual([]);
  });

  it('excuses a no-cache request only once the failure it would be told is remembered', () => {
    const story = new Story(erring);
    const early = story.ask('i1', 20, { noCache: true });
    story.call(early, 'error', { sentAt: 20 });
    story.error(early, 20, 502);
    burst(story, ['i1', 500], ['i2', 600]);

    expect(broken(story.record())).toEqual(['burst']);
  });

  it("never counts a caller's own assertions", () => {
    const J = secretKey('j', 'client-a', 'assertion');
    const story = new Story({ ...erring, keys: [A, J] });
    for (const at of [0, 100, 200, 300]) story.failed('i0', at, 'error', { key: 'j', latencyMs: 20 });

    expect(judge(story.record())).toEqual([]);
  });

  it('excuses no caller whose table and pepper answered without fault', () => {
    const story = new Story(erring);
    story.fault('i1', 1000, 'a', 'none');
    story.pepperFault('i1', 1000, 'none');
    burst(story, ['i1', 500], ['i2', 600], ['i1', 1020]);

    expect(broken(story.record())).toEqual(['burst']);
  });
});

describe('fresh token kept', () => {
  it('asks the IdP nothing while its own kept token is fresh', () => {
    const [kept, past] = twice((story, step) => {
      story.miss('i0', 0);
      story.miss('i0', 50_000 - step);
    });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['fresh token kept']);
  });

  it("asks nothing with a published copy until its window's middle (its receiver's to refresh before), give or take the clock spread", () => {
    // Kept 100 s: fresh until 50 s, its window's middle at 60 s.
    const tell = (at: number, skews?: number[], own = false) => {
      const story = new Story({ skews });
      if (own) story.miss('i1', 0);
      story.miss('i0', 0);
      story.miss('i1', at);
      return story.record();
    };

    expect(judge(tell(60_000))).toEqual([]);
    expect(broken(tell(59_999))).toEqual(['fresh token kept']);
    expect(judge(tell(58_000, [0, 2000]))).toEqual([]);
    expect(broken(tell(57_999, [0, 2000]))).toEqual(['fresh token kept']);
    // A token of its own in its window is its own to refresh.
    expect(judge(tell(50_000, undefined, true))).toEqual([]);
    expect(broken(tell(49_999, undefined, true))).toEqual(['fresh token kept']);
  });

  it('asks for a no-cache request, and with memory for another instance', () => {
    const story = new Story({ cache: 'memory' });
    story.miss('i0', 0);
    story.miss('i0', 6000, { noCache: true });
    story.miss('i1', 7000);

    expect(judge(story.record())).toEqual([]);
  });

  it('demands no copy its receiver could not surely publish, nor one the reader could not read', () => {
    const tell = (instance: string, at: number) => {
      const story = new Story();
      story.miss('i0', 0, { answerAfterMs: 10 });
      story.fault(instance, at, 'a', 'lost-answer', 'put');
      story.miss('i1', 1000);
      return story.record();
    };

    expect(judge(tell('i0', 5))).toEqual([]);
    expect(judge(tell('i1', 1000))).toEqual([]);
    expect(broken(tell('i2', 1000))).toEqual(['fresh token kept']);
  });

  it("lets a call through once a 401 may have ended the key's token", () => {
    const story = new Story();
    story.miss('i0', 0);
    story.failed('i1', 10_000, 'unauthorized', { noCache: true });
    story.miss('i0', 20_000);

    expect(judge(story.record())).toEqual([]);
  });
});

describe('one refresh at a time', () => {
  it('refreshes a key once at a time across the fleet', () => {
    const [kept, past] = twice((story, step) => {
      story.miss('i0', 0);
      story.miss('i0', 60_000, { latencyMs: 100 });
      story.miss('i1', 60_100 - step);
    });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['one refresh at a time']);
  });

  it('lets each instance refresh its own once a token of the key found no room in the item beside the kept one', () => {
    const tell = (bytes: number) => {
      const story = new Story();
      const { token } = story.miss('i0', 0, { bytes: 150_000 });
      story.kept('i1', 1000, token);
      story.miss('i2', 10_000, { noCache: true, expiresIn: 20, bytes });
      story.miss('i0', 60_000, { latencyMs: 100 });
      story.miss('i1', 60_050);
      return story.record();
    };

    expect(judge(tell(210_001))).toEqual([]);
    expect(broken(tell(210_000))).toEqual(['one refresh at a time']);
  });

  it('with memory, once at a time per instance', () => {
    const tell = (cache: 'memory' | 'shared') => {
      const story = new Story({ cache });
      story.miss('i0', 0);
      story.miss('i1', 0);
      story.miss('i0', 50_000, { latencyMs: 100 });
      story.miss('i1', 50_050);
      return story.record();
    };

    expect(judge(tell('memory'))).toEqual([]);
    expect(broken(tell('shared'))).toEqual(['one refresh at a time']);
  });

  it('excuses the second when the first refresher died', () => {
    const tell = (dies: string) => {
      const story = new Story();
      story.miss('i0', 0);
      const first = story.ask('i0', 60_000);
      story.call(first, 'token', { latencyMs: 2000 });
      story.die(dies, 60_010);
      story.miss('i1', 61_500);
      return story.record(63_000);
    };

    expect(judge(tell('i0'))).toEqual([]);
    expect(broken(tell('i2'))).toEqual(['one refresh at a time']);
  });

  it("excuses the second when either refresher's table failed it", () => {
    const story = new Story();
    story.miss('i0', 0);
    story.miss('i0', 60_000, { latencyMs: 100 });
    story.fault('i0', 60_001, 'a', 'hang', 'put');
    story.miss('i1', 60_050);

    expect(judge(story.record())).toEqual([]);
  });

  it('with memory, refreshes once at a time on one instance', () => {
    const story = new Story({ cache: 'memory' });
    story.miss('i0', 0);
    story.miss('i0', 50_000, { latencyMs: 100 });
    story.miss('i0', 50_050);

    expect(broken(story.record())).toEqual(['one refresh at a time']);
  });

  it('excuses the second when its own table failed it, the item was tampered with, or the pepper rotated', () => {
    const tell = (trouble: (story: Story) => void) => {
      const story = new Story();
      story.miss('i0', 0);
      trouble(story);
      story.miss('i0', 60_000, { latencyMs: 100 });
      story.miss('i1', 60_050);
      return story.record();
    };

    expect(judge(tell((story) => story.fault('i1', 60_050, 'a', 'slow')))).toEqual([]);
    expect(judge(tell((story) => story.fault('i0', 60_001, 'a', 'slow', 'put')))).toEqual([]);
    expect(judge(tell((story) => story.tamper(59_000, 'a', 'rewrite')))).toEqual([]);
    expect(judge(tell((story) => story.rotate(59_000)))).toEqual([]);
    expect(broken(tell((story) => story.fault('i2', 60_050, 'a', 'slow')))).toEqual(['one refresh at a time']);
  });

  it('counts no call made once the token went stale as a refresh', () => {
    const story = new Story();
    story.miss('i0', 0);
    story.miss('i0', 69_000, { latencyMs: 2000 });
    story.miss('i1', 70_000);

    expect(judge(story.record())).toEqual([]);
  });

  it("counts another instance's call as a refresh only once every clock puts its copy in the window", () => {
    const tell = (at: number) => {
      const story = new Story({ skews: [0, 2000] });
      story.miss('i0', 0);
      story.miss('i0', 50_000, { latencyMs: 4000 });
      story.miss('i1', at);
      return story.record();
    };

    expect(judge(tell(51_999))).toEqual([]);
    // Before the window's middle, the copy was its receiver's to refresh too.
    expect(broken(tell(52_000))).toEqual(['fresh token kept', 'one refresh at a time']);
  });

  it("excuses a tampering or a rotation only within their windows, and no death but the first refresher's", () => {
    const tell = (trouble: (story: Story) => void) => {
      const story = new Story();
      story.kept('i1', 1000, story.miss('i0', 0).token); // i1 holds it in memory, whatever the table says
      trouble(story);
      story.miss('i0', 60_000, { latencyMs: 100 });
      story.miss('i1', 60_050);
      return story.record(60_200);
    };

    expect(judge(tell((story) => story.tamper(60_000 - T, 'a', 'rewrite')))).toEqual([]);
    expect(judge(tell((story) => story.rotate(60_050 - 60_000)))).toEqual([]);
    expect(broken(tell((story) => story.tamper(60_000 - T - 1, 'a', 'rewrite')))).toEqual(['one refresh at a time']);
    expect(broken(tell((story) => story.rotate(60_050 - 60_001)))).toEqual(['one refresh at a time']);
    expect(
      broken(
        tell((story) => {
          story.ask('i2', 50_010);
          story.die('i2', 50_020);
        }),
      ),
    ).toEqual(['one refresh at a time']);
  });
});

describe('fresh token kept', () => {
  it('lets the request that thaws a Lambda instance miss the token its exchange got while frozen, not the next one', () => {
    const tell = (mode: 'lambda' | 'concurrent', thawedBefore: boolean) => {
      const story = new Story({ mode });
      const { token } = story.miss('i0', 0);
      story.call(story.kept('i0', 50_000, token), 'token', { latencyMs: 2000 });
      if (thawedBefore) story.kept('i0', 60_000, token);
      story.miss('i0', 61_000);
      return story.record();
    };

    expect(judge(tell('lambda', false))).toEqual([]);
    expect(broken(tell('concurrent', false))).toEqual(['fresh token kept']);
    expect(broken(tell('lambda', true))).toEqual(['fresh token kept']);
  });
});

describe('remembered failures', () => {
  it("remembers a Lambda instance's own 401, met while it was frozen, for 5 s from the request that thawed it, and the fleet with it (seed 1160975961@60)", () => {
    const tell = (mode: 'lambda' | 'concurrent', at: number, instance = 'i0') => {
      const story = new Story({ mode });
      const { token } = story.miss('i0', 0);
      story.call(story.kept('i0', 50_000, token), 'unauthorized', { latencyMs: 50 });
      story.error(story.ask('i0', 53_000), 53_000, 401);
      story.error(story.ask(instance, at), at, 401);
      return story.record();
    };

    expect(judge(tell('lambda', 57_999))).toEqual([]);
    expect(broken(tell('lambda', 58_001))).toEqual(['worse than off']);
    expect(broken(tell('concurrent', 57_999))).toEqual(['worse than off']);
    // "Clocks": with clocks in step the fleet behaves as that one instance, which met the 401 as it thawed.
    expect(judge(tell('lambda', 57_999, 'i1'))).toEqual([]);
    expect(broken(tell('lambda', 58_001, 'i1'))).toEqual(['worse than off']);
  });
});

describe('refresh fires', () => {
  it('refreshes before the token goes stale once a request comes in its window', () => {
    const [kept, past] = twice((story, step) => {
      const { token } = story.miss('i0', 0);
      story.kept('i0', 50_000, token);
      story.miss('i0', 70_000 + step);
    });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['refresh fires']);
  });

  it('is not due before the window opens', () => {
    const [kept, past] = twice((story, step) => story.kept('i0', 49_999 + step, story.miss('i0', 0).token));

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['refresh fires']);
  });

  it("is due from another instance's request only past the window's middle, give or take the spread", () => {
    const tell = (at: number, skews?: number[]) => {
      const story = new Story({ skews });
      story.kept('i1', at, story.miss('i0', 0).token);
      return story.record();
    };

    expect(judge(tell(59_999))).toEqual([]);
    expect(broken(tell(60_000))).toEqual(['refresh fires']);
    expect(judge(tell(61_999, [0, 2000]))).toEqual([]);
    expect(broken(tell(62_000, [0, 2000]))).toEqual(['refresh fires']);
  });

  it('is not due while a failure is remembered for the key', () => {
    const [kept, past] = twice((story, step) => {
      const { token } = story.miss('i0', 0);
      // Another instance's 401, which the fleet remembers (on its own instance, no request would get the token: `401 remembered`).
      story.failed('i1', 48_000, 'unauthorized', { noCache: true });
      story.kept('i0', 52_999 + step, token);
    });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['refresh fires']);
  });

  it('is not due while a hold covers the key, with memory only on the instance that got it', () => {
    const tell = (cache: 'memory' | 'shared') => {
      const story = new Story({ cache });
      const { token } = story.miss('i0', 0);
      story.failed('i1', 49_000, 'throttled', { retryAfterS: 30, noCache: true });
      story.kept('i0', 50_000, token);
      return story.record();
    };

    expect(judge(tell('shared'))).toEqual([]);
    expect(broken(tell('memory'))).toEqual(['refresh fires']);
  });

  it('excuses a refresher that died', () => {
    const story = new Story();
    story.kept('i0', 50_000, story.miss('i0', 0).token);
    story.ask('i1', 50_100);
    story.die('i1', 50_200);

    expect(judge(story.record(70_001))).toEqual([]);
  });

  it("gives another instance's trigger the clock spread to see the token stale", () => {
    const tell = (at: number) => {
      const story = new Story({ skews: [0, 2000, 0] });
      story.kept('i1', 62_000, story.miss('i0', 0).token);
      story.miss('i2', at);
      return story.record();
    };

    expect(judge(tell(72_000))).toEqual([]);
    expect(broken(tell(72_001))).toEqual(['refresh fires']);
  });

  it("counts only a call for the token's key under way once its window opened", () => {
    const tell = (key: string, at: number, latencyMs = 0) => {
      const story = new Story();
      const { token } = story.miss('i0', 0);
      story.failed('i1', at, 'error', { key, noCache: true, latencyMs });
      story.kept('i0', 55_000, token);
      return story.record();
    };

    expect(judge(tell('a', 50_000))).toEqual([]);
    expect(judge(tell('a', 49_000, 1000))).toEqual([]);
    expect(broken(tell('a', 49_000, 999))).toEqual(['refresh fires']);
    expect(broken(tell('b', 50_000))).toEqual(['refresh fires']);
  });

  it("with memory, counts only the receiver's own call or token", () => {
    const tell = (cache: 'memory' | 'shared') => {
      const story = new Story({ cache });
      const { token } = story.miss('i0', 0);
      story.kept('i0', 50_000, token);
      story.miss('i1', 60_000);
      return story.record();
    };

    expect(judge(tell('shared'))).toEqual([]);
    expect(broken(tell('memory'))).toEqual(['refresh fires']);
  });

  it('is not due once a newer token came', () => {
    const story = new Story();
    const { token } = story.miss('i0', 0);
    story.miss('i0', 40_000, { latencyMs: 20, noCache: true });
    story.kept('i1', 65_000, token);

    expect(judge(story.record())).toEqual([]);
  });

  it("excuses no death of another key's holder", () => {
    const story = new Story();
    story.kept('i0', 50_000, story.miss('i0', 0).token);
    story.ask('i1', 50_100, { key: 'b' });
    story.die('i1', 50_200);

    expect(broken(story.record(70_001))).toEqual(['refresh fires']);
  });

  it('is not due while a hold covers the key, until it ends', () => {
    const [kept, past] = twice((story, step) => {
      const { token } = story.miss('i0', 0);
      story.failed('i0', 45_000, 'throttled', { retryAfterS: 10, noCache: true });
      story.kept('i0', 54_999 + step, token);
    });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['refresh fires']);
  });

  it("is due by the first request's reckoning: its receiver's exactly, though a copy came later", () => {
    const tell = (at: number) => {
      const story = new Story({ skews: [0, 2000, 0] });
      const { token } = story.miss('i0', 0);
      story.kept('i0', 50_000, token);
      story.kept('i1', 62_000, token);
      story.miss('i2', at);
      return story.record();
    };

    expect(judge(tell(70_000))).toEqual([]);
    expect(broken(tell(70_001))).toEqual(['refresh fires']);
  });

  it('counts a call from when any clock may see the window open', () => {
    const tell = (at: number) => {
      const story = new Story({ skews: [0, 2000, 0] });
      const { token } = story.miss('i0', 0);
      story.failed('i1', at, 'error', { noCache: true });
      story.kept('i0', 55_000, token);
      return story.record();
    };

    expect(judge(tell(48_000))).toEqual([]);
    expect(broken(tell(47_999))).toEqual(['refresh fires']);
  });

  it("with memory, counts the receiver's own call", () => {
    const story = new Story({ cache: 'memory' });
    const { token } = story.miss('i0', 0);
    story.kept('i0', 50_000, token);
    story.miss('i0', 55_000);

    expect(judge(story.record())).toEqual([]);
  });
});

describe('no-cache reaches the fleet', () => {
  /** i0 holds a token from 0; a no-cache request on i0 replaces it at 10 s. */
  function replaced(story: Story, options: CallOptions & { answerAfterMs?: number } = {}): string {
    const { token } = story.miss('i0', 0);
    story.miss('i0', 10_000, { noCache: true, ...options });
    return token;
  }

  it('reaches every other instance within 30 s', () => {
    const [kept, past] = twice((story, step) => story.kept('i1', 40_000 + step, replaced(story)));

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['no-cache reaches the fleet']);
  });

  it('lets a token up to the clock spread older than the no-cache one, received on another instance, stand for it', () => {
    const tell = (at: number) => {
      const story = new Story({ skews: [0, 1000] });
      story.miss('i0', 10_000, { noCache: true });
      const { token } = story.miss('i1', at);
      story.kept('i0', 45_000, token);
      return story.record();
    };

    expect(judge(tell(9000))).toEqual([]);
    expect(broken(tell(8999))).toEqual(['no-cache reaches the fleet']);
  });

  it("owes it after a rotation only to an instance that read the key's item before the rotation", () => {
    const tell = (readAt: number) => {
      const story = new Story();
      const token = replaced(story);
      story.fault('i1', readAt, 'a', 'none');
      story.rotate(20_000);
      story.kept('i1', 81_000, token, 'stale');
      return story.record();
    };

    expect(judge(tell(25_000))).toEqual([]);
    expect(broken(tell(15_000))).toEqual(['no-cache reaches the fleet']);
  });

  it('replaces the kept token on its own instance at once', () => {
    const [kept, past] = twice((story, step) => {
      const token = replaced(story);
      story.kept('i0', 10_001, story.servedToken(-1));
      story.kept('i0', 10_000 + step, token);
    });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['no-cache reaches the fleet']);
  });

  it("excuses a reader whose table failed it on the key's item, a publisher whose table failed it, a rotation, the item tampered with", () => {
    const tell = (trouble: (story: Story) => void) => {
      const story = new Story();
      const token = replaced(story, { answerAfterMs: 10 });
      trouble(story);
      story.kept('i1', 40_011, token);
      return story.record();
    };

    expect(judge(tell((story) => story.fault('i1', 20_000, 'a')))).toEqual([]);
    expect(judge(tell((story) => story.pepperFault('i1', 20_000)))).toEqual([]);
    expect(judge(tell((story) => story.fault('i0', 10_005, 'a', 'error', 'put')))).toEqual([]);
    expect(judge(tell((story) => story.rotate(1000)))).toEqual([]);
    expect(judge(tell((story) => story.tamper(20_000, 'a', 'delete')))).toEqual([]);
    expect(broken(tell((story) => story.fault('i1', 20_000, 'b')))).toEqual(['no-cache reaches the fleet']);
    expect(broken(tell((story) => story.fault('i2', 20_000, 'a')))).toEqual(['no-cache reaches the fleet']);
  });

  it('replaces nothing with a token that cannot be kept', () => {
    const story = new Story();
    story.kept('i1', 40_001, replaced(story, { expiresIn: 20 }));

    expect(judge(story.record())).toEqual([]);
  });

  it('with memory, reaches only its own instance', () => {
    const tell = (cache: 'memory' | 'shared') => {
      const story = new Story({ cache });
      const { token } = story.miss('i1', 0);
      replaced(story);
      story.kept('i1', 40_001, token);
      return story.record();
    };

    expect(judge(tell('memory'))).toEqual([]);
    expect(broken(tell('shared'))).toEqual(['no-cache reaches the fleet']);
  });
});

describe('pepper', () => {
  // Only what others read from the table is void: a living receiver holds its token and may seal it anew.
  it('ignores items sealed with the old pepper from 60 s after a rotation, once their receiver is dead', () => {
    const [kept, past] = twice((story, step) => {
      const { token } = story.miss('i0', 0, { expiresIn: 3600 });
      story.die('i0', 2000);
      story.rotate(1000);
      story.kept('i1', 60_999 + step, token);
    });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['pepper']);
  });

  it("lets a receiver's token through while the receiver lives, to the very moment of its death", () => {
    const [kept, past] = twice((story, step) => {
      const { token } = story.miss('i0', 0, { expiresIn: 3600 });
      story.rotate(1000);
      story.die('i0', 70_001 - step);
      story.kept('i1', 70_000, token);
    });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['pepper']);
  });

  it('keeps answering what an instance read before then, and what was sealed after', () => {
    const story = new Story();
    const { token } = story.miss('i0', 0, { expiresIn: 3600 });
    const other = story.miss('i0', 2000, { key: 'b', expiresIn: 3600 }).token;
    story.die('i0', 3000);
    story.rotate(1000);
    story.kept('i1', 60_999, token);
    story.kept('i1', 70_000, token);
    story.kept('i2', 80_000, other, 'hit', { key: 'b' });

    expect(judge(story.record())).toEqual([]);
  });

  it('lets a token issued the very moment of the rotation through', () => {
    const [kept, past] = twice((story, step) => {
      story.rotate(step ? 1 : 0);
      const { token } = story.miss('i0', 0, { expiresIn: 3600 });
      story.die('i0', 1000);
      story.kept('i1', 61_000, token);
    });

    expect(judge(kept)).toEqual([]);
    expect(broken(past)).toEqual(['pepper']);
  });

  it('with memory, leaves copies to `memory stays on its instance`', () => {
    const story = new Story({ cache: 'memory' });
    const { token } = story.miss('i0', 0, { expiresIn: 3600 });
    story.die('i0', 2000);
    story.rotate(1000);
    story.kept('i1', 70_000, token);

    expect(broken(story.record())).toEqual(['memory stays on its instance']);
  });
});

describe('costs', () => {
  /** A request on i0 that lasts 100 ms, and `reads` reads and `writes` writes of its item meanwhile. */
  const calls = (reads: number, writes: number, story = new Story()) => {
    story.miss('i0', 0, { latencyMs: 100 });
    for (let index = 0; index < reads; index++) story.fault('i0', index * 5, 'a', 'none');
    for (let index = 0; index < writes; index++) story.put('i0', index * 5, index === 0);
    return story;
  };

  it('lets a request read its item six times and once more per 20 ms it lasts, not more', () => {
    expect(judge(calls(11, 1).record())).toEqual([]);
    expect(broken(calls(12, 1).record())).toEqual(['table costs']);
  });

  it('lets a request write its item four times for each of three writes and each 250 ms it lasts, not more', () => {
    expect(judge(calls(1, 12).record())).toEqual([]);
    expect(broken(calls(1, 13).record())).toEqual(['table costs']);
  });

  it('counts the calls of an instance only while one request is under way on it', () => {
    const story = new Story();
    story.miss('i0', 50, { latencyMs: 100 });

    expect(judge(calls(30, 30, story).record())).toEqual([]);
  });

  it('lets an instance read the pepper again 30 s after a read that answered, 1 s after one that failed', () => {
    const tell = (step: number, fault: PepperRead['fault']) => {
      const story = new Story();
      story.pepperFault('i1', 0, fault);
      story.pepperFault('i1', (fault === 'none' ? 30_000 : 1000) - step, 'none');
      return story.record();
    };

    expect(judge(tell(0, 'none'))).toEqual([]);
    expect(broken(tell(1, 'none'))).toEqual(['pepper reads']);
    expect(judge(tell(0, 'error'))).toEqual([]);
    expect(broken(tell(1, 'error'))).toEqual(['pepper reads']);
  });
});
