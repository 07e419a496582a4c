import type { Adapter, AdapterFactory, AdapterPayload } from 'oidc-provider';

interface Stored {
  payload: AdapterPayload;
  expiresAt: number;
}

const SWEEP_INTERVAL_MS = 60_000;

/**
 * A small in-memory store for the embedded IdP. oidc-provider ships one, but naming it prints a
 * "development-only" warning at every start; this one is ours, forgets everything on restart (as a
 * demo IdP should) and drops expired entries as it goes, so a long local run does not grow forever.
 */
export function memoryAdapter(): AdapterFactory {
  const store = new Map<string, Stored>();
  let lastSweep = Date.now();
  const live = (key: string): Stored | undefined => {
    const entry = store.get(key);
    if (entry && entry.expiresAt <= Date.now()) {
      store.delete(key);
      return undefined;
    }
    return entry;
  };
  const findWhere = (model: string, matches: (payload: AdapterPayload) => boolean): AdapterPayload | undefined => {
    for (const key of store.keys()) {
      const entry = key.startsWith(`${model}:`) ? live(key) : undefined;
      if (entry && matches(entry.payload)) return entry.payload;
    }
    return undefined;
  };

  return (model: string): Adapter => ({
    async upsert(id, payload, expiresIn) {
      if (Date.now() - lastSweep > SWEEP_INTERVAL_MS) {
        lastSweep = Date.now();
        for (const key of store.keys()) live(key);
      }
      store.set(`${model}:${id}`, { payload, expiresAt: expiresIn ? Date.now() + expiresIn * 1000 : Number.POSITIVE_INFINITY });
    },
    async find(id) {
      return live(`${model}:${id}`)?.payload;
    },
    async findByUid(uid) {
      return findWhere(model, (payload) => payload.uid === uid);
    },
    async findByUserCode(userCode) {
      return findWhere(model, (payload) => payload.userCode === userCode);
    },
    async consume(id) {
      const entry = live(`${model}:${id}`);
      if (entry) entry.payload.consumed = Math.floor(Date.now() / 1000);
    },
    async destroy(id) {
      store.delete(`${model}:${id}`);
    },
    async revokeByGrantId(grantId) {
      for (const [key, entry] of store) if (entry.payload.grantId === grantId) store.delete(key);
    },
  });
}
