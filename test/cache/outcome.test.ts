import { ExchangeError, upstreamFailure } from '../../lambda/errors';
import type { Entry } from '../../lambda/cache/lifetime';
import { exchangeResult, outcomeOf } from '../../lambda/cache/outcome';
import { epochMs } from '../../lambda/cache/time';

// How one exchange's result becomes the outcome of a fetch that asked the IdP without the table.

const NOW = epochMs(1_800_000_000_000);
const KEPT: Entry = { token: { access_token: 'kept', expires_in: 3600 }, receivedAt: epochMs(NOW - 3_300_000) };
const STAND = { kept: KEPT, rejectedAt: epochMs(0), scope: 'key' as const };
const FULL = { budgetMs: 5000, upstreamTimeoutMs: 5000 };

describe('exchangeResult', () => {
  it('gives the token with when it was received', async () => {
    const result = await exchangeResult(
      async () => ({ access_token: 'new', expires_in: 3600 }),
      4000,
      () => NOW,
    );

    expect(result).toEqual({ token: { token: { access_token: 'new', expires_in: 3600 }, receivedAt: NOW } });
  });

  it('gives a failure the cache remembers, and throws anything else as the bug it is', async () => {
    const failed = exchangeResult(
      () => Promise.reject(upstreamFailure('upstream_error')),
      4000,
      () => NOW,
    );
    const bug = exchangeResult(
      () => Promise.reject(new ExchangeError('internal_error', 'Internal error')),
      4000,
      () => NOW,
    );

    await expect(failed).resolves.toEqual({ failure: { code: 'upstream_error', until: epochMs(NOW + 1000) } });
    await expect(bug).rejects.toMatchObject({ code: 'internal_error' });
  });
});

describe('outcomeOf', () => {
  it("answers a token as the IdP's", () => {
    const token: Entry = { token: { access_token: 'new', expires_in: 3600 }, receivedAt: NOW };

    expect(outcomeOf({ token }, STAND, FULL)).toEqual({ kind: 'token', entry: token, from: 'idp' });
  });

  it('keeps the kept token standing in for a failure of the exchange', () => {
    const failure = { code: 'upstream_error' as const, until: epochMs(NOW + 1000) };

    expect(outcomeOf({ failure }, STAND, FULL)).toEqual({ kind: 'failure', failure, ...STAND, cause: 'exchange' });
  });

  it('lets no kept token stand in for a rejection, which voids it', () => {
    const failure = { code: 'unauthorized' as const, until: epochMs(NOW + 5000) };

    expect(outcomeOf({ failure }, STAND, FULL)).toMatchObject({ kind: 'failure', kept: undefined, cause: 'exchange' });
  });

  it("counts a timeout the cache's own waiting cut short as the fetch's deadline", () => {
    const failure = { code: 'upstream_timeout' as const, until: epochMs(NOW + 1000) };

    expect(outcomeOf({ failure }, STAND, { budgetMs: 3000, upstreamTimeoutMs: 5000 })).toMatchObject({ cause: 'deadline', kept: KEPT });
    expect(outcomeOf({ failure }, STAND, FULL)).toMatchObject({ cause: 'exchange' });
  });
});
