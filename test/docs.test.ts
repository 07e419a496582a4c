import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

// The README is the front door and docs/ the manual: every relative link in them must lead somewhere.

const ROOT = join(__dirname, '..');
const PAGES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];

/** GitHub's anchor for a heading: lower-cased, punctuation but `-` and `_` dropped, spaces to `-`. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[`*_]/g, (mark) => (mark === '_' ? '_' : ''))
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

function anchorsOf(path: string): Set<string> {
  const text = readFileSync(path, 'utf8').replace(/```[\s\S]*?```/g, '');
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const [, heading] of text.matchAll(/^#{1,6} (.+)$/gm)) {
    const base = slug(heading as string);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}

/** Every `[text](target)` outside code blocks whose target is not an absolute URL or a mail address. */
function relativeLinks(page: string): string[] {
  const text = readFileSync(join(ROOT, page), 'utf8')
    .replace(/```[\s\S]*?```/g, '')
    .replace(/`[^`\n]*`/g, '');
  return [...text.matchAll(/\]\(([^)\s]+)\)/g)].map((match) => match[1] as string).filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target));
}

describe('the README and docs/', () => {
  it.each(PAGES)('%s links only to files and headings that exist', (page) => {
    const broken = relativeLinks(page).filter((target) => {
      const [path, anchor] = target.split('#') as [string, string | undefined];
      const file = path === '' ? join(ROOT, page) : join(ROOT, dirname(page), path);
      if (!existsSync(file)) return true;
      return anchor !== undefined && file.endsWith('.md') && !anchorsOf(file).has(anchor);
    });

    expect(broken).toEqual([]);
  });

  it('keeps the README a front door of at most 15 KB', () => {
    expect(readFileSync(join(ROOT, 'README.md')).length).toBeLessThanOrEqual(15_000);
  });

  it('keeps the README and docs/ together at most 80 KB, a manual to read rather than a notebook', () => {
    const bytes = PAGES.reduce((total, page) => total + readFileSync(join(ROOT, page)).length, 0);

    expect(bytes).toBeLessThanOrEqual(80_000);
  });

  it('says in the README that the npm package `aws-lambda` is not installed, and the lock file holds none', () => {
    const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, unknown> };

    expect(readFileSync(join(ROOT, 'README.md'), 'utf8')).toMatch(/npm package named `aws-lambda`[^.]*it is not installed/);
    expect(Object.keys(lock.packages).filter((path) => path.endsWith('node_modules/aws-lambda'))).toEqual([]);
  });

  it('links every page of docs/ from the README, so none is out of reach', () => {
    const linked = new Set(relativeLinks('README.md').map((target) => target.split('#')[0]));

    expect(PAGES.filter((page) => page !== 'README.md' && !linked.has(page))).toEqual([]);
  });

  it('never links outside the repository by a relative path', () => {
    const outside = PAGES.flatMap((page) =>
      relativeLinks(page)
        .map((target) => relative(ROOT, join(ROOT, dirname(page), target.split('#')[0] as string)))
        .filter((path) => path.startsWith('..')),
    );

    expect(outside).toEqual([]);
  });
});
