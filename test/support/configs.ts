import type { Config } from '../../lambda/config';

/**
 * The configuration with the permit of every allowlist entry replaced by one: how the tests make the
 * address check answer as a case needs (throw like a bug, or say yes once and then no) without mocking.
 */
export function withPermit(config: Config, key: string, allows: (address: string) => boolean): Config {
  if (config.allowlist.length === 0) throw new Error('withPermit expects an allowlist');
  return { ...config, allowlist: config.allowlist.map((entry) => ({ ...entry, permit: { key, allows } })) };
}
