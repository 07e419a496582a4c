import { loadConfig, loadConfigAtStart } from '../lambda/config';

const TIMEOUT_RANGE = 'Environment variable UPSTREAM_TIMEOUT_MS must be a whole number of milliseconds from 1 to 29000';
const CACHE_SWITCH = 'Environment variable TOKEN_CACHE must be "off", "memory" (or its alias "on") or "shared"';
const LOG_LEVELS = 'Environment variable LOG_LEVEL must be one of TRACE, DEBUG, INFO, WARN, ERROR, CRITICAL, SILENT';

describe('loadConfig', () => {
  it('uses the contract defaults for an empty environment', () => {
    // Act
    const config = loadConfig({});

    // Assess
    expect(config).toEqual({
      allowlist: [],
      upstreamTimeoutMs: 5000,
      tokenCache: { mode: 'off' },
      logLevel: 'INFO',
      storedCredentials: [],
    });
  });

  it('reads every variable', () => {
    // Act
    const config = loadConfig({
      TOKEN_URL_ALLOWLIST: 'https://login.example.com, https://*.auth0.com,https://idp.example.com/oauth2/',
      UPSTREAM_TIMEOUT_MS: '2500',
      TOKEN_CACHE: 'on',
      LOG_LEVEL: 'debug',
    });

    // Assess
    expect({ ...config, allowlist: config.allowlist.map((entry) => entry.text) }).toEqual({
      allowlist: ['https://login.example.com', 'https://*.auth0.com', 'https://idp.example.com/oauth2/'],
      upstreamTimeoutMs: 2500,
      tokenCache: { mode: 'memory' },
      logLevel: 'DEBUG',
      storedCredentials: [],
    });
  });

  it('ignores whitespace around every value', () => {
    // Act
    const config = loadConfig({
      TOKEN_URL_ALLOWLIST: '  https://login.example.com  ',
      UPSTREAM_TIMEOUT_MS: ' 2500 ',
      TOKEN_CACHE: ' On ',
      LOG_LEVEL: ' warn ',
    });

    // Assess
    expect({ ...config, allowlist: config.allowlist.map((entry) => entry.text) }).toEqual({
      allowlist: ['https://login.example.com'],
      upstreamTimeoutMs: 2500,
      tokenCache: { mode: 'memory' },
      logLevel: 'WARN',
      storedCredentials: [],
    });
  });

  it.each(['', '   '])('reads an UPSTREAM_TIMEOUT_MS of %p as the 5000 ms default', (value) => {
    expect(loadConfig({ UPSTREAM_TIMEOUT_MS: value }).upstreamTimeoutMs).toBe(5000);
  });

  it.each([
    ['off', 'off'],
    ['on', 'memory'],
    ['memory', 'memory'],
    [' Memory ', 'memory'],
  ])('reads TOKEN_CACHE=%p as %p', (value, mode) => {
    expect(loadConfig({ TOKEN_CACHE: value }).tokenCache).toEqual({ mode });
  });

  const SHARED = { TOKEN_CACHE: 'shared', TOKEN_CACHE_TABLE: 'cache-table', TOKEN_CACHE_PEPPER_SECRET: 'pepper' };

  it('reads TOKEN_CACHE=shared with its table and the secret that holds its pepper', () => {
    const config = loadConfig({
      TOKEN_CACHE: 'shared',
      TOKEN_CACHE_TABLE: ' TokenExchange-TokenCache-1A2B ',
      TOKEN_CACHE_PEPPER_SECRET: ' arn:aws:secretsmanager:eu-west-1:123456789012:secret:TokenCachePepper-AbCdEf ',
    });

    expect(config.tokenCache).toEqual({
      mode: 'shared',
      table: 'TokenExchange-TokenCache-1A2B',
      pepperSecret: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:TokenCachePepper-AbCdEf',
    });
  });

  it('fails naming TOKEN_CACHE_TABLE when TOKEN_CACHE=shared has no table', () => {
    expect(() => loadConfig({ ...SHARED, TOKEN_CACHE_TABLE: undefined })).toThrow(
      'Environment variable TOKEN_CACHE_TABLE is required when TOKEN_CACHE is "shared"',
    );
  });

  it.each(['ab', 'token cache', 'table/name', 'x'.repeat(256)])('fails naming TOKEN_CACHE_TABLE for the name %p', (name) => {
    expect(() => loadConfig({ ...SHARED, TOKEN_CACHE_TABLE: name })).toThrow(/^Environment variable TOKEN_CACHE_TABLE must be/);
  });

  it.each([undefined, ' '])('fails naming TOKEN_CACHE_PEPPER_SECRET when TOKEN_CACHE=shared has none (%p)', (secret) => {
    expect(() => loadConfig({ ...SHARED, TOKEN_CACHE_PEPPER_SECRET: secret })).toThrow(
      'Environment variable TOKEN_CACHE_PEPPER_SECRET is required when TOKEN_CACHE is "shared"',
    );
  });

  it.each(['a name with spaces', 'x'.repeat(2049), 'tab\there'.replace('\\t', '\t')])(
    'fails naming TOKEN_CACHE_PEPPER_SECRET for %p',
    (secret) => {
      expect(() => loadConfig({ ...SHARED, TOKEN_CACHE_PEPPER_SECRET: secret })).toThrow(
        'Environment variable TOKEN_CACHE_PEPPER_SECRET must be a Secrets Manager secret ARN or name',
      );
    },
  );

  it('needs neither table nor pepper unless the cache is shared', () => {
    expect(loadConfig({ TOKEN_CACHE: 'memory', TOKEN_CACHE_TABLE: 'unused' }).tokenCache).toEqual({ mode: 'memory' });
  });

  it.each([
    ['1', 1],
    ['29000', 29_000],
  ])('accepts the UPSTREAM_TIMEOUT_MS bound %p', (value, ms) => {
    expect(loadConfig({ UPSTREAM_TIMEOUT_MS: value }).upstreamTimeoutMs).toBe(ms);
  });

  it.each(['0', '-1', '1.5', '1e3', '0x10', 'abc', '29001', '5s'])('fails naming UPSTREAM_TIMEOUT_MS and its range for %p', (value) => {
    expect(() => loadConfig({ UPSTREAM_TIMEOUT_MS: value })).toThrow(new Error(TIMEOUT_RANGE));
  });

  it.each([
    ['OFF', 'off'],
    ['', 'off'],
    ['ON', 'memory'],
    ['SHARED', 'shared'],
  ])('reads TOKEN_CACHE=%p as %p', (value, mode) => {
    expect(loadConfig({ TOKEN_CACHE: value, TOKEN_CACHE_TABLE: 'cache-table', TOKEN_CACHE_PEPPER_SECRET: 'pepper' }).tokenCache.mode).toBe(
      mode,
    );
  });

  it.each(['yes', 'true', '1', 'enabled', 'dynamodb'])('fails naming TOKEN_CACHE and its values for %p', (value) => {
    expect(() => loadConfig({ TOKEN_CACHE: value })).toThrow(new Error(CACHE_SWITCH));
  });

  it.each(['VERBOSE', 'info2'])('fails naming LOG_LEVEL and its values for %p', (value) => {
    expect(() => loadConfig({ LOG_LEVEL: value })).toThrow(new Error(LOG_LEVELS));
  });

  it.each([
    ['login.example.com', 'it is not a URL'],
    ['//login.example.com', 'it is not a URL'],
    ['https://', 'it is not a URL'],
    ['https://login.example.com:99999', 'it is not a URL'],
    ['https://log in.example.com', 'it is not a URL'],
    ['https://*.', 'it is not a URL'],
    ['ftp://login.example.com', 'it must start with https:// or http://'],
    ['https://user@login.example.com', 'user-info is not allowed'],
    ['https://user:pass@login.example.com', 'user-info is not allowed'],
    ['https://login.example.com/token?x=1', 'query and fragment are not allowed'],
    ['https://login.example.com/token?', 'query and fragment are not allowed'],
    ['https://login.example.com/token#x', 'query and fragment are not allowed'],
    ['https://login.example.com/token#', 'query and fragment are not allowed'],
    ['https://login..example.com', 'the host has an empty label'],
    ['https://login.example.com.', 'the host has an empty label'],
    ['https://*.com', '*. must precede a domain with at least two labels'],
    ['https://*.127.0.0.1', '*. must precede a domain with at least two labels'],
    ['https://*.[::1]', '*. must precede a domain with at least two labels'],
    ['https://*', '* is only allowed as the leading *. of a wildcard entry'],
    ['https://*.*.auth0.com', '* is only allowed as the leading *. of a wildcard entry'],
    ['https://login*.example.com', '* is only allowed as the leading *. of a wildcard entry'],
  ])('fails naming TOKEN_URL_ALLOWLIST, the entry %p and why: %s', (entry, why) => {
    // Act
    const act = () => loadConfig({ TOKEN_URL_ALLOWLIST: `https://fine.example.com,${entry}` });

    // Assess
    expect(act).toThrow(new Error(`Environment variable TOKEN_URL_ALLOWLIST has an invalid entry "${entry}": ${why}`));
  });

  it('fails the module load of the deployed handler with the variable name', () => {
    // Prepare
    const previous = process.env.UPSTREAM_TIMEOUT_MS;
    process.env.UPSTREAM_TIMEOUT_MS = 'soon';
    try {
      // Act
      const load = () => jest.isolateModules(() => require('../lambda/handler'));

      // Assess
      expect(load).toThrow(new Error(TIMEOUT_RANGE));
    } finally {
      if (previous === undefined) delete process.env.UPSTREAM_TIMEOUT_MS;
      else process.env.UPSTREAM_TIMEOUT_MS = previous;
    }
  });
});

