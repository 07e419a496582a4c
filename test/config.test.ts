import { loadConfig } from '../lambda/config';

describe('loadConfig', () => {
  it('uses the contract defaults for an empty environment', () => {
    const config = loadConfig({});

    expect(config).toEqual({ allowlist: [], upstreamTimeoutMs: 5000, tokenCache: false, logLevel: 'INFO' });
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
    expect(config.tokenCache).toBe(true);
    expect(config.logLevel).toBe('DEBUG');
  });

  it.each(['0', '-1', '1.5', 'abc', '29001', '5s', ' '])('fails naming UPSTREAM_TIMEOUT_MS for %p', (value) => {
    if (value.trim() === '') {
      expect(loadConfig({ UPSTREAM_TIMEOUT_MS: value }).upstreamTimeoutMs).toBe(5000);
      return;
    }
    expect(() => loadConfig({ UPSTREAM_TIMEOUT_MS: value })).toThrow(/^Environment variable UPSTREAM_TIMEOUT_MS /);
  });

  it.each(['yes', 'true', '1', 'enabled'])('fails naming TOKEN_CACHE for %p', (value) => {
    expect(() => loadConfig({ TOKEN_CACHE: value })).toThrow(/^Environment variable TOKEN_CACHE /);
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
