import test, { type ExecutionContext } from 'ava';
import { spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { readdirSync } from 'node:fs';
import { pendingMigrations } from '../../shared/schemaCheck';
import { createTestDatabase, migratingKnex } from '../helpers/db';
import { freePort } from '../helpers/processes';
import { useStack } from '../helpers/stack';
import { orAfter } from '../helpers/wait';

// What an operator sees when a process cannot start: one structured log line (pino, level fatal)
// naming the cause, and exit code 1, never a bare Node stack trace.
const stack = useStack(test);
const root = path.resolve(__dirname, '../..');
const LAST_MIGRATION = readdirSync(path.join(root, 'migrations'))
  .filter((f) => f.endsWith('.js'))
  .sort()
  .pop()!;

function run(
  entry: string,
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(root, entry)], { env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** A test database whose schema is one migration (the last) behind the build; dropped after the test. */
async function databaseBehind(t: ExecutionContext): Promise<{ url: string }> {
  const d = await createTestDatabase();
  t.teardown(() => d.drop());
  const db = migratingKnex(d.url);
  try {
    await db.migrate.down();
    t.deepEqual(await pendingMigrations(db), [LAST_MIGRATION]);
  } finally {
    await db.destroy();
  }
  return d;
}

/** The fatal line of a process's output, parsed. */
function fatal(stdout: string): { level: number; msg: string; name: string; err: { code?: string; message: string } } {
  const line = stdout
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { level: number })
    .find((l) => l.level === 60);
  if (!line) throw new Error(`no fatal line in: ${stdout}`);
  return line as never;
}

test('a port in use: the api and realtime log a fatal line naming it and exit 1', async (t) => {
  const s = stack();
  const taken = net.createServer();
  await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
  const port = (taken.address() as net.AddressInfo).port;
  try {
    const env = { ...s.env, LOG_LEVEL: 'info' };
    for (const [entry, name, portEnv] of [
      ['api/server.js', 'api', { PORT: String(port), HOST: '127.0.0.1', REALTIME_PORT: String(await freePort()) }],
      ['realtime/server.js', 'realtime', { REALTIME_PORT: String(port), REALTIME_HOST: '127.0.0.1' }],
    ] as const) {
      const r = await run(entry, { ...env, ...portEnv });
      t.is(r.code, 1, `${name}: ${r.stdout}${r.stderr}`);
      const line = fatal(r.stdout);
      t.is(line.msg, `${name} failed to start`);
      t.is(line.name, name);
      t.is(line.err.code, 'EADDRINUSE');
      t.is(r.stderr, '', `${name} wrote to stderr`);
    }
  } finally {
    taken.close();
  }
});

test('PostgreSQL unreachable at start: the api serves 503 and says why, rather than exiting', async (t) => {
  // A restart or a pm2 reload during a database outage must leave an api that answers 503, not
  // none at all (connection refused). It stores SYSTEM_API_KEY once the database is back.
  const s = stack();
  const port = await freePort();
  const child = spawn(process.execPath, [path.join(root, 'api/server.js')], {
    env: {
      ...process.env,
      ...s.env,
      PORT: String(port),
      HOST: '127.0.0.1',
      REALTIME_PORT: String(await freePort()),
      DATABASE_URL: `postgres://postgres@127.0.0.1:${await freePort()}/none`,
      LOG_LEVEL: 'info',
    },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  try {
    for (let i = 0; i < 300 && !stdout.includes('"api listening"'); i++) await new Promise((r) => setTimeout(r, 50));
    t.true(stdout.includes('"api listening"'), stdout + stderr);
    const warn = stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { level: number; msg: string; err?: string })
      .find((l) => l.level === 40 && /database not reachable at start/.test(l.msg));
    t.truthy(warn, stdout);
    t.regex(String(warn?.err), /ECONNREFUSED/);
    const health = await fetch(`http://127.0.0.1:${port}/v1/health`);
    t.is(health.status, 503);
    const devices = await fetch(`http://127.0.0.1:${port}/v1/devices`, { headers: { authorization: 'Bearer sess_x' } });
    t.is(devices.status, 503);
  } finally {
    child.kill('SIGTERM');
  }
  t.is(await exited, 0, stdout + stderr);
  t.is(stderr, '');
});

test('a schema behind the build: the api, realtime and workers log a fatal line naming the migrate command and exit 1', async (t) => {
  // An operator who deploys a build without migrating (README "Production under PM2") is told what
  // to run, rather than "relation does not exist" from the first query that needs a new table.
  const s = stack();
  const d = await databaseBehind(t);
  const env = { ...s.env, DATABASE_URL: d.url, LOG_LEVEL: 'info' };
  for (const [entry, name, portEnv] of [
    ['api/server.js', 'api', { PORT: String(await freePort()), REALTIME_PORT: String(await freePort()) }],
    ['realtime/server.js', 'realtime', { REALTIME_PORT: String(await freePort()) }],
    ['workers/index.js', 'workers', {}],
  ] as const) {
    const r = await run(entry, { ...env, ...portEnv });
    t.is(r.code, 1, `${name}: ${r.stdout}${r.stderr}`);
    const line = fatal(r.stdout) as ReturnType<typeof fatal> & { pending: string[] };
    t.is(line.name, name);
    t.regex(line.msg, /schema is behind this build .*run `npm run cli -- migrate`/);
    t.deepEqual(line.pending, [LAST_MIGRATION]);
    t.is(r.stderr, '', `${name} wrote to stderr`);
  }
});

/**
 * Starts the api with its database unreachable (nothing listens on the port of DATABASE_URL), then
 * opens that port as a proxy to `databaseUrl`'s PostgreSQL: the database "comes back".
 */
async function startWithDatabaseLater(
  env: Record<string, string>,
  databaseUrl: string,
): Promise<{
  output: () => string;
  lines: () => Array<{ level: number; msg: string; name: string; pending?: string[] }>;
  databaseBack: () => Promise<void>;
  exited: Promise<number | null>;
  child: ReturnType<typeof spawn>;
  closeProxy: () => void;
}> {
  const dbPort = await freePort();
  const target = new URL(databaseUrl);
  const url = new URL(databaseUrl);
  url.host = `127.0.0.1:${dbPort}`;
  const child = spawn(process.execPath, [path.join(root, 'api/server.js')], {
    env: {
      ...process.env,
      ...env,
      PORT: String(await freePort()),
      HOST: '127.0.0.1',
      REALTIME_PORT: String(await freePort()),
      DATABASE_URL: url.toString(),
      LOG_LEVEL: 'info',
    },
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const sockets = new Set<net.Socket>();
  const proxy = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    sockets.add(client).add(upstream);
    client.pipe(upstream).on('error', () => undefined);
    upstream.pipe(client).on('error', () => undefined);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  return {
    child,
    exited,
    output: () => out,
    lines: () =>
      out
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { level: number; msg: string; name: string; pending?: string[] }),
    databaseBack: () => new Promise<void>((r) => proxy.listen(dbPort, '127.0.0.1', r)),
    closeProxy: () => {
      for (const s of sockets) s.destroy();
      proxy.close();
    },
  };
}

test('PostgreSQL back after a start without it: a schema behind the build stops the api, naming the migrate command', async (t) => {
  // The start could not check the schema; the check runs again until the database answers. A
  // schema behind the build then stops the process as it would have stopped the start.
  const s = stack();
  const d = await databaseBehind(t);
  const api = await startWithDatabaseLater(s.env, d.url);
  t.teardown(() => {
    api.child.kill('SIGKILL');
    api.closeProxy();
  });
  for (let i = 0; i < 300 && !api.output().includes('"api listening"'); i++)
    await new Promise((r) => setTimeout(r, 50));
  t.true(api.output().includes('"api listening"'), api.output());
  t.truthy(api.lines().find((l) => /database not reachable at start/.test(l.msg)));
  await api.databaseBack();
  const code = await orAfter(api.exited, 20_000, 'still running');
  t.is(code, 1, api.output());
  const line = api.lines().find((l) => l.level === 60);
  t.truthy(line, api.output());
  t.is(line?.name, 'api');
  t.regex(line?.msg ?? '', /^api stopping: the database schema is behind this build .*run `npm run cli -- migrate`/);
  t.deepEqual(line?.pending, [LAST_MIGRATION]);
});

test('PostgreSQL back after a start without it: an up-to-date schema is checked and the api serves on', async (t) => {
  const s = stack();
  const api = await startWithDatabaseLater(s.env, s.env.DATABASE_URL);
  t.teardown(() => {
    api.child.kill('SIGKILL');
    api.closeProxy();
  });
  for (let i = 0; i < 300 && !api.output().includes('"api listening"'); i++)
    await new Promise((r) => setTimeout(r, 50));
  t.true(api.output().includes('"api listening"'), api.output());
  await api.databaseBack();
  for (let i = 0; i < 400 && !api.output().includes('schema version checked, up to date'); i++)
    await new Promise((r) => setTimeout(r, 50));
  t.truthy(
    api.lines().find((l) => l.level === 30 && l.msg === 'database reachable: schema version checked, up to date'),
    api.output(),
  );
  api.child.kill('SIGTERM');
  t.is(await api.exited, 0, api.output());
  t.falsy(api.lines().find((l) => l.level === 60));
});
