import type { Deadline } from '../lambda/clock';
import { upstreamFailure } from '../lambda/errors';
import type { Exchange } from '../lambda/cache/shell/idp';
import type { IdpAnswer, IdpCall, IdpOutcome, IdpPhase, SimKey } from './record';
import { instant, type Owner, type World } from './world';

/**
 * An identity provider in simulated time, whose latency and answer are functions of the time a request
 * reaches it. It checks the client's credentials (a wrong secret is a rejection, unless it throttles or
 * fails everyone) and issues a new, numbered token per request, so every answer can be traced to the
 * request it was for. It keeps the record of every request it saw.
 */
export class SimIdp {
  readonly calls: IdpCall[] = [];
  private serial = 0;

  constructor(
    private readonly world: World,
    private readonly random: () => number,
    private readonly phases: readonly IdpPhase[],
  ) {}

  /** What the IdP does with a request that reaches it at `at`. */
  phaseAt(at: number): IdpPhase {
    let current = this.phases[0] as IdpPhase;
    for (const phase of this.phases) if (phase.from <= at) current = phase;
    return current;
  }

  /** The exchange of request `request` of instance `owner` for `key`, given up at the request's deadline. */
  exchange(owner: Owner, key: SimKey, request: number, deadline: Deadline, onSend: () => void): Exchange {
    return () =>
      new Promise((resolve, reject) => {
        onSend();
        const sentAt = this.world.now;
        const budgetMs = deadline.leftMs();
        const phase = this.phaseAt(sentAt);
        const latencyMs = instant(phase.minMs + this.random() * (phase.maxMs - phase.minMs));
        const answer: IdpAnswer = key.authentic || phase.answer.kind !== 'token' ? phase.answer : { kind: 'reject' };
        const inTime = latencyMs <= budgetMs;
        const endedAt = sentAt + (inTime ? latencyMs : budgetMs);
        const issued = inTime && answer.kind === 'token' ? this.token(answer) : undefined;
        this.calls.push({
          id: this.calls.length,
          request,
          instance: owner.name,
          key: key.id,
          sentAt,
          budgetMs,
          latencyMs,
          endedAt,
          outcome: inTime ? outcomeOf(answer) : 'timeout',
          retryAfterS: answer.kind === 'throttle' ? answer.retryAfter : undefined,
          token: issued?.access_token,
          expiresIn: answer.kind === 'token' ? answer.expiresIn : undefined,
          extExpiresIn: answer.kind === 'token' ? answer.extExpiresIn : undefined,
          bytes: issued ? Buffer.byteLength(JSON.stringify(issued)) : 0,
        });
        this.world.schedule(endedAt, owner, () => {
          if (!inTime) return reject(upstreamFailure('upstream_timeout'));
          switch (answer.kind) {
            case 'token':
              return resolve(issued as NonNullable<typeof issued>);
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

  private token(answer: Extract<IdpAnswer, { kind: 'token' }>) {
    const name = `tok-${++this.serial}`;
    const padding = Math.max(0, (answer.bytes ?? 0) - 80);
    return {
      access_token: padding > 0 ? `${name}.${'x'.repeat(padding)}` : name,
      token_type: 'Bearer',
      ...(answer.expiresIn === undefined ? {} : { expires_in: answer.expiresIn }),
      ...(answer.extExpiresIn === undefined ? {} : { ext_expires_in: answer.extExpiresIn }),
    };
  }
}

function outcomeOf(answer: IdpAnswer): IdpOutcome {
  return answer.kind === 'token' ? 'token' : answer.kind === 'reject' ? 'unauthorized' : answer.kind === 'throttle' ? 'throttled' : 'error';
}
