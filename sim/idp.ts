import { upstreamFailure } from '../lambda/errors';
import type { Exchange } from '../lambda/cache/outcome';
import type { Owner, World } from './world';

/** What the IdP answers a request that reaches it at a moment: a token, a rejection, a request to wait, an error, or nothing in time. */
export type IdpAnswer =
  | { readonly kind: 'token'; readonly expiresIn: number | undefined }
  | { readonly kind: 'reject' }
  | { readonly kind: 'throttle'; readonly retryAfter: number }
  | { readonly kind: 'error' };

/** The IdP's behaviour from a moment on: how long it takes, what it answers a right secret, and a wrong one (a rejection unless said). */
export interface IdpPhase {
  readonly from: number;
  readonly minMs: number;
  readonly maxMs: number;
  readonly answer: IdpAnswer;
  readonly wrongSecret?: IdpAnswer;
}

/** What a response was, for the invariants: the class of error it is (`timeout`: none came in time). */
export type ResponseClass = 'token' | 'unauthorized' | 'throttled' | 'error' | 'timeout';

/** One request that reached the IdP. */
export interface IdpRequest {
  readonly key: string;
  readonly client: string;
  readonly sentAt: number;
  readonly latencyMs: number;
  readonly timeoutMs: number;
  readonly answer: IdpAnswer;
  /** When the answer came back, or when the request's own deadline ended it. */
  readonly endedAt: number;
  readonly class: ResponseClass;
  readonly by: string;
  /** When the caller's request that led to it arrived. */
  readonly arrivedAt: number;
  /** The token it issued, if any. */
  readonly token: string | undefined;
}

/** A token the IdP issued, for the invariants: whose it is, and when it expires in true time. */
export interface Issued {
  readonly key: string;
  readonly issuedAt: number;
  readonly expiresIn: number | undefined;
}

/**
 * An identity provider in simulated time, whose latency and answer are functions of the time a request
 * reaches it. It checks the client's secret (a wrong one is a rejection, unless it throttles everyone)
 * and issues a new, numbered token per request, so every answer can be traced to the request it was for.
 */
export class SimIdp {
  readonly requests: IdpRequest[] = [];
  readonly issued = new Map<string, Issued>();
  private serial = 0;

  constructor(
    private readonly world: World,
    private readonly random: () => number,
    private readonly phases: readonly IdpPhase[],
  ) {}

  /** What the IdP would do with a request that reached it at `at` with the right secret: its latency range and answer. */
  phaseAt(at: number): IdpPhase {
    let current = this.phases[0] as IdpPhase;
    for (const phase of this.phases) if (phase.from <= at) current = phase;
    return current;
  }

  /** The exchange of one request: `key` names its token's identity; `authentic`: its credentials are the client's own. */
  exchange(owner: Owner, key: string, client: string, authentic: boolean, arrivedAt: number): Exchange {
    return (timeoutMs) =>
      new Promise((resolve, reject) => {
        const sentAt = this.world.now;
        const phase = this.phaseAt(sentAt);
        const latencyMs = phase.minMs + this.random() * (phase.maxMs - phase.minMs);
        const answer: IdpAnswer = authentic || phase.answer.kind === 'throttle' ? phase.answer : (phase.wrongSecret ?? { kind: 'reject' });
        const inTime = latencyMs <= timeoutMs;
        const token = inTime && answer.kind === 'token' ? `token-${++this.serial}` : undefined;
        const endedAt = sentAt + (inTime ? latencyMs : timeoutMs);
        this.requests.push({
          key,
          client,
          sentAt,
          latencyMs,
          timeoutMs,
          answer,
          endedAt,
          class: inTime ? classOf(answer) : 'timeout',
          by: owner.name,
          arrivedAt,
          token,
        });
        if (token) this.issued.set(token, { key, issuedAt: endedAt, expiresIn: answer.kind === 'token' ? answer.expiresIn : undefined });
        this.world.schedule(endedAt, owner, () => {
          if (!inTime) return reject(upstreamFailure('upstream_timeout'));
          switch (answer.kind) {
            case 'token':
              return resolve({
                access_token: token as string,
                token_type: 'Bearer',
                ...(answer.expiresIn === undefined ? {} : { expires_in: answer.expiresIn }),
              });
            case 'reject':
              return reject(upstreamFailure('unauthorized'));
            case 'throttle':
              return reject(upstreamFailure('upstream_throttled', answer.retryAfter));
            case 'error':
              return reject(upstreamFailure('upstream_error'));
          }
        });
      });
  }
}

function classOf(answer: IdpAnswer): ResponseClass {
  return answer.kind === 'token' ? 'token' : answer.kind === 'reject' ? 'unauthorized' : answer.kind === 'throttle' ? 'throttled' : 'error';
}
