// `npm run sim:mutate`: how much of the cache's protocol the simulator alone can tell apart. A seeded
// sample of Stryker-style mutants of the pure core and the memory tier, each judged by a bounded search
// of the simulator in a scratch copy of the repository (docs/TESTING.md). No jest test takes part.
import { type ChildProcess, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { prng } from './world';

const HELP = `npm run sim:mutate [-- options]: a seeded sample of mutants of lambda/cache/core/, each judged by
a bounded search of the simulator alone (no jest test). A mutant is killed when the search finds a
violation, crashes, or outlasts the time cap; mutants that do not type-check are dropped, as Stryker does.
With no options: the run docs/TESTING.md quotes.

  --sample N        mutants in the sample (default 200), spread over the files by their mutation points
  --seed S          the sample's seed (default 35)
  --seeds N         seeds of the short search (default 60), after the hard cases of sim/corpus.ts
  --requests M      requests per seed of the short search (default 120)
  --from S          the short search's first seed (default 1)
  --long K          seeds of 600 requests after it, from seed 1 (default 2)
  --cap S           seconds a mutant may take at most (default: four times the unmutated search, at least 60)
  --concurrency C   searches at once (default 2; 1 on a busy machine)
  --only I,J        run only these mutants of the sample (their numbers as reported)
  --list            print the mutation points per file and the sample, and run nothing
  --out FILE        the report (default reports/sim-mutation.json)
`;

/** The files under measurement: the pure protocol and the memory tier. */
const FILES = ['visit', 'claims', 'item', 'lifetime', 'outcome', 'rules', 'settings', 'memory-tier'].map(
  (name) => `lambda/cache/core/${name}.ts`,
);

const argv = process.argv.slice(2);
const flag = (name: string): boolean => argv.includes(`--${name}`);
const option = (name: string): string | undefined => {
  const index = argv.indexOf(`--${name}`);
  return index < 0 ? undefined : argv[index + 1];
};
const count = (name: string, fallback: number): number => {
  const value = Number(option(name));
  return option(name) !== undefined && Number.isSafeInteger(value) && value >= 0 ? value : fallback;
};

/** One mutant: a span of one file replaced, and what a reader sees of it. */
export interface Mutant {
  readonly file: string;
  readonly line: number;
  readonly operator: string;
  readonly start: number;
  readonly end: number;
  readonly replacement: string;
  readonly original: string;
  readonly mutated: string;
}

type Status = 'killed' | 'survived' | 'timeout' | 'crashed';

interface Judged extends Mutant {
  readonly number: number;
  readonly status: Status;
  readonly seconds: number;
  /** The violation found (or the crash's last words). */
  readonly detail: string;
}

// ----- Mutation points -----------------------------------------------------------------------------

const SWAPS: Partial<Record<ts.SyntaxKind, readonly string[]>> = {
  [ts.SyntaxKind.LessThanToken]: ['<=', '>='],
  [ts.SyntaxKind.LessThanEqualsToken]: ['<', '>'],
  [ts.SyntaxKind.GreaterThanToken]: ['>=', '<='],
  [ts.SyntaxKind.GreaterThanEqualsToken]: ['>', '<'],
  [ts.SyntaxKind.EqualsEqualsEqualsToken]: ['!=='],
  [ts.SyntaxKind.ExclamationEqualsEqualsToken]: ['==='],
  [ts.SyntaxKind.EqualsEqualsToken]: ['!='],
  [ts.SyntaxKind.ExclamationEqualsToken]: ['=='],
  [ts.SyntaxKind.AmpersandAmpersandToken]: ['||'],
  [ts.SyntaxKind.BarBarToken]: ['&&'],
  [ts.SyntaxKind.QuestionQuestionToken]: ['&&'],
  [ts.SyntaxKind.PlusToken]: ['-'],
  [ts.SyntaxKind.MinusToken]: ['+'],
  [ts.SyntaxKind.AsteriskToken]: ['/'],
  [ts.SyntaxKind.SlashToken]: ['*'],
  [ts.SyntaxKind.PercentToken]: ['*'],
  [ts.SyntaxKind.PlusEqualsToken]: ['-='],
  [ts.SyntaxKind.MinusEqualsToken]: ['+='],
  [ts.SyntaxKind.AmpersandAmpersandEqualsToken]: ['||='],
  [ts.SyntaxKind.BarBarEqualsToken]: ['&&='],
  [ts.SyntaxKind.QuestionQuestionEqualsToken]: ['&&='],
};

const OPERATOR_NAMES: Partial<Record<ts.SyntaxKind, string>> = {
  [ts.SyntaxKind.AmpersandAmpersandToken]: 'logical',
  [ts.SyntaxKind.BarBarToken]: 'logical',
  [ts.SyntaxKind.QuestionQuestionToken]: 'logical',
  [ts.SyntaxKind.PlusToken]: 'arithmetic',
  [ts.SyntaxKind.MinusToken]: 'arithmetic',
  [ts.SyntaxKind.AsteriskToken]: 'arithmetic',
  [ts.SyntaxKind.SlashToken]: 'arithmetic',
  [ts.SyntaxKind.PercentToken]: 'arithmetic',
};

const ASSIGNMENTS = new Set([
  ts.SyntaxKind.PlusEqualsToken,
  ts.SyntaxKind.MinusEqualsToken,
  ts.SyntaxKind.AmpersandAmpersandEqualsToken,
  ts.SyntaxKind.BarBarEqualsToken,
  ts.SyntaxKind.QuestionQuestionEqualsToken,
]);

/** Binary operators whose result is a boolean: the expression itself may be forced true or false. */
const BOOLEAN_OPERATORS = new Set([
  ts.SyntaxKind.LessThanToken,
  ts.SyntaxKind.LessThanEqualsToken,
  ts.SyntaxKind.GreaterThanToken,
  ts.SyntaxKind.GreaterThanEqualsToken,
  ts.SyntaxKind.EqualsEqualsEqualsToken,
  ts.SyntaxKind.ExclamationEqualsEqualsToken,
  ts.SyntaxKind.EqualsEqualsToken,
  ts.SyntaxKind.ExclamationEqualsToken,
  ts.SyntaxKind.AmpersandAmpersandToken,
  ts.SyntaxKind.BarBarToken,
]);

const METHOD_SWAPS: Record<string, string> = {
  min: 'max',
  max: 'min',
  some: 'every',
  every: 'some',
  startsWith: 'endsWith',
  endsWith: 'startsWith',
};

/** Every mutation point of one file, in source order (the same order on every run of the same text). */
export function mutationPoints(file: string, text: string): Mutant[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true);
  const points: Mutant[] = [];
  const add = (operator: string, node: ts.Node, start: number, end: number, replacement: string) => {
    const from = node.getStart(source);
    const shown = (value: string) => oneLine(value);
    points.push({
      file,
      line: source.getLineAndCharacterOfPosition(start).line + 1,
      operator,
      start,
      end,
      replacement,
      original: shown(text.slice(from, node.end)),
      mutated: shown(text.slice(from, start) + replacement + text.slice(end, node.end)),
    });
  };
  const whole = (operator: string, node: ts.Node, replacement: string) => add(operator, node, node.getStart(source), node.end, replacement);
  const isTest = (node: ts.Node): boolean => {
    const parent = node.parent;
    return (
      (ts.isIfStatement(parent) && parent.expression === node) ||
      (ts.isConditionalExpression(parent) && parent.condition === node) ||
      ((ts.isWhileStatement(parent) || ts.isDoStatement(parent)) && parent.expression === node) ||
      (ts.isForStatement(parent) && parent.condition === node)
    );
  };

  const visit = (node: ts.Node): void => {
    // Types, imports and declarations of shape carry no behaviour.
    if (
      ts.isTypeNode(node) ||
      ts.isImportDeclaration(node) ||
      ts.isExportDeclaration(node) ||
      ts.isInterfaceDeclaration(node) ||
      ts.isTypeAliasDeclaration(node)
    ) {
      return;
    }
    if (isTest(node) && node.kind !== ts.SyntaxKind.TrueKeyword && node.kind !== ts.SyntaxKind.FalseKeyword) {
      const loop = !ts.isIfStatement(node.parent) && !ts.isConditionalExpression(node.parent);
      if (!loop) whole('conditional', node, 'true');
      whole('conditional', node, 'false');
    } else if (ts.isBinaryExpression(node) && BOOLEAN_OPERATORS.has(node.operatorToken.kind)) {
      whole('conditional', node, 'true');
      whole('conditional', node, 'false');
    }
    if (ts.isBinaryExpression(node)) {
      const token = node.operatorToken;
      for (const swap of SWAPS[token.kind] ?? []) {
        add(
          OPERATOR_NAMES[token.kind] ?? (ASSIGNMENTS.has(token.kind) ? 'assignment' : 'equality'),
          node,
          token.getStart(source),
          token.end,
          swap,
        );
      }
    }
    if (ts.isPrefixUnaryExpression(node)) {
      const operand = node.operand.getText(source);
      if (node.operator === ts.SyntaxKind.ExclamationToken) whole('unary !', node, operand);
      if (node.operator === ts.SyntaxKind.MinusToken) whole('unary', node, `+${operand}`);
      if (node.operator === ts.SyntaxKind.PlusPlusToken) whole('update', node, `--${operand}`);
      if (node.operator === ts.SyntaxKind.MinusMinusToken) whole('update', node, `++${operand}`);
    }
    if (ts.isPostfixUnaryExpression(node)) {
      const operand = node.operand.getText(source);
      whole('update', node, node.operator === ts.SyntaxKind.PlusPlusToken ? `${operand}--` : `${operand}++`);
    }
    if (node.kind === ts.SyntaxKind.TrueKeyword) whole('boolean', node, 'false');
    if (node.kind === ts.SyntaxKind.FalseKeyword) whole('boolean', node, 'true');
    if (ts.isBlock(node) && node.statements.length > 0) whole('block', node, '{}');
    if (ts.isArrayLiteralExpression(node) && node.elements.length > 0) whole('array', node, '[]');
    if ((ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node) || ts.isTemplateExpression(node)) && stringMutable(node)) {
      whole('string', node, node.getText(source).length > 2 ? "''" : "'Stryker was here!'");
    }
    if ((ts.isPropertyAccessExpression(node) || ts.isElementAccessExpression(node) || ts.isCallExpression(node)) && node.questionDotToken) {
      const token = node.questionDotToken;
      add('optional chaining', node, token.getStart(source), token.end, ts.isPropertyAccessExpression(node) ? '.' : '');
    }
    if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression)) {
      const { name, expression } = node.expression;
      const swap = METHOD_SWAPS[name.text];
      const onMath = ts.isIdentifier(expression) && expression.text === 'Math';
      if (swap && onMath === (name.text === 'min' || name.text === 'max')) add('method', node, name.getStart(source), name.end, swap);
      if ((name.text === 'filter' || name.text === 'slice') && !onMath) whole('method', node, expression.getText(source));
    }
    ts.forEachChild(node, visit);
  };
  ts.forEachChild(source, visit);
  return points;
}

