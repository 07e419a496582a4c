import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../lambda/config';

// STORED_CREDENTIALS, or the file STORED_CREDENTIALS_FILE names, read by loadConfig as the function
// starts: a bad entry fails the start with a message naming the variable (and the file) and the entry.

const ALLOWLIST = 'https://login.example.com,https://*.okta.com,http://10.0.0.5:8080';
const ENTRY = {
  name: 'orders-api',
  clientId: '0oa1example',
  tokenUrl: 'https://login.example.com/oauth2/v1/token',
  method: 'client_secret_basic',
  secretId: 'prod/orders-api/client-secret',
  callers: ['arn:aws:iam::123456789012:role/orders-*'],
};

const load = (value: unknown, allowlist = ALLOWLIST) =>
  loadConfig({ TOKEN_URL_ALLOWLIST: allowlist, STORED_CREDENTIALS: typeof value === 'string' ? value : JSON.stringify(value) });
const entry = (overrides: Record<string, unknown>) => ({ ...ENTRY, ...overrides });
const without = (field: string) => Object.fromEntries(Object.entries(ENTRY).filter(([name]) => name !== field));
const refusal = (label: string, why: string) => `Environment variable STORED_CREDENTIALS: the entry ${label} ${why}`;

describe('STORED_CREDENTIALS', () => {
  it.each([undefined, '', '  '])('holds no credential when it is %p', (value) => {
    expect(loadConfig({ STORED_CREDENTIALS: value }).storedCredentials).toEqual([]);
  });

  it('reads an entry of each method, with its restrictions and its callers compiled', () => {
    // Act
    const [secret, keyed] = load([
      entry({ scopes: ['orders.read', 'orders.write'], audience: 'https://orders.example.com', resource: 'https://orders.example.com/' }),
      {
        ...without('secretId'),
        name: 'billing',
        issuer: 'https://tenant.okta.com',
        tokenUrl: undefined,
        method: 'private_key_jwt',
        keyId: 'alias/billing',
      },
    ]).storedCredentials;

    // Assess
    expect(secret).toMatchObject({
      name: 'orders-api',
      clientId: '0oa1example',
      idp: { tokenUrl: 'https://login.example.com/oauth2/v1/token' },
      authentication: { method: 'client_secret_basic', secretId: 'prod/orders-api/client-secret' },
      scopes: ['orders.read', 'orders.write'],
      audience: 'https://orders.example.com',
      resource: 'https://orders.example.com/',
    });
    expect(secret?.callers.map((caller) => caller.text)).toEqual(['arn:aws:iam::123456789012:role/orders-*']);
    expect(keyed).toMatchObject({
      name: 'billing',
      idp: { issuer: 'https://tenant.okta.com' },
      authentication: { method: 'private_key_jwt', keyId: 'alias/billing' },
    });
    expect(Object.keys(keyed as object)).not.toContain('scopes');
  });

  it.each(['{"name":"x"}', 'not json', '[', '"[]"', 'null'])('fails the start for %p, which is no JSON array', (value) => {
    expect(() => load(value)).toThrow('Environment variable STORED_CREDENTIALS must be a JSON array of credential entries');
  });

  it.each<[string, unknown, string]>([
    ['a string entry', 'orders-api', refusal('at index 0', 'must be an object')],
    ['an array entry', [ENTRY], refusal('at index 0', 'must be an object')],
    ['no name', without('name'), refusal('at index 0', 'must have a name')],
    [
      'a name that is not a string',
      entry({ name: 7 }),
      refusal('at index 0', 'must have name of 1 to 64 letters, digits, . _ or -, starting with a letter or digit'),
    ],
    [
      'a name with a space',
      entry({ name: 'orders api' }),
      refusal('"orders api"', 'must have name of 1 to 64 letters, digits, . _ or -, starting with a letter or digit'),
    ],
    ['a misspelt field', entry({ scope: ['read'] }), refusal('"orders-api"', 'has fields no entry has: scope')],
    ['no client id', without('clientId'), refusal('"orders-api"', 'must have a clientId of 1 to 256 printable ASCII characters')],
    [
      'a client id too long',
      entry({ clientId: 'c'.repeat(257) }),
      refusal('"orders-api"', 'must have a clientId of 1 to 256 printable ASCII characters'),
    ],
    ['a client id with a line break', entry({ clientId: 'a\nb' }), refusal('"orders-api"', 'must have clientId of printable ASCII')],
    ['neither token URL nor issuer', without('tokenUrl'), refusal('"orders-api"', 'must have exactly one of tokenUrl and issuer')],
    [
      'both token URL and issuer',
      entry({ issuer: 'https://login.example.com' }),
      refusal('"orders-api"', 'must have exactly one of tokenUrl and issuer'),
    ],
    [
      'a token URL that is not a string',
      entry({ tokenUrl: ['https://login.example.com/t'] }),
      refusal('"orders-api"', 'must have tokenUrl as a string'),
    ],
    [
      'a token URL outside the allowlist',
      entry({ tokenUrl: 'https://evil.example/token' }),
      refusal('"orders-api"', 'has a tokenUrl the token URL policy refuses: it is not in the allowlist'),
    ],
    [
      'a token URL with user-info',
      entry({ tokenUrl: 'https://u@login.example.com/t' }),
      refusal('"orders-api"', 'has a tokenUrl the token URL policy refuses: it must not contain user-info'),
    ],
    [
      'an issuer outside the allowlist',
      entry({ tokenUrl: undefined, issuer: 'https://evil.example' }),
      refusal('"orders-api"', 'has an issuer the token URL policy refuses: it is not in the allowlist'),
    ],
    [
      'an issuer with a query',
      entry({ tokenUrl: undefined, issuer: 'https://login.example.com/?tenant=a' }),
      refusal('"orders-api"', 'has an issuer with a query (RFC 8414 2 gives an issuer none)'),
    ],
    [
      'an unknown method',
      entry({ method: 'client_secret_jwt' }),
      refusal('"orders-api"', 'must have a method: one of client_secret_basic, client_secret_post, private_key_jwt'),
    ],
    [
      'a secret method without a secret',
      without('secretId'),
      refusal('"orders-api"', 'must have a secretId and no keyId with client_secret_basic'),
    ],
    [
      'a secret method with a key too',
      entry({ method: 'client_secret_post', keyId: 'alias/k' }),
      refusal('"orders-api"', 'must have a secretId and no keyId with client_secret_post'),
    ],
    [
      'private_key_jwt without a key',
      entry({ method: 'private_key_jwt' }),
      refusal('"orders-api"', 'must have a keyId and no secretId with private_key_jwt'),
    ],
    [
      'private_key_jwt with a secret too',
      entry({ method: 'private_key_jwt', keyId: 'alias/k' }),
      refusal('"orders-api"', 'must have a keyId and no secretId with private_key_jwt'),
    ],
    [
      'a secret id with a space',
      entry({ secretId: 'prod orders' }),
      refusal('"orders-api"', 'must have secretId as a Secrets Manager secret ARN or name'),
    ],
    [
      'a key id that is not a string',
      { ...without('secretId'), method: 'private_key_jwt', keyId: 42 },
      refusal('"orders-api"', 'must have keyId as a KMS key id, ARN or alias'),
    ],
    [
      'empty scopes',
      entry({ scopes: [] }),
      refusal('"orders-api"', 'must have scopes as a non-empty array of scope tokens (RFC 6749 3.3)'),
    ],
    [
      'scopes as a string',
      entry({ scopes: 'read' }),
      refusal('"orders-api"', 'must have scopes as a non-empty array of scope tokens (RFC 6749 3.3)'),
    ],
    [
      'a scope with a space',
      entry({ scopes: ['read write'] }),
      refusal('"orders-api"', 'must have scopes as a non-empty array of scope tokens (RFC 6749 3.3)'),
    ],
    [
      'an audience too long',
      entry({ audience: 'a'.repeat(2049) }),
      refusal('"orders-api"', 'must have an audience of at most 2048 characters'),
    ],
    [
      'a resource with a fragment',
      entry({ resource: 'https://api.example.com/#x' }),
      refusal('"orders-api"', 'must have resource as an absolute URI without a fragment (RFC 8707 2)'),
    ],
    ['no callers', without('callers'), refusal('"orders-api"', 'must have callers: a non-empty array of IAM principal ARN patterns')],
    [
      'empty callers',
      entry({ callers: [] }),
      refusal('"orders-api"', 'must have callers: a non-empty array of IAM principal ARN patterns'),
    ],
    [
      'a caller that is not a string',
      entry({ callers: [1] }),
      refusal('"orders-api"', 'must have callers: a non-empty array of IAM principal ARN patterns'),
    ],
    [
      'a caller that is no ARN',
      entry({ callers: ['*'] }),
      refusal('"orders-api"', 'must have callers as IAM principal ARN patterns (arn:...), got "*"'),
    ],
    [
      'a caller naming a role session',
      entry({ callers: ['arn:aws:sts::123456789012:assumed-role/orders/*'] }),
      refusal(
        '"orders-api"',
        'has the caller "arn:aws:sts::123456789012:assumed-role/orders/*", a role session: sessions are matched as their role, so name the role (arn:aws:iam::ACCOUNT:role/NAME)',
      ),
    ],
    [
      'a caller naming a role with a path',
      entry({ callers: ['arn:aws:iam::123456789012:role/service/orders'] }),
      refusal(
        '"orders-api"',
        'has the caller "arn:aws:iam::123456789012:role/service/orders", a role with a path: a role session names its role without the path, so leave it out',
      ),
    ],
  ])('fails the start for an entry with %s, naming it', (_case, value, message) => {
    expect(() => load([value])).toThrow(message);
  });

  it('accepts each field at its longest, and a name of 64 characters', () => {
    // Act
    const [credential] = load([
      entry({
        name: `o${'r'.repeat(63)}`,
        clientId: 'c'.repeat(256),
        audience: 'a'.repeat(2048),
        secretId: 's'.repeat(2048),
        callers: [`arn:${'a'.repeat(2044)}`],
      }),
    ]).storedCredentials;

    // Assess
    expect(credential?.name).toHaveLength(64);
    expect(credential?.callers[0]?.matches(`arn:${'a'.repeat(2044)}`)).toBe(true);
  });

  it.each<[string, unknown, string]>([
    ['a name of 65 characters', entry({ name: `o${'r'.repeat(64)}` }), 'must have name of 1 to 64 letters'],
    ['an empty client id', entry({ clientId: '' }), 'must have clientId of printable ASCII'],
    ['an empty secret id', entry({ secretId: '' }), 'must have secretId as a Secrets Manager secret ARN or name'],
    ['a secret id of 2049 characters', entry({ secretId: 's'.repeat(2049) }), 'must have secretId as a Secrets Manager secret ARN or name'],
    ['a scope that is a number', entry({ scopes: [1] }), 'must have scopes as a non-empty array of scope tokens'],
    [
      'a caller pattern of 2049 characters',
      entry({ callers: [`arn:${'a'.repeat(2045)}`] }),
      'must have callers as IAM principal ARN patterns',
    ],
  ])('fails the start for an entry with %s, one past a bound', (_case, value, message) => {
    expect(() => load([value])).toThrow(message);
  });

  it.each<[string, unknown, string]>([
    ['two misspelt fields', entry({ scope: ['read'], caller: 'x' }), refusal('"orders-api"', 'has fields no entry has: scope, caller')],
    ['an audience with a line break', entry({ audience: 'a\nb' }), refusal('"orders-api"', 'must have audience of printable ASCII')],
    [
      'a scope list with one bad scope among good ones',
      entry({ scopes: ['read', 'read write'] }),
      refusal('"orders-api"', 'must have scopes as a non-empty array of scope tokens (RFC 6749 3.3)'),
    ],
    [
      'a caller list with one number among patterns',
      entry({ callers: ['arn:aws:iam::123456789012:role/orders', 1] }),
      refusal('"orders-api"', 'must have callers: a non-empty array of IAM principal ARN patterns'),
    ],
  ])('fails the start for an entry with %s, saying exactly why', (_case, value, message) => {
    expect(() => load([value])).toThrow(message);
  });

  it('holds no audience or resource where the entry sets none', () => {
    // Act
    const [credential] = load([ENTRY]).storedCredentials;

    // Assess
    expect(Object.keys(credential as object)).not.toContain('audience');
    expect(Object.keys(credential as object)).not.toContain('resource');
  });

  it('accepts a token URL with a query: only an issuer may have none', () => {
    // Act
    const [credential] = load([entry({ tokenUrl: 'https://login.example.com/oauth2/v1/token?tenant=a' })]).storedCredentials;

    // Assess
    expect(credential?.idp).toEqual({ tokenUrl: 'https://login.example.com/oauth2/v1/token?tenant=a' });
  });

  it('fails the start for two entries of one name', () => {
    expect(() => load([ENTRY, entry({ clientId: 'other' })])).toThrow(refusal('"orders-api"', 'has a name another entry has'));
  });

  it('holds a token URL to the policy without an allowlist too: https only, no loopback', () => {
    expect(() => load([entry({ tokenUrl: 'http://login.example.com/t' })], '')).toThrow(
      'has a tokenUrl the token URL policy refuses: it must use https',
    );
    expect(() => load([entry({ tokenUrl: 'https://127.0.0.1/t' })], '')).toThrow(
      'has a tokenUrl the token URL policy refuses: it points to an address that is not allowed',
    );
  });

  it('accepts a token URL on a private address its allowlist entry names literally', () => {
    expect(load([entry({ tokenUrl: 'http://10.0.0.5:8080/realms/x/token' })]).storedCredentials).toHaveLength(1);
  });

  it('fails the module load of the deployed handler, naming the variable', () => {
    // Prepare
    const saved = process.env.STORED_CREDENTIALS;
    process.env.STORED_CREDENTIALS = '{}';

    // Act & Assess
    try {
      expect(() => jest.isolateModules(() => require('../../lambda/handler'))).toThrow('Environment variable STORED_CREDENTIALS');
    } finally {
      if (saved === undefined) delete process.env.STORED_CREDENTIALS;
      else process.env.STORED_CREDENTIALS = saved;
    }
  });
});

