import test from 'ava';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { runToEnd } from '../helpers/processes';

const ROOT = path.resolve(__dirname, '../../..');

/** A loopback port nothing listens on right now. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    sock.once('connect', () => (sock.destroy(), resolve(true)));
    sock.once('error', () => resolve(false));
  });
}

const run = (script: string, env: Record<string, string>) =>
  runToEnd('bash', [path.join(ROOT, 'scripts', script)], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    timeout: 60_000,
  });

// Starts a real redis-server on a spare port (PostgreSQL is reachable, so provision leaves it alone)
// with a state directory of its own, so an operator's .run/ is never touched. Nothing answers on
// that port, so provision.sh installs redis-server first where it is missing, as on a fresh machine.
test('services:stop stops exactly the redis-server that provision.sh started', async (t) => {
  const runDir = mkdtempSync(path.join(os.tmpdir(), 'svc-run-'));
  const port = await freePort();
  const env = {
    RUN_DIR: runDir,
    REDIS_URL: `redis://127.0.0.1:${port}`,
    DATABASE_URL: process.env.DATABASE_URL || 'postgres://postgres:postgres@127.0.0.1:5432/service',
  };
  try {
    const p = await run('provision.sh', env);
    t.is(p.status, 0, p.stdout + p.stderr);
    t.regex(p.stdout, new RegExp(`starting Redis on port ${port}`));
    t.true(await answers(port));
    const state = readFileSync(path.join(runDir, 'provisioned'), 'utf8');
    t.is(state, `redis ${port} ${runDir}/redis-${port}.pid\n`);

    // Reachable now: a second provision starts nothing and records nothing new.
    const again = await run('provision.sh', env);
    t.regex(again.stdout, /Redis reachable/);
    t.is(readFileSync(path.join(runDir, 'provisioned'), 'utf8'), state);

    const stop = await run('services-stop.sh', env);
    t.is(stop.status, 0, stop.stdout + stop.stderr);
    t.regex(stop.stdout, new RegExp(`stopping Redis on port ${port}`));
    t.false(await answers(port));
    t.false(existsSync(path.join(runDir, 'provisioned')));
    t.regex((await run('services-stop.sh', env)).stdout, /nothing to stop/);
  } finally {
    const pidFile = path.join(runDir, `redis-${port}.pid`);
    if (existsSync(pidFile)) {
      try {
        process.kill(Number(readFileSync(pidFile, 'utf8').trim()));
      } catch {
        // already gone
      }
    }
    rmSync(runDir, { recursive: true, force: true });
  }
});