/** A string that is a value (not a key, a module name or a type). */
function stringMutable(node: ts.Node): boolean {
  const parent = node.parent;
  if (ts.isTemplateSpan(parent) || ts.isTemplateExpression(parent)) return false;
  if ((ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent) || ts.isMethodDeclaration(parent)) && parent.name === node)
    return false;
  if (ts.isExpressionStatement(parent)) return false; // a directive
  return !ts.isLiteralTypeNode(parent) && !ts.isExternalModuleReference(parent);
}

function oneLine(text: string, max = 90): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

export function applied(text: string, mutant: Mutant): string {
  return text.slice(0, mutant.start) + mutant.replacement + text.slice(mutant.end);
}

// ----- The type check ------------------------------------------------------------------------------

/**
 * Whether mutants type-check: one program over lambda/ and sim/ made once, then per mutant a program
 * that reuses every unchanged file, checked in the mutated file and the files that import it. Lint-like
 * options are off, as in Stryker's checker.
 */
class TypeChecker {
  private readonly options: ts.CompilerOptions;
  private readonly host: ts.CompilerHost;
  private readonly roots: string[];
  private readonly cache = new Map<string, ts.SourceFile>();
  private override: { file: string; text: string } | undefined;
  private readonly base: ts.Program;

  constructor(private readonly root: string) {
    const config = ts.readConfigFile(join(root, 'tsconfig.json'), ts.sys.readFile);
    const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, root);
    this.options = { ...parsed.options, noUnusedLocals: false, noUnusedParameters: false, allowUnreachableCode: true, noEmit: true };
    this.roots = parsed.fileNames.filter((name) => /\/(lambda|sim)\//.test(name));
    this.host = ts.createCompilerHost(this.options);
    const read = this.host.getSourceFile.bind(this.host);
    this.host.getSourceFile = (fileName, language, onError) => {
      const path = resolve(fileName);
      if (this.override?.file === path) return ts.createSourceFile(fileName, this.override.text, language, true);
      const cached = this.cache.get(path) ?? read(fileName, language, onError);
      if (cached) this.cache.set(path, cached);
      return cached;
    };
    this.base = ts.createProgram({ rootNames: this.roots, options: this.options, host: this.host });
  }

