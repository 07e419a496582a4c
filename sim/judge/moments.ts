/** Moments in time, sorted once, asked what falls in a closed window: the judge's only index. */
export class Moments<T = undefined> {
  private readonly entries: { readonly at: number; readonly what: T }[];

  constructor(entries: Iterable<{ readonly at: number; readonly what: T }>) {
    this.entries = [...entries].sort((a, b) => a.at - b.at);
  }

  static of(times: Iterable<number>): Moments {
    return new Moments([...times].map((at) => ({ at, what: undefined })));
  }

  /** Whether anything happened in [from, to]. */
  any(from: number, to: number): boolean {
    const first = this.entries[this.lowerBound(from)];
    return first !== undefined && first.at <= to;
  }

  /** What happened in [from, to], in order. */
  within(from: number, to: number): T[] {
    const found: T[] = [];
    for (let index = this.lowerBound(from); index < this.entries.length; index++) {
      const entry = this.entries[index] as { at: number; what: T };
      if (entry.at > to) break;
      found.push(entry.what);
    }
    return found;
  }

  private lowerBound(at: number): number {
    let [low, high] = [0, this.entries.length];
    while (low < high) {
      const middle = (low + high) >>> 1;
      if ((this.entries[middle] as { at: number }).at < at) low = middle + 1;
      else high = middle;
    }
    return low;
  }
}

/** The list under `key`, made when first asked for. */
export function listIn<K, V>(map: Map<K, V[]>, key: K): V[] {
  let list = map.get(key);
  if (!list) map.set(key, (list = []));
  return list;
}
