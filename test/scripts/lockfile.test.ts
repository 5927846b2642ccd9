import test from 'ava';
import { readFileSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '../../..');

interface LockEntry {
  version?: string;
  optional?: boolean;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}

/** Where node (and npm ci) would find `dep` for the package at `from`: its own node_modules, then each parent's. */
function resolveIn(packages: Record<string, LockEntry>, from: string, dep: string): string | undefined {
  let dir = from;
  for (;;) {
    const candidate = `${dir ? `${dir}/` : ''}node_modules/${dep}`;
    if (packages[candidate]) return candidate;
    if (!dir) return undefined;
    const i = dir.lastIndexOf('/node_modules/');
    dir = i < 0 ? '' : dir.slice(0, i);
  }
}

// `npm ci` refuses a lockfile that lacks an optional package of any platform ("Missing: … from lock
// file"), even one this machine would skip. npm drops such a package silently when the registry
// cannot resolve it at lock time, so the lockfile is checked here, without any network.
test('package-lock.json lists every optional dependency of every platform', (t) => {
  const lock = JSON.parse(readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, LockEntry>;
  };
  const missing: string[] = [];
  for (const [where, entry] of Object.entries(lock.packages)) {
    for (const dep of Object.keys(entry.optionalDependencies ?? {})) {
      if (!resolveIn(lock.packages, where, dep)) missing.push(`${dep} (optional dependency of ${where || 'the root'})`);
    }
  }
  t.deepEqual(missing, []);
});