  /** The files of lambda/ and sim/ that import `file`. */
  importers(file: string): string[] {
    const target = resolve(this.root, file).replace(/\.ts$/, '');
    return this.base
      .getSourceFiles()
      .filter((source) => this.roots.includes(source.fileName))
      .filter((source) =>
        source.statements.some(
          (statement) =>
            (ts.isImportDeclaration(statement) || ts.isExportDeclaration(statement)) &&
            statement.moduleSpecifier &&
            ts.isStringLiteral(statement.moduleSpecifier) &&
            statement.moduleSpecifier.text.startsWith('.') &&
            resolve(dirname(source.fileName), statement.moduleSpecifier.text) === target,
        ),
      )
      .map((source) => source.fileName);
  }

  /** The first error the mutated text causes, or undefined when it type-checks. */
  check(file: string, text: string, importers: readonly string[]): string | undefined {
    const path = resolve(this.root, file);
    this.override = { file: path, text };
    try {
      const program = ts.createProgram({ rootNames: this.roots, options: this.options, host: this.host, oldProgram: this.base });
      for (const name of [path, ...importers]) {
        const source = program.getSourceFile(name);
        const [error] = source ? program.getSemanticDiagnostics(source) : [];
        if (error) return ts.flattenDiagnosticMessageText(error.messageText, ' ');
      }
      return undefined;
    } finally {
      this.override = undefined;
    }
  }
}

