// What one mode's fleet answered in one scenario, judged from outside: statuses, latency, lateness, and whether each token
// answered was one the IdP issued for that key and still alive. Nothing here reads the cache's state or shares its constants.
import { readToken } from './idp';

/** One answer as the caller saw it. Times in epoch ms; `ms` is the handler's own duration in its process. */
export interface Answer {
  readonly clientId: string;
  readonly sentAt: number;
  readonly ms: number;
  /** 0: no answer at all (the process died or rejected). */
  readonly status: number;
  readonly cache: string;
  readonly body: string;
}

/** What the contract forbids in a 200's token, or undefined. */
export function wrongToken(answer: Answer): string | undefined {
  if (answer.status !== 200) return undefined;
  const body = bodyOf(answer);
  const token = readToken(body.access_token);
  if (token === undefined || token.clientId !== answer.clientId) return 'of another key';
  const expiresAt = token.issuedAt + token.expiresIn * 1000;
  // The handler answered no earlier than sentAt + ms. The contract's 5 s before expiry count on the clock of the instance that
  // received the token, a little after the IdP sent it: 1 s of that is left for the way.
  const answeredAt = answer.sentAt + answer.ms;
  if (answeredAt > expiresAt) return 'expired';
  // Near expiry: within the last 5 s of its life.
  if (answeredAt > expiresAt - 4000) return 'near expiry';
  // `expires_in` counts whole seconds down from when the function received the token, a little after the IdP sent it.
  if (typeof body.expires_in === 'number' && body.expires_in * 1000 > expiresAt - answer.sentAt + 1000) return 'expires_in too long';
  return undefined;
}

/** An answer's JSON body as an object; anything else reads as an empty one. */
export function bodyOf(answer: Answer): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(answer.body);
    return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

export class Tally {
  readonly statuses = new Map<number, number>();
  /** The `x-token-cache` of the 200s. */
  readonly cache = new Map<string, number>();
  readonly wrong = new Map<string, number>();
  readonly durations: number[] = [];
  /** 200s and answers in each `bucketMs` since the scenario started, for the progress lines. */
  readonly timeline: { ok: number; answered: number }[] = [];
  ok = 0;
  late = 0;
  idpRequests = 0;
  /** The most IdP requests any one key took. */
  idpPerKeyMax = 0;
  /** The CPU time the fleet's processes used in the scenario. */
  cpuMs = 0;
  /** When the last answer other than a good 200 was asked for, in ms since the scenario started. */
  lastFailedAt: number | undefined;

  constructor(
    readonly startedAt: number,
    private readonly deadlineMs: number,
    readonly bucketMs: number,
  ) {}

  /** Count an answer; what is wrong with its token, if anything. */
  add(answer: Answer): string | undefined {
    count(this.statuses, answer.status);
    const bucket = Math.max(0, Math.floor((answer.sentAt - this.startedAt) / this.bucketMs));
    for (let index = this.timeline.length; index <= bucket; index++) this.timeline.push({ ok: 0, answered: 0 });
    (this.timeline[bucket] as { answered: number }).answered++;
    const wrong = wrongToken(answer);
    if (answer.status !== 200 || wrong !== undefined) this.lastFailedAt = Math.max(this.lastFailedAt ?? 0, answer.sentAt - this.startedAt);
    if (answer.status === 0) return undefined;
    this.durations.push(answer.ms);
    if (answer.ms > this.deadlineMs + 100) this.late++;
    if (answer.status !== 200) return undefined;
    if (wrong !== undefined) {
      count(this.wrong, wrong);
      return wrong;
    }
    this.ok++;
    (this.timeline[bucket] as { ok: number }).ok++;
    count(this.cache, answer.cache);
    return undefined;
  }

  get answered(): number {
    return [...this.statuses.values()].reduce((a, b) => a + b, 0);
  }

  /** Nearest rank: a latency really observed. */
  percentile(p: number): number {
    const sorted = [...this.durations].sort((a, b) => a - b);
    return sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)] ?? 0;
  }
}

function count<K>(counts: Map<K, number>, key: K): void {
  counts.set(key, (counts.get(key) ?? 0) + 1);
}