describe('settings the function refuses to start with', () => {
  const SHARED = { TOKEN_CACHE: 'shared', TOKEN_CACHE_TABLE: 'cache-table', TOKEN_CACHE_PEPPER_SECRET: 'pepper' };
  const KEYLESS = JSON.stringify([
    {
      name: 'k',
      clientId: 'c',
      tokenUrl: 'https://idp.example.com/t',
      method: 'private_key_jwt',
      keyId: 'alias/k',
      callers: ['arn:aws:iam::1:role/r'],
    },
  ]);
  const AWS = { AWS_REGION: 'eu-west-1', AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE', AWS_SECRET_ACCESS_KEY: 'example' };

  it.each([{}, SHARED])('NODE_TLS_REJECT_UNAUTHORIZED=0, in any mode (%p), naming it', (mode) => {
    expect(() => loadConfig({ ...mode, NODE_TLS_REJECT_UNAUTHORIZED: '0' })).toThrow(
      'Environment variable NODE_TLS_REJECT_UNAUTHORIZED must not be 0: it turns certificate checks off for every IdP and AWS call',
    );
  });

  it.each(['1', ''])('leaves NODE_TLS_REJECT_UNAUTHORIZED=%p alone: Node turns checks off for 0 only', (value) => {
    expect(loadConfig({ NODE_TLS_REJECT_UNAUTHORIZED: value }).tokenCache.mode).toBe('off');
  });

  it.each<[string, Record<string, string>, string]>([
    ['the shared cache', SHARED, 'AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_SECRETS_MANAGER'],
    ['a keyless stored credential', { STORED_CREDENTIALS: KEYLESS }, 'AWS_ENDPOINT_URL_KMS'],
    [
      'the shared cache, one endpoint named',
      { ...SHARED, AWS_ENDPOINT_URL_DYNAMODB: 'https://x.example' },
      'AWS_ENDPOINT_URL_SECRETS_MANAGER',
    ],
    [
      'endpoints named but ignored',
      { ...SHARED, AWS_ENDPOINT_URL: 'https://x.example', AWS_IGNORE_CONFIGURED_ENDPOINT_URLS: 'true' },
      'AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_SECRETS_MANAGER',
    ],
  ])('AWS_USE_DUALSTACK_ENDPOINT=true with %s, naming it and each endpoint to name', (_case, env, endpoints) => {
    expect(() => loadConfig({ ...env, AWS_USE_DUALSTACK_ENDPOINT: 'true' })).toThrow(
      `Environment variable AWS_USE_DUALSTACK_ENDPOINT=true is not supported by the function's AWS client: name the dual-stack endpoint in ${endpoints} (or AWS_ENDPOINT_URL), or leave it unset`,
    );
  });

  it.each<[string, Record<string, string>]>([
    ['no AWS call at all', { TOKEN_CACHE: 'memory' }],
    [
      'every endpoint named',
      { ...SHARED, AWS_ENDPOINT_URL_DYNAMODB: 'https://a.example', AWS_ENDPOINT_URL_SECRETS_MANAGER: 'https://b.example' },
    ],
    ['AWS_ENDPOINT_URL for all', { ...SHARED, STORED_CREDENTIALS: KEYLESS, AWS_ENDPOINT_URL: 'https://a.example' }],
  ])('accepts AWS_USE_DUALSTACK_ENDPOINT=true with %s', (_case, env) => {
    expect(() => loadConfig({ ...env, AWS_USE_DUALSTACK_ENDPOINT: 'true' })).not.toThrow();
  });

  it.each<[string, Record<string, string>]>([
    ['the shared cache', SHARED],
    ['stored credentials', { STORED_CREDENTIALS: KEYLESS }],
  ])('at the start, with %s, no AWS_ACCESS_KEY_ID or AWS_SECRET_ACCESS_KEY, naming both', (_case, env) => {
    const message =
      'Environment variables AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are required when TOKEN_CACHE is "shared" or there are stored credentials';
    expect(() => loadConfigAtStart({ ...env, ...AWS, AWS_ACCESS_KEY_ID: '' })).toThrow(message);
    expect(() => loadConfigAtStart({ ...env, ...AWS, AWS_SECRET_ACCESS_KEY: undefined })).toThrow(message);
    // Synth checks what the stack sets: Lambda sets these only when the function runs.
    expect(() => loadConfig(env)).not.toThrow();
  });

  it.each([undefined, 'eu_west_1', 'local'])('at the start, with the shared cache, an AWS_REGION of %p, naming it', (region) => {
    expect(() => loadConfigAtStart({ ...SHARED, ...AWS, AWS_REGION: region })).toThrow(
      'Environment variable AWS_REGION must be a region name when TOKEN_CACHE is "shared" or there are stored credentials',
    );
  });

  it('needs no AWS settings at the start of a function that calls no AWS service', () => {
    expect(loadConfigAtStart({ TOKEN_CACHE: 'memory' }).tokenCache).toEqual({ mode: 'memory' });
    expect(loadConfigAtStart({ ...SHARED, ...AWS }).tokenCache.mode).toBe('shared');
  });
});