// ----- The sample --------------------------------------------------------------------------------------

/** Shuffle in place with the seeded generator (Fisher-Yates). */
function shuffle<T>(items: T[], random: () => number): T[] {
  for (let index = items.length - 1; index > 0; index--) {
    const other = Math.floor(random() * (index + 1));
    [items[index], items[other]] = [items[other] as T, items[index] as T];
  }
  return items;
}

/** Each file's share of `size`, in proportion to its points (largest remainders first). */
function quotas(points: readonly number[], size: number): number[] {
  const total = points.reduce((sum, value) => sum + value, 0);
  const exact = points.map((value) => (size * value) / total);
  const shares = exact.map(Math.floor);
  const order = exact.map((value, index) => [value - Math.floor(value), index] as const).sort((a, b) => b[0] - a[0] || a[1] - b[1]);
  for (let given = shares.reduce((sum, value) => sum + value, 0), next = 0; given < size; given++, next++) {
    const index = (order[next % order.length] as readonly [number, number])[1];
    shares[index] = (shares[index] as number) + 1;
  }
  return shares;
}

/**
 * The sample: per file, its points shuffled by the seed and taken in that order, those that do not
 * type-check dropped, until the file's share is met.
 */
function draw(
  root: string,
  size: number,
  seed: number,
): { sample: Mutant[]; points: Map<string, number>; dropped: { mutant: Mutant; error: string }[] } {
  const random = prng(seed);
  const all = FILES.map((file) => mutationPoints(file, readFileSync(join(root, file), 'utf8')));
  const shares = quotas(
    all.map((points) => points.length),
    size,
  );
  const checker = new TypeChecker(root);
  const sample: Mutant[] = [];
  const dropped: { mutant: Mutant; error: string }[] = [];
  for (const [index, file] of FILES.entries()) {
    const text = readFileSync(join(root, file), 'utf8');
    const importers = checker.importers(file);
    const order = shuffle([...(all[index] as Mutant[])], random);
    let taken = 0;
    for (const mutant of order) {
      if (taken >= (shares[index] as number)) break;
      const error = checker.check(file, applied(text, mutant), importers);
      if (error) dropped.push({ mutant, error });
      else {
        sample.push(mutant);
        taken++;
      }
    }
  }
  return { sample, points: new Map(FILES.map((file, index) => [file, (all[index] as Mutant[]).length])), dropped };
}