describe('STORED_CREDENTIALS_FILE', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'stored-credentials-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** A file of `content` (entries as JSON, or bytes as given), and its path. */
  const file = (content: unknown, name = `${randomBytes(4).toString('hex')}.json`): string => {
    const path = join(dir, name);
    writeFileSync(path, content instanceof Uint8Array || typeof content === 'string' ? content : JSON.stringify(content));
    return path;
  };
  const loadFile = (path: string, env: Record<string, string> = {}) =>
    loadConfig({ TOKEN_URL_ALLOWLIST: ALLOWLIST, STORED_CREDENTIALS_FILE: path, ...env });
  const fileRefusal = (path: string, why: string) => `Environment variable STORED_CREDENTIALS_FILE (the file ${path}) ${why}`;

  it('reads the entries of the file it names, as STORED_CREDENTIALS would hold them', () => {
    // Prepare
    const path = file([ENTRY, entry({ name: 'keyless', method: 'private_key_jwt', secretId: undefined, keyId: 'alias/keyless' })]);

    // Act
    const { storedCredentials } = loadFile(path);

    // Assess
    expect(storedCredentials.map(({ name, authentication }) => [name, authentication])).toEqual([
      ['orders-api', { method: 'client_secret_basic', secretId: 'prod/orders-api/client-secret' }],
      ['keyless', { method: 'private_key_jwt', keyId: 'alias/keyless' }],
    ]);
    const fromVariable = load([ENTRY, entry({ name: 'keyless', method: 'private_key_jwt', secretId: undefined, keyId: 'alias/keyless' })]);
    expect(JSON.stringify(storedCredentials)).toBe(JSON.stringify(fromVariable.storedCredentials));
  });

  it('reads a file that starts with a UTF-8 byte order mark, and one named with spaces around it', () => {
    const path = file(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify([ENTRY]))]));

    expect(loadFile(` ${path} `).storedCredentials).toHaveLength(1);
  });

  it('reads the file through the reader given, as synth reads the one the stack packages', () => {
    const read = (path: string) => Buffer.from(path === '/var/task/credentials.json' ? JSON.stringify([ENTRY]) : '');

    expect(
      loadConfig({ TOKEN_URL_ALLOWLIST: ALLOWLIST, STORED_CREDENTIALS_FILE: '/var/task/credentials.json' }, read).storedCredentials,
    ).toHaveLength(1);
  });

  it.each<[string, () => string, string]>([
    ['that does not exist', () => join(dir, 'missing.json'), 'cannot be read: there is no such file'],
    ['that is a directory', () => dir, 'cannot be read: EISDIR'],
    ['that is not UTF-8', () => file(Buffer.from([0x5b, 0xff, 0x5d])), 'must be UTF-8 text'],
    ['that is empty', () => file(''), 'must be a JSON array of credential entries, and is empty'],
    ['that is not JSON', () => file('[{"name":'), 'must be a JSON array of credential entries'],
    ['that holds an object', () => file({ credentials: [ENTRY] }), 'must be a JSON array of credential entries'],
  ])('fails the start for a file %s, naming the variable and the file', (_case, path, why) => {
    const named = path();
    expect(() => loadFile(named)).toThrow(fileRefusal(named, why));
  });

  it('fails the start for a bad entry, naming the variable, the file and the entry', () => {
    const path = file([entry({ callers: [] })]);

    expect(() => loadFile(path)).toThrow(`${fileRefusal(path, '').trimEnd()}: the entry "orders-api" must have callers`);
  });

  it('fails the start when STORED_CREDENTIALS is set too, naming both', () => {
    const path = file([ENTRY]);

    expect(() => loadFile(path, { STORED_CREDENTIALS: JSON.stringify([ENTRY]) })).toThrow(
      'Environment variables STORED_CREDENTIALS and STORED_CREDENTIALS_FILE must not both be set: set one',
    );
  });

  it.each(['', '  '])('is no file when it is %p: STORED_CREDENTIALS stands', (path) => {
    expect(loadFile(path, { STORED_CREDENTIALS: JSON.stringify([ENTRY]) }).storedCredentials).toHaveLength(1);
  });

  it('fails the module load of the deployed handler, naming the variable and the file', () => {
    // Prepare
    const path = join(dir, 'gone.json');
    process.env.STORED_CREDENTIALS_FILE = path;

    // Act & Assess
    try {
      expect(() => jest.isolateModules(() => require('../../lambda/handler'))).toThrow(fileRefusal(path, 'cannot be read'));
    } finally {
      delete process.env.STORED_CREDENTIALS_FILE;
    }
  });
});
