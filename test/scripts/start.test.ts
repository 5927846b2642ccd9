import test from 'ava';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort, processAlive } from '../helpers/processes';
import { useStack } from '../helpers/stack';
import { orAfter, sleep } from '../helpers/wait';

// `npm start` as a container or an init system runs it: SIGTERM goes to the npm process alone
// (`docker stop` signals PID 1). The fleet runs on this stack's database and Redis prefix, with a
// private PM2 home.
const stack = useStack(test);
const root = path.resolve(__dirname, '../../..');

test('npm start: SIGTERM to npm alone drains the whole fleet, and nothing is left running', async (t) => {
  const s = stack();
  const home = mkdtempSync(path.join(tmpdir(), 'pm2-start-'));
  const [port, realtimePort] = [await freePort(), await freePort()];
  const env = {
    ...process.env,
    ...s.env,
    PORT: String(port),
    REALTIME_PORT: String(realtimePort),
    API_INSTANCES: '1',
    LOG_LEVEL: 'info',
    PM2_HOME: home,
  };
  // Its own process group: what is left of it afterwards can be found (and cleaned up) by group.
  const npm = spawn('npm', ['start'], { cwd: root, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  npm.stdout.on('data', (c: Buffer) => (out += c.toString()));
  npm.stderr.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<number | null>((resolve) => npm.once('exit', (code) => resolve(code)));
  try {
    const up = () =>
      /api listening/.test(out) && /"msg":"workers ready"/.test(out) && /"msg":"realtime listening/.test(out);
    for (let i = 0; !up(); i++) {
      if (i > 1200 || npm.exitCode !== null) throw new Error(`npm start did not come up:\n${out.slice(-3000)}`);
      await sleep(100);
    }
    t.is((await fetch(`http://127.0.0.1:${port}/health`)).status, 200);

    process.kill(npm.pid!, 'SIGTERM');
    const code = await orAfter(exited, 30_000, 'timeout' as const);
    t.not(code, 'timeout', out.slice(-3000));
    for (const name of ['api', 'workers', 'realtime'])
      t.regex(out, new RegExp(`"name":"${name}".*"msg":"${name} drained"`), `${name} drained`);
    // Every process of the fleet has exited: none was orphaned by a shell between npm and pm2-runtime.
    for (let i = 0; processAlive(-npm.pid!) && i < 50; i++) await sleep(100);
    t.false(processAlive(-npm.pid!), 'processes of npm start are still running');
    const refused = await fetch(`http://127.0.0.1:${port}/health`).then(
      () => false,
      () => true,
    );
    t.true(refused, 'the api still answers');
  } finally {
    if (processAlive(-npm.pid!)) process.kill(-npm.pid!, 'SIGKILL');
    rmSync(home, { recursive: true, force: true });
  }
});