// ----- The search --------------------------------------------------------------------------------------

interface Search {
  readonly from: number;
  readonly seeds: number;
  readonly requests: number;
  readonly long: number;
}

const commandsOf = (search: Search): string[][] => [
  ['--corpus'],
  ['--from', String(search.from), '--seeds', String(search.seeds), '--requests', String(search.requests)],
  ...(search.long > 0 ? [['--from', '1', '--seeds', String(search.long), '--requests', '600']] : []),
];

/** A scratch copy of what the simulator runs: lambda/, sim/ and the configuration, node_modules linked. */
function scratch(root: string, slot: number): string {
  // Per run, so that two runs (a rerun of survivors beside a whole run) never share a copy.
  const dir = `/tmp/sim-mutate/${process.pid}/${slot}`;
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  for (const part of ['lambda', 'sim', 'tsconfig.json', 'package.json']) cpSync(join(root, part), join(dir, part), { recursive: true });
  symlinkSync(realpathSync(join(root, 'node_modules')), join(dir, 'node_modules'));
  return dir;
}

const running = new Set<ChildProcess>();

/** One `tsx sim/run.ts` in `dir`, stopped (its whole process group) at `capMs`. */
function runSim(
  dir: string,
  args: readonly string[],
  capMs: number,
): Promise<{ code: number | null; out: string; err: string; timedOut: boolean }> {
  return new Promise((done) => {
    const child = spawn(process.execPath, [join(dir, 'node_modules/tsx/dist/cli.mjs'), 'sim/run.ts', ...args], {
      cwd: dir,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    running.add(child);
    let [out, err, timedOut] = ['', '', false];
    // Only the tail matters: a violation's verdict is printed last, after its trace.
    child.stdout?.on('data', (chunk: Buffer) => (out = (out + chunk.toString()).slice(-20_000)));
    child.stderr?.on('data', (chunk: Buffer) => (err = (err + chunk.toString()).slice(-20_000)));
    const timer = setTimeout(
      () => {
        timedOut = true;
        stop(child);
      },
      Math.max(1, capMs),
    );
    child.on('close', (code) => {
      clearTimeout(timer);
      running.delete(child);
      done({ code, out, err, timedOut });
    });
  });
}

function stop(child: ChildProcess): void {
  try {
    if (child.pid) process.kill(-child.pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

/** Judge the code in `dir` by the search: the first phase that fails decides. */
async function judgeDir(dir: string, search: Search, capMs: number): Promise<{ status: Status; seconds: number; detail: string }> {
  const started = performance.now();
  for (const args of commandsOf(search)) {
    const left = capMs - (performance.now() - started);
    const { code, out, err, timedOut } = await runSim(dir, args, left);
    const seconds = (performance.now() - started) / 1000;
    if (timedOut || left <= 0) return { status: 'timeout', seconds, detail: `over ${(capMs / 1000).toFixed(0)} s` };
    if (code === 0) continue;
    const verdict = out.split('\n').find((line) => /^seed \d+: /.test(line));
    if (code === 1 && verdict && /^replay: /m.test(out)) return { status: 'killed', seconds, detail: oneLine(verdict, 160) };
    const last = err.trim().split('\n').filter(Boolean);
    const words = last.find((line) => /Error|error:/.test(line)) ?? last.at(-1) ?? `exit ${code}`;
    return { status: 'crashed', seconds, detail: oneLine(words, 160) };
  }
  return { status: 'survived', seconds: (performance.now() - started) / 1000, detail: '' };
}

// ----- The run -----------------------------------------------------------------------------------------

async function main(): Promise<void> {
  if (flag('help') || flag('h')) return void console.log(HELP);
  const root = resolve(__dirname, '..');
  const size = count('sample', 200);
  const seed = count('seed', 35);
  const search: Search = { from: count('from', 1), seeds: count('seeds', 60), requests: count('requests', 120), long: count('long', 2) };
  const concurrency = Math.max(1, count('concurrency', 2));
  const out = option('out') ?? 'reports/sim-mutation.json';
  const only = option('only')
    ?.split(',')
    .map(Number)
    .filter((n) => Number.isSafeInteger(n));
  const command = `npm run sim:mutate -- ${argv.filter((arg) => arg !== '--list').join(' ')}`.trim();

  const drawStarted = performance.now();
  const { sample, points, dropped } = draw(root, size, seed);
  const total = [...points.values()].reduce((sum, value) => sum + value, 0);
  console.log(`mutation points: ${[...points].map(([file, n]) => `${file.replace('lambda/cache/core/', '')} ${n}`).join(', ')} (${total})`);
  console.log(
    `sample of ${sample.length} with seed ${seed}: ${dropped.length} drawn mutants dropped as not type-checking (${((performance.now() - drawStarted) / 1000).toFixed(0)} s)`,
  );
  const perFile = FILES.map(
    (file) => `${file.replace('lambda/cache/core/', '')} ${sample.filter((mutant) => mutant.file === file).length}`,
  );
  console.log(`per file: ${perFile.join(', ')}`);
  const numbered = sample.map((mutant, index) => ({ ...mutant, number: index + 1 }));
  if (flag('list')) {
    const byOperator = new Map<string, number>();
    for (const { mutant } of dropped) byOperator.set(mutant.operator, (byOperator.get(mutant.operator) ?? 0) + 1);
    console.log(`dropped by operator: ${[...byOperator].map(([operator, n]) => `${operator} ${n}`).join(', ')}`);
    for (const { mutant, error } of dropped)
      console.log(`  dropped ${mutant.file}:${mutant.line} ${mutant.original} -> ${mutant.mutated}: ${oneLine(error, 100)}`);
    for (const mutant of numbered)
      console.log(
        `${String(mutant.number).padStart(4)} ${mutant.file}:${mutant.line} ${mutant.operator}: ${mutant.original} -> ${mutant.mutated}`,
      );
    return;
  }
  const chosen = only && only.length > 0 ? numbered.filter((mutant) => only.includes(mutant.number)) : numbered;
  const slots = Array.from({ length: Math.min(concurrency, Math.max(1, chosen.length)) }, (_, slot) => scratch(root, slot));
  console.log(
    `search per mutant: ${commandsOf(search)
      .map((args) => `tsx sim/run.ts ${args.join(' ')}`)
      .join(', then ')}`,
  );

  // The unmutated code must pass the same search, in every slot at once (the load the mutants run under).
  const baseline = await Promise.all(slots.map((dir) => judgeDir(dir, search, 30 * 60_000)));
  const broken = baseline.find((result) => result.status !== 'survived');
  if (broken) {
    console.error(`the unmutated code fails this search (${broken.status}: ${broken.detail}): no mutant can be judged by it`);
    process.exitCode = 2;
    return;
  }
  const baselineSeconds = Math.max(...baseline.map((result) => result.seconds));
  const capMs = option('cap') ? count('cap', 60) * 1000 : Math.max(60_000, 4 * baselineSeconds * 1000);
  console.log(`the unmutated code passes it in ${baselineSeconds.toFixed(1)} s; cap per mutant ${(capMs / 1000).toFixed(0)} s`);

  const results: Judged[] = [];
  const started = performance.now();
  let next = 0;
  await Promise.all(
    slots.map(async (dir) => {
      while (next < chosen.length) {
        const mutant = chosen[next++] as Mutant & { number: number };
        const target = join(dir, mutant.file);
        // The scratch copy's own file, as drawn: the tree may change while the run goes on.
        const original = readFileSync(target, 'utf8');
        writeFileSync(target, applied(original, mutant));
        try {
          const verdict = await judgeDir(dir, search, capMs);
          results.push({ ...mutant, ...verdict });
          const done = results.length;
          console.log(
            `[${done}/${chosen.length}] #${mutant.number} ${verdict.status.padEnd(8)} ${verdict.seconds.toFixed(1).padStart(5)} s  ${mutant.file.replace('lambda/cache/core/', '')}:${mutant.line} ${mutant.original} -> ${mutant.mutated}${verdict.detail ? `  (${verdict.detail})` : ''}`,
          );
        } finally {
          writeFileSync(target, original);
        }
      }
    }),
  );
  results.sort((a, b) => a.number - b.number);
  const tally = (status: Status) => results.filter((result) => result.status === status).length;
  const killed = tally('killed') + tally('timeout') + tally('crashed');
  const score = results.length === 0 ? 0 : (100 * killed) / results.length;
  const minutes = (performance.now() - started) / 60_000;
  const survivors = results.filter((result) => result.status === 'survived');
  const summary = {
    command,
    seed,
    sampleSize: sample.length,
    judged: results.length,
    search: commandsOf(search).map((args) => `tsx sim/run.ts ${args.join(' ')}`),
    baselineSeconds,
    capSeconds: capMs / 1000,
    minutes: Number(minutes.toFixed(1)),
    points: Object.fromEntries(points),
    counts: {
      killed: tally('killed'),
      survived: tally('survived'),
      timeout: tally('timeout'),
      crashed: tally('crashed'),
      dropped: dropped.length,
    },
    score: Number(score.toFixed(1)),
    survivors: survivors.map((result) => `${result.file}:${result.line} ${result.operator}: ${result.original} -> ${result.mutated}`),
    mutants: results,
    dropped: dropped.map(({ mutant, error }) => ({
      file: mutant.file,
      line: mutant.line,
      operator: mutant.operator,
      original: mutant.original,
      mutated: mutant.mutated,
      error,
    })),
  };
  mkdirSync(dirname(resolve(root, out)), { recursive: true });
  writeFileSync(resolve(root, out), `${JSON.stringify(summary, null, 1)}\n`);
  console.log(`\n${command}`);
  console.log(
    `${results.length} mutants in ${minutes.toFixed(1)} min: ${killed} killed (${score.toFixed(1)}%): ${tally('killed')} by a violation, ${tally('timeout')} timed out, ${tally('crashed')} crashed; ${tally('survived')} survived; ${dropped.length} dropped (no type-check)`,
  );
  for (const line of summary.survivors) console.log(`  survived: ${line}`);
  console.log(`report: ${relative(root, resolve(root, out))}`);
  if (existsSync(`/tmp/sim-mutate/${process.pid}`)) rmSync(`/tmp/sim-mutate/${process.pid}`, { recursive: true, force: true });
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    for (const child of running) stop(child);
    rmSync(`/tmp/sim-mutate/${process.pid}`, { recursive: true, force: true });
    process.exit(130);
  });
}

void main();
