import { type Owner, World } from '../../sim/world';

// The simulator's time: an instance shaped like Lambda is frozen between requests, and what came due
// meanwhile waits for the next request to thaw it.

const owner = (): Owner => ({ name: 'i0', frozen: false, dead: false, deferred: [] });

describe('a frozen owner', () => {
  it('runs what came due while frozen when thawed, though it is frozen again at once (seed 1090245116)', async () => {
    const world = new World();
    const lambda = owner();
    const ran: string[] = [];
    lambda.frozen = true;
    world.schedule(10, lambda, () => ran.push('answer from the IdP'));
    // The next request thaws it and is answered (and the instance frozen) before anything else runs.
    world.schedule(20, undefined, () => {
      world.thaw(lambda);
      ran.push('request');
      lambda.frozen = true;
    });
    world.schedule(20, lambda, () => ran.push('a timer due while frozen again'));
    await world.run(100);

    expect(ran).toEqual(['request', 'answer from the IdP']);
    expect(lambda.deferred).toHaveLength(1);
  });

  it.each([
    [false, ['kept']],
    [true, []],
  ])('runs nothing cancelled meanwhile, nor anything once it died (dead: %s)', async (dies, expected) => {
    const world = new World();
    const lambda = owner();
    const ran: string[] = [];
    lambda.frozen = true;
    world.schedule(10, lambda, () => ran.push('kept'));
    const cancelled = world.schedule(10, lambda, () => ran.push('cancelled'));
    world.schedule(15, undefined, () => cancelled.cancel());
    world.schedule(20, undefined, () => {
      world.thaw(lambda);
      lambda.dead = dies;
    });
    await world.run(100);

    expect(ran).toEqual(expected);
  });
});

describe('simulated time', () => {
  it('keeps times on a grid where a deadline 5 s after an arrival lands exactly 5 s after it (seed 2003866133)', async () => {
    const world = new World();
    const seen: number[] = [];
    // As a runtime's timers do: a deadline on an instance's own clock, waited for from a later moment.
    const mono = (at: number) => at + 747_424;
    world.schedule(11_189.900036153944, undefined, () => {
      const arrival = world.now;
      const deadline = mono(arrival) + 5000;
      world.schedule(12_219.468696873142, undefined, () => {
        world.schedule(world.now + (deadline - mono(world.now)), undefined, () => seen.push(world.now - arrival));
      });
    });
    await world.run(Infinity);

    expect(seen).toEqual([5000]);
  });
});
