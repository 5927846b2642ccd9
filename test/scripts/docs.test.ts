import test from 'ava';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '../../..');

/** README.md and every page under docs/: what an operator reads, so it must not point outside the repository. */
const DOCS = [
  'README.md',
  ...readdirSync(path.join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** Markdown without fenced blocks and code spans, where `[x](y)` is code rather than a link. */
const prose = (md: string) => md.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');

/** GitHub's heading anchors: lowercased, punctuation dropped, spaces as hyphens. */
function anchors(md: string): Set<string> {
  const out = new Set<string>();
  for (const m of md.replace(/^```[\s\S]*?^```/gm, '').matchAll(/^#{1,6}\s+(.+?)\s*$/gm)) {
    out.add(
      m[1]
        .toLowerCase()
        .replace(/[^\p{L}\p{N}\s_-]/gu, '')
        .replace(/\s/g, '-'),
    );
  }
  return out;
}

test('every relative link in README.md and docs/*.md resolves to a file (and heading) inside the repository', (t) => {
  const broken: string[] = [];
  let checked = 0;
  for (const doc of DOCS) {
    const md = readFileSync(path.join(ROOT, doc), 'utf8');
    for (const m of prose(md).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = m[1];
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:
      checked++;
      const [file, anchor] = target.split('#');
      const resolved = file
        ? path.resolve(path.dirname(path.join(ROOT, doc)), decodeURIComponent(file))
        : path.join(ROOT, doc);
      if (!resolved.startsWith(ROOT + path.sep)) broken.push(`${doc}: ${target} points outside the repository`);
      else if (!existsSync(resolved)) broken.push(`${doc}: ${target} does not exist`);
      else if (
        anchor &&
        statSync(resolved).isFile() &&
        resolved.endsWith('.md') &&
        !anchors(readFileSync(resolved, 'utf8')).has(anchor)
      ) {
        broken.push(`${doc}: ${target} names no heading of ${path.relative(ROOT, resolved)}`);
      }
    }
  }
  t.deepEqual(broken, []);
  t.true(checked >= 5, `only ${checked} relative links found`);
});

test('the README names no document outside the repository', (t) => {
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  t.false(/\.\.\/shared\//.test(readme));
  t.true(DOCS.includes('docs/architecture.md') && DOCS.includes('docs/websocket.md'));
});
