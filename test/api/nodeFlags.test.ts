import test from 'ava';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

// The api's node flags under PM2 (ecosystem.config.js), which bench:routes and bench:foundation
// read as well: the young generation's size and no allocation-site pretenuring (README "Garbage
// dies young"). A flag this node does not know would stop every api instance from starting.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const ecosystem = require(path.resolve(__dirname, '..', '..', '..', 'ecosystem.config.js')) as {
  apps: Array<{ name: string; node_args?: string }>;
};

test('the api runs with a 64 MB semi-space and without allocation-site pretenuring', (t) => {
  const args = (ecosystem.apps.find((a) => a.name === 'api')?.node_args ?? '').split(/\s+/);
  t.true(args.includes('--max-semi-space-size=64'), args.join(' '));
  t.true(args.includes('--no-allocation-site-pretenuring'), args.join(' '));
});

test('every node flag of every PM2 app is one this node accepts', async (t) => {
  for (const app of ecosystem.apps) {
    const args = (app.node_args ?? '').split(/\s+/).filter(Boolean);
    const { stdout } = await run(process.execPath, [...args, '-e', 'process.stdout.write("ok")']);
    t.is(stdout, 'ok', `${app.name}: ${args.join(' ')}`);
  }
});
