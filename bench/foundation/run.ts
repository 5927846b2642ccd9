import autocannon from 'autocannon';
import { spawn, ChildProcess } from 'node:child_process';
import path from 'node:path';
import { createApiKey } from '../../shared/commands/apiKeys';
import { benchCleanup, freshBenchDatabase } from '../benchDatabase';
import { pgCeiling } from './pgCeiling';

/**
 * Foundation benchmark (issue 2): req/s and p99 for a bare node:http server, Koa, the partial
 * middleware stacks, GET /v1 through the full stack (anonymous, rate limiting on) and an
 * authenticated one-row read with an API key. One run; each target in its own process.
 * Usage: npm run bench:foundation   (DURATION=seconds CONNECTIONS=n ROUNDS=n to change the load)
 * The database `<name>_bench` is dropped at the end (KEEP_DB=1 keeps it), the Redis prefix deleted.
 */
const DURATION = Number(process.env.DURATION ?? 8);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 50);
/** Rounds over all targets; the table reports each target's median (a 2-core VM is noisy). */
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const TARGETS = path.resolve(__dirname, 'targets.js');
/** Node flags of the api in production (ecosystem.config.js), given to every target alike. */
// eslint-disable-next-line @typescript-eslint/no-require-imports -- the PM2 file is CommonJS, found at run time
const PM2 = require(path.resolve(__dirname, '..', '..', '..', 'ecosystem.config.js')) as {
  apps: Array<{ name: string; node_args?: string }>;
};
const NODE_ARGS: string[] = (PM2.apps.find((a) => a.name === 'api')?.node_args ?? '').split(/\s+/).filter(Boolean);

async function prepareDatabase(): Promise<{
  env: Record<string, string>;
  apiKey: string;
  databaseUrl: string;
  roleIds: string[];
}> {
  const settings = {
    REDIS_PREFIX: `bench:${Date.now()}:`,
    // Limits far above what the run sends, so every request is counted but none refused.
    RATE_LIMIT_ANONYMOUS: '100000000',
    RATE_LIMIT_API_KEY: '100000000',
    SYSTEM_API_KEY: 'bench-system-key-0123456789abcdef',
  };
  const { url, db } = await freshBenchDatabase('bench', settings);
  const [user] = await db('users').insert({ username: 'bench_user' }).returning('id');
  await db('user_roles').insert({ user_id: user.id, role_id: 'role_developer' });
  const { key } = await createApiKey({ userId: user.id, name: 'bench', scopes: ['roles:read'] }, db);
  const roleIds = (await db('roles').orderBy('id').pluck('id')) as string[];
  await db.destroy();
  return { env: { DATABASE_URL: url, ...settings }, apiKey: key, databaseUrl: url, roleIds };
}

function startTarget(kind: string, env: Record<string, string>): Promise<{ child: ChildProcess; port: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...NODE_ARGS, TARGETS, kind], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout!.on('data', (d) => {
      out += d;
      const m = /READY (\d+)/.exec(out);
      if (m) resolve({ child, port: Number(m[1]) });
    });
    child.on('exit', (code) => reject(new Error(`${kind} exited with ${code}`)));
  });
}

