import type { Config } from '../../lambda/config';

/**
 * The configuration with its one allowlist entry's permit replaced: how the tests make the address
 * check answer as a case needs (throw like a bug, or say yes once and then no) without mocking.
 */
export function withPermit(config: Config, key: string, allows: (address: string) => boolean): Config {
  const [entry, ...others] = config.allowlist;
  if (!entry || others.length > 0) throw new Error('withPermit expects an allowlist of exactly one entry');
  return { ...config, allowlist: [{ ...entry, permit: { key, allows } }] };
}
