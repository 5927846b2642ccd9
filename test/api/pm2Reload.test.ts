import test from 'ava';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { describeOutcome, loadKey, Outcome, send, startLoad } from '../helpers/httpLoad';
import { freePort } from '../helpers/processes';
import { useStack } from '../helpers/stack';
import { sleep } from '../helpers/wait';

// `pm2 reload api` as an operator runs it: ecosystem.config.js, two api instances in cluster mode,
// a private PM2 daemon (PM2_HOME in a temp dir), this stack's database and Redis prefix.
const stack = useStack(test, { env: { RATE_LIMIT_GPS_POST: '1000000', RATE_LIMIT_API_KEY: '1000000' } });

const run = promisify(execFile);
const root = path.resolve(__dirname, '../../..');
const pm2Bin = require.resolve('pm2/bin/pm2');

test('pm2 reload api under keep-alive load: every request is answered, every 201 is stored and nothing else', async (t) => {
  const s = stack();
  const key = await loadKey(s.db);
  const port = await freePort();
  const home = mkdtempSync(path.join(tmpdir(), 'pm2-'));
  const env = { ...process.env, ...s.env, PORT: String(port), API_INSTANCES: '2', LOG_LEVEL: 'warn', PM2_HOME: home };
  const pm2 = (...args: string[]) => run(process.execPath, [pm2Bin, ...args], { cwd: root, env, timeout: 90_000 });
  try {
    await pm2('start', 'ecosystem.config.js', '--only', 'api');
    // Both instances answer (wait_ready: `pm2 start` returns once they sent 'ready', but be lenient).
    const agent = new http.Agent({ keepAlive: false });
    for (let i = 0; ; i++) {
      if ((await send(agent, port, key, 'GET', '/v1/gps?limit=1')).status === 200) break;
      if (i > 300) throw new Error('the api did not start under PM2');
      await sleep(100);
    }
    const prefix = `reload-${randomBytes(4).toString('hex')}-`;
    const load = startLoad(port, key, { loops: 6, prefix });
    await sleep(1000);
    const reloadAt = Date.now();
    await pm2('reload', 'api');
    const reloadMs = Date.now() - reloadAt;
    // `pm2 reload` returns once the old instances have exited; the load goes on against the new ones.
    await sleep(2000);
    await load.stop();
    const { outcomes } = load;

    const failed = outcomes.filter((o: Outcome) => o.status !== 200 && o.status !== 201);
    t.log(`${outcomes.length} requests during a ${reloadMs} ms reload of 2 instances, ${failed.length} failed`);
    t.true(outcomes.filter((o) => o.sentAt > reloadAt + reloadMs).length > 10, 'no load after the reload');
    t.deepEqual(
      failed.map((o) => `${describeOutcome(o)} ${o.body ?? ''}`),
      [],
    );
    const created = outcomes.filter((o) => o.method === 'POST' && o.status === 201).map((o) => o.marker!);
    const stored = await s.db('gps_points').where('device_id', 'like', `${prefix}%`).pluck('device_id');
    t.deepEqual([...stored].sort(), [...created].sort());
  } finally {
    await pm2('kill').catch(() => undefined);
    rmSync(home, { recursive: true, force: true });
  }
});
