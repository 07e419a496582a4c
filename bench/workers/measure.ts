import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Call } from '../requests';

/**
 * Every round calls each subject once, in an order shuffled afresh each round (a fixed seed, so runs
 * are alike), so drift, GC pauses and whichever call came before fall on all subjects alike. Between
 * calls the event loop turns once, untimed: work a call leaves behind (releasing its socket, say) is
 * not charged to the next one, as the Lambda runtime sends a response before that work runs.
 */
export async function measure(subjects: Record<string, Call>, rounds: number): Promise<Record<string, number[]>> {
  const names = Object.keys(subjects);
  const samples: Record<string, number[]> = Object.fromEntries(names.map((name) => [name, []]));
  const random = seededRandom(0x5eed);
  for (let round = 0; round < rounds; round++) {
    for (const name of shuffle(names, random)) {
      const call = subjects[name] as Call;
      const started = performance.now();
      await call();
      samples[name]?.push(performance.now() - started);
      await nextTurn();
    }
  }
  return samples;
}

function shuffle<T>(items: readonly T[], random: () => number): T[] {
  const order = [...items];
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [order[i], order[j]] = [order[j] as T, order[i] as T];
  }
  return order;
}

/** mulberry32: a small, fast, seeded generator. */
function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