/** SIGTERM, and resolves once the target has exited (SIGKILL after 10 s). */
function stopTarget(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

async function load(
  url: string,
  headers: Record<string, string> = {},
  paths?: string[],
): Promise<{ rps: number; p99: number; non2xx: number }> {
  // Each connection cycles through `paths` when given (different rows in flight at once).
  const requests = paths?.map((path) => ({ method: 'GET' as const, path }));
  // Warm-up (JIT, connection pools, credential cache), then the measured run.
  await autocannon({ url, connections: CONNECTIONS, duration: 2, headers, requests });
  const r = await autocannon({ url, connections: CONNECTIONS, duration: DURATION, headers, requests });
  return { rps: r.requests.average, p99: r.latency.p99, non2xx: r.non2xx };
}

async function main(): Promise<void> {
  const { env, apiKey, databaseUrl, roleIds } = await prepareDatabase();
  /** The target running now: stopped before the database and the Redis prefix go. */
  let current: ChildProcess | undefined;
  const cleanup = benchCleanup(
    { url: databaseUrl, redisUrl: process.env.REDIS_URL, redisPrefix: env.REDIS_PREFIX },
    async () => {
      if (current) await stopTarget(current);
    },
  );
  try {
    const cases: Array<{
      label: string;
      kind: string;
      path: string;
      headers?: Record<string, string>;
      paths?: string[];
    }> = [
      { label: '(a) node:http, small JSON', kind: 'node-http', path: '/' },
      { label: '(b) Koa, same JSON', kind: 'koa', path: '/' },
      { label: '    Koa + errors', kind: 'partial:errors', path: '/v1' },
      { label: '    + body parser', kind: 'partial:errors+body', path: '/v1' },
      { label: '    + auth (anonymous)', kind: 'partial:errors+body+auth', path: '/v1' },
      { label: '    + rate limit (Redis)', kind: 'partial:errors+body+auth+ratelimit', path: '/v1' },
      { label: '(c) GET /v1 full stack, anonymous', kind: 'api', path: '/v1' },
      {
        label: `(d) GET /v1/roles/:id, API key, 1 row (${roleIds.length} ids in turn)`,
        kind: 'api',
        path: '/v1/roles/role_user',
        headers: { authorization: `Bearer ${apiKey}` },
        paths: roleIds.map((id) => `/v1/roles/${id}`),
      },
    ];
    const runs: Array<Array<{ rps: number; p99: number; non2xx: number }>> = cases.map(() => []);
    // Rounds interleave the targets, so a slow stretch of the machine hits all of them alike.
    for (let round = 1; round <= ROUNDS; round++) {
      for (const [i, c] of cases.entries()) {
        const { child, port } = await startTarget(c.kind, env);
        current = child;
        try {
          const r = await load(`http://127.0.0.1:${port}${c.path}`, c.headers, c.paths);
          runs[i].push(r);
          process.stderr.write(
            `round ${round}/${ROUNDS} ${c.label.trim()}: ${r.rps.toFixed(0)} req/s, p99 ${r.p99} ms\n`,
          );
        } finally {
          current = undefined;
          await stopTarget(child);
        }
      }
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    // A target's share of Koa is taken round by round (each round runs all targets back to back), so
    // the machine's slow and fast stretches cancel out; the table shows the median and the range.
    const shares = cases.map((_, i) => runs[i].map((r, k) => r.rps / runs[1][k].rps));
    const pct = (x: number) => `${(100 * x).toFixed(0)}%`;
    const rows = cases.map((c, i) => ({
      label: c.label,
      rps: median(runs[i].map((r) => r.rps)),
      p99: median(runs[i].map((r) => r.p99)),
      share: median(shares[i]),
      range: `${pct(Math.min(...shares[i]))}–${pct(Math.max(...shares[i]))}`,
      non2xx: runs[i].reduce((n, r) => n + r.non2xx, 0),
    }));
    process.stdout.write(
      `\n| target | req/s | p99 ms | % of Koa | range over rounds | non-2xx |\n|---|---:|---:|---:|---:|---:|\n`,
    );
    for (const r of rows)
      process.stdout.write(
        `| ${r.label.trim()} | ${r.rps.toFixed(0)} | ${r.p99} | ${pct(r.share)} | ${r.range} | ${r.non2xx} |\n`,
      );
    const c = rows[6].share;
    const d = rows[7].share;
    process.stdout.write(
      `\ntargets: (c) ≥ 50% of (b): ${pct(c)} ${c >= 0.5 ? 'met' : 'MISSED'}; (d) ≥ 35% of (b): ${pct(d)} ${d >= 0.35 ? 'met' : 'MISSED'}\n`,
    );
    const ceiling = await pgCeiling(databaseUrl, DURATION);
    process.stdout.write(
      `reference for (d): one query per read, the same SELECT straight through pg with no HTTP, peaks at ${ceiling.toFixed(0)} queries/s = ${pct(ceiling / rows[1].rps)} of (b); ` +
        `(d) goes past it because concurrent reads by id share one statement (shared/rowLoader.ts)\n`,
    );
    process.stdout.write(
      `(node ${NODE_ARGS.join(' ')} for every target, as the api runs under PM2; req/s and p99: medians of ${ROUNDS} rounds; % of Koa: median of per-round ratios; ${CONNECTIONS} connections, ${DURATION} s per target after a 2 s warm-up, one api process, loopback)\n`,
    );
  } finally {
    await cleanup();
  }
}

main().catch((err) => {
  process.stderr.write(`${err?.stack ?? err}\n`);
  process.exit(1);
});
