import { loadConfig } from '../lambda/config';

describe('loadConfig', () => {
  it('uses the contract defaults for an empty environment', () => {
    const config = loadConfig({});

    expect(config).toEqual({ allowlist: [], upstreamTimeoutMs: 5000, tokenCache: 'off', logLevel: 'INFO' });
  });

  it('reads every variable', () => {
    const config = loadConfig({
      TOKEN_URL_ALLOWLIST: 'https://login.example.com, https://*.auth0.com,https://idp.example.com/oauth2/',
      UPSTREAM_TIMEOUT_MS: '2500',
      TOKEN_CACHE: 'on',
      LOG_LEVEL: 'debug',
    });

    expect(config.allowlist.map((entry) => entry.text)).toEqual([
      'https://login.example.com',
      'https://*.auth0.com',
      'https://idp.example.com/oauth2/',
    ]);
    expect(config.upstreamTimeoutMs).toBe(2500);
    expect(config.tokenCache).toBe('memory');
    expect(config.logLevel).toBe('DEBUG');
  });

  it.each(['0', '-1', '1.5', 'abc', '29001', '5s', ' '])('fails naming UPSTREAM_TIMEOUT_MS for %p', (value) => {
    if (value.trim() === '') {
      expect(loadConfig({ UPSTREAM_TIMEOUT_MS: value }).upstreamTimeoutMs).toBe(5000);
      return;
    }
    expect(() => loadConfig({ UPSTREAM_TIMEOUT_MS: value })).toThrow(/^Environment variable UPSTREAM_TIMEOUT_MS /);
  });

  it.each(['yes', 'true', '1', 'enabled', 'dynamodb'])('fails naming TOKEN_CACHE for %p', (value) => {
    expect(() => loadConfig({ TOKEN_CACHE: value })).toThrow(/^Environment variable TOKEN_CACHE /);
  });

  it.each([
    ['off', 'off'],
    ['on', 'memory'],
    ['memory', 'memory'],
    [' Memory ', 'memory'],
  ])('reads TOKEN_CACHE=%p as %p', (value, mode) => {
    expect(loadConfig({ TOKEN_CACHE: value }).tokenCache).toBe(mode);
  });

  it('reads TOKEN_CACHE=shared with its table', () => {
    const config = loadConfig({ TOKEN_CACHE: 'shared', TOKEN_CACHE_TABLE: ' TokenExchange-TokenCache-1A2B ' });

    expect(config).toMatchObject({ tokenCache: 'shared', tokenCacheTable: 'TokenExchange-TokenCache-1A2B' });
  });

  it('fails naming TOKEN_CACHE_TABLE when TOKEN_CACHE=shared has no table', () => {
    expect(() => loadConfig({ TOKEN_CACHE: 'shared' })).toThrow(
      'Environment variable TOKEN_CACHE_TABLE is required when TOKEN_CACHE is "shared"',
    );
  });

  it.each(['ab', 'token cache', 'table/name', 'x'.repeat(256)])('fails naming TOKEN_CACHE_TABLE for the name %p', (name) => {
    expect(() => loadConfig({ TOKEN_CACHE: 'shared', TOKEN_CACHE_TABLE: name })).toThrow(/^Environment variable TOKEN_CACHE_TABLE must be/);
  });

  it('ignores TOKEN_CACHE_TABLE unless the cache is shared', () => {
    expect(loadConfig({ TOKEN_CACHE: 'memory', TOKEN_CACHE_TABLE: 'unused' }).tokenCacheTable).toBeUndefined();
  });

  it.each(['VERBOSE', 'info2'])('fails naming LOG_LEVEL for %p', (value) => {
    expect(() => loadConfig({ LOG_LEVEL: value })).toThrow(/^Environment variable LOG_LEVEL /);
  });

  it.each([
    'login.example.com',
    'ftp://login.example.com',
    'https://user:pw@login.example.com',
    'https://login.example.com/?a=1',
    'https://login.example.com/#x',
    'https://*.com',
    'https://*.127.0.0.1',
    'https://exa mple.com',
    'https://a..example.com',
  ])('fails naming TOKEN_URL_ALLOWLIST for the entry %p', (entry) => {
    expect(() => loadConfig({ TOKEN_URL_ALLOWLIST: entry })).toThrow(/^Environment variable TOKEN_URL_ALLOWLIST has an invalid entry/);
  });

  it('fails the module load of the deployed handler with the variable name', () => {
    const previous = process.env.UPSTREAM_TIMEOUT_MS;
    process.env.UPSTREAM_TIMEOUT_MS = 'soon';
    try {
      jest.isolateModules(() => {
        expect(() => require('../lambda/handler')).toThrow('Environment variable UPSTREAM_TIMEOUT_MS');
      });
    } finally {
      if (previous === undefined) delete process.env.UPSTREAM_TIMEOUT_MS;
      else process.env.UPSTREAM_TIMEOUT_MS = previous;
    }
  });
});
