import test from 'ava';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { useStack } from '../helpers/stack';

const ROOT = path.resolve(__dirname, '../../..');
const stack = useStack(test, { realtime: 1 });

interface Block {
  background: boolean;
  code: string;
}

/**
 * The shell blocks of the README's "First steps" section that a `<!-- first-steps -->` (or
 * `<!-- first-steps: background -->`) comment marks, in order.
 */
export function firstStepsBlocks(readme: string): Block[] {
  const start = readme.indexOf('\n## First steps\n');
  if (start < 0) throw new Error('README.md has no "## First steps" section');
  const end = readme.indexOf('\n## ', start + 1);
  const section = readme.slice(start, end < 0 ? undefined : end);
  const blocks: Block[] = [];
  for (const m of section.matchAll(/<!-- first-steps(: background)? -->\s*\n```(?:sh|bash)\n([\s\S]*?)\n```/g)) {
    blocks.push({ background: !!m[1], code: m[2] });
  }
  return blocks;
}

/**
 * One bash script of the blocks, as an operator would type them in one terminal. A background block
 * (the operator's third terminal) runs alongside: the script waits until it says it subscribed, and
 * at the end waits for it to finish and prints what it printed. The README's commands are adapted
 * to the test's stack in one way only: the compiled CLI instead of `npm run -s cli --`, which would
 * rebuild dist/ under the running test (the port comes from PORT, exported as the README says).
 */
function script(blocks: Block[], logDir: string): string {
  const lines = ['set -euo pipefail'];
  blocks.forEach((b, i) => {
    const code = b.code.replace(/npm run -s cli --/g, 'node dist/scripts/cli.js');
    if (!b.background) {
      lines.push(`echo '### block ${i + 1}'`, code);
      return;
    }
    const log = path.join(logDir, `background-${i + 1}.log`);
    lines.push(
      `echo '### block ${i + 1} (background)'`,
      `( ${code} ) >${log} 2>&1 &`,
      `BG_${i}=$!`,
      `for _ in $(seq 1 100); do grep -q '^subscribed to' ${log} && break; kill -0 $BG_${i} 2>/dev/null || break; sleep 0.1; done`,
      `grep -q '^subscribed to' ${log} || { cat ${log}; exit 1; }`,
    );
  });
  blocks.forEach((b, i) => {
    if (b.background)
      lines.push(
        `wait $BG_${i}; echo '### background block ${i + 1} printed:'; cat ${path.join(logDir, `background-${i + 1}.log`)}`,
      );
  });
  return lines.join('\n') + '\n';
}

function runScript(file: string, env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn('bash', [file], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c));
    child.stderr.on('data', (c: Buffer) => (out += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), 90_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

test('the README "First steps" run as written: health, first admin, device and GPS point, WebSocket push', async (t) => {
  const s = stack();
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const blocks = firstStepsBlocks(readme);
  t.true(blocks.length >= 5, `first-steps blocks found: ${blocks.length}`);
  t.is(blocks.filter((b) => b.background).length, 1);
  t.true(
    blocks.every((b) => b.code.includes('localhost:${PORT:-3000}/') || b.code.includes('wsListen')),
    'every block talks to the service on the port the operator exported',
  );

  const port = String(s.api.port);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'first-steps-'));
  try {
    // Run as written: PORT (exported below, as the README says) takes the commands to the stack.
    const body = script(blocks, dir);
    t.false(body.includes('localhost:3000'), 'no command ignores PORT');
    const file = path.join(dir, 'first-steps.sh');
    writeFileSync(file, body);
    const env = {
      PORT: port,
      DATABASE_URL: s.config.databaseUrl,
      REDIS_URL: s.config.redisUrl,
      REDIS_PREFIX: s.config.redisPrefix,
      LOG_LEVEL: 'silent',
    };
    const r = await runScript(file, env);
    t.is(r.code, 0, r.out);
    t.regex(r.out, /"status":"ok"/);
    t.regex(r.out, /created administrator \S+ \([0-9a-f-]{36}\) <admin@example\.com>: email verified, role Admin/);
    t.regex(r.out, /"name":"boat-1"/);
    t.regex(
      r.out,
      /### background block \d+ printed:\nconnected to ws:\/\/localhost:\d+\/v1\/ws with a Bearer token\nsubscribed to gps\n\{"type":"gpsUpdate"/,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  // What the steps did is in the database: the device owns both points its tracker key sent.
  const device = await s.db('devices').where('name', 'boat-1').first('id', 'api_key_id');
  t.truthy(device?.api_key_id);
  t.is(Number((await s.db('gps_points').where('device_id', device.id).count('* as n'))[0].n), 2);
});
