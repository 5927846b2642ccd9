import test from 'ava';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ConfigError, loadConfig } from '../../shared/config';
import { runToEnd } from '../helpers/processes';

test('defaults serve local development', (t) => {
  const c = loadConfig({});
  t.is(c.port, 3000);
  t.is(c.realtimePort, 3001);
  t.deepEqual(c.rateLimit.anonymous, { limit: 120, windowSeconds: 60 });
  t.deepEqual(c.rateLimit.user, { limit: 600, windowSeconds: 60 });
  t.deepEqual(c.rateLimit.apiKey, { limit: 1200, windowSeconds: 60 });
  t.deepEqual(c.rateLimit.gpsPost, { limit: 30, windowSeconds: 60 });
  t.is(c.idAssertionMaxAgeSeconds, 30);
  t.is(c.secretsKey.length, 32);
  t.deepEqual(c.supportedLocales, ['en', 'de']);
});

test('every window and limit is configurable', (t) => {
  const c = loadConfig({
    RATE_LIMIT_WINDOW_SECONDS: '10',
    RATE_LIMIT_USER: '7',
    RATE_LIMIT_API_KEY_WINDOW_SECONDS: '5',
    RATE_LIMIT_GPS_POST: '3',
  });
  t.deepEqual(c.rateLimit.user, { limit: 7, windowSeconds: 10 });
  t.deepEqual(c.rateLimit.apiKey, { limit: 1200, windowSeconds: 5 });
  t.is(c.rateLimit.gpsPost.limit, 3);
});

test('QUEUE_CONCURRENCY names real queues, or check-config refuses it (as the workers would)', (t) => {
  t.deepEqual(loadConfig({ QUEUE_CONCURRENCY: 'geofence:8, email:2' }).queueConcurrency, { geofence: 8, email: 2 });
  for (const v of ['passwordReset:2', 'export:1', 'geofence:2,nosuchqueue:1']) {
    const err = t.throws(() => loadConfig({ QUEUE_CONCURRENCY: v }), { instanceOf: ConfigError }, v);
    t.regex(err!.message, /QUEUE_CONCURRENCY: names no queue: \w+ \(queues: email, scheduled/, v);
  }
});

test('TRUST_PROXY: false, true (one proxy) or a number of proxies', (t) => {
  t.is(loadConfig({}).trustProxyHops, 0);
  t.is(loadConfig({ TRUST_PROXY: 'false' }).trustProxyHops, 0);
  t.is(loadConfig({ TRUST_PROXY: '0' }).trustProxyHops, 0);
  t.is(loadConfig({ TRUST_PROXY: 'true' }).trustProxyHops, 1);
  t.is(loadConfig({ TRUST_PROXY: '1' }).trustProxyHops, 1);
  t.is(loadConfig({ TRUST_PROXY: '2' }).trustProxyHops, 2);
  for (const v of ['yes', '-1', '1.5', '11'])
    t.throws(() => loadConfig({ TRUST_PROXY: v }), { instanceOf: ConfigError, message: /TRUST_PROXY/ }, v);
});

test('bad values are rejected naming the variable', (t) => {
  for (const [name, value] of [
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['REALTIME_PORT', '65536'],
    ['DATABASE_URL', 'not a url'],
    ['SECRETS_KEY', Buffer.from('short').toString('base64')],
    ['RATE_LIMIT_USER', '-1'],
    ['ID_APPS', 'nocolon'],
    ['SMTP_URL', '::::'],
    // URLs of the wrong scheme: accepted before, then a Redis forever down or a driver error.
    ['DATABASE_URL', 'mysql://127.0.0.1/x'],
    ['REDIS_URL', 'http://127.0.0.1:6379'],
    ['SMTP_URL', 'http://mail.example'],
    ['APP_URL', 'ftp:x'],
    ['PEGEL_API_URL', 'javascript:alert(1)'],
    // Mail sent without a From header; a listen() failing with a message not naming HOST.
    ['MAIL_FROM', 'garbage'],
    ['HOST', 'not a host'],
    ['REALTIME_HOST', 'a/b'],
    ['API_INSTANCES', 'abc'],
    // A base of avatar URLs clients show; a key Node's lenient base64 read without its junk.
    ['CHAT_CDN_URL', 'javascript:alert(1)'],
    ['SECRETS_KEY', `!!!!${randomBytes(32).toString('base64')}`],
    ['SECRETS_KEY_PREVIOUS', `${randomBytes(32).toString('base64')}*`],
    ['SUPPORTED_LOCALES', 'en,Deutsch'],
    ['SUPPORTED_LOCALES', ' , '],
  ]) {
    const err = t.throws(() => loadConfig({ [name]: value }), { instanceOf: ConfigError });
    t.regex(err!.message, new RegExp(name), name);
  }
});

test('good values of the checked variables are accepted', (t) => {
  const c = loadConfig({
    DATABASE_URL: 'postgresql://u:p@db.internal:5433/app',
    REDIS_URL: 'rediss://cache.internal:6380/2',
    SMTP_URL: 'smtps://u:p@mail.example:465',
    MAIL_FROM: 'Tracker Service <no-reply@example.com>',
    HOST: '::',
    REALTIME_HOST: 'realtime-1.internal',
    API_INSTANCES: '-1',
  });
  t.is(c.redisUrl, 'rediss://cache.internal:6380/2');
  t.is(loadConfig({ AIS_FEED_URL: 'udp://0.0.0.0:10110' }).aisFeedUrl, 'udp://0.0.0.0:10110');
  t.is(loadConfig({ AIS_FEED_URL: 'tcp://ais.example:5631' }).aisFeedUrl, 'tcp://ais.example:5631');
  t.is(c.mailFrom, 'Tracker Service <no-reply@example.com>');
  t.is(loadConfig({ MAIL_FROM: 'ops@example.com' }).mailFrom, 'ops@example.com');
  const key = randomBytes(32);
  t.deepEqual(loadConfig({ SECRETS_KEY: key.toString('base64') }).secretKeys[0], key);
  // URL-safe and unpadded, as some key generators print it: the same 32 bytes.
  t.deepEqual(loadConfig({ SECRETS_KEY: key.toString('base64url') }).secretKeys[0], key);
  t.deepEqual(loadConfig({ SECRETS_KEY_PREVIOUS: key.toString('base64url') }).secretKeys[1], key);
  t.deepEqual(loadConfig({ SUPPORTED_LOCALES: 'en, pt-BR' }).supportedLocales, ['en', 'pt-BR']);
  t.is(loadConfig({ CHAT_CDN_URL: 'https://cdn.example/' }).chat.cdnUrl, 'https://cdn.example');
});

test('REALTIME_PORT must differ from PORT (realtime would die on an address in use, not naming it)', (t) => {
  t.throws(() => loadConfig({ PORT: '4000', REALTIME_PORT: '4000' }), {
    instanceOf: ConfigError,
    message: /REALTIME_PORT: must differ from PORT/,
  });
});

test('PORT 65535 needs a REALTIME_PORT of its own (realtime listens on PORT + 1 by default)', (t) => {
  t.throws(() => loadConfig({ PORT: '65535' }), { instanceOf: ConfigError, message: /PORT: 65535 .*REALTIME_PORT/ });
  t.is(loadConfig({ PORT: '65535', REALTIME_PORT: '4001' }).realtimePort, 4001);
});

test('ID_APPS parses app ids and secrets', (t) => {
  const c = loadConfig({ ID_APPS: 'web:secret1, admin:sec:ret2' });
  t.is(c.idApps.get('web'), 'secret1');
  t.is(c.idApps.get('admin'), 'sec:ret2');
});

test('production requires SECRETS_KEY', (t) => {
  t.throws(() => loadConfig({ NODE_ENV: 'production' }), { message: /SECRETS_KEY/ });
});

test('PASSWORD_HASH_*: argon2 defaults; cheaper costs outside production only', (t) => {
  t.deepEqual(loadConfig({}).passwordHashing, { memoryCost: 65536, timeCost: 3, parallelism: 4 });
  const cheap = { PASSWORD_HASH_MEMORY_KIB: '1024', PASSWORD_HASH_TIME_COST: '1', PASSWORD_HASH_PARALLELISM: '1' };
  t.deepEqual(loadConfig(cheap).passwordHashing, { memoryCost: 1024, timeCost: 1, parallelism: 1 });
  const production = { NODE_ENV: 'production', SECRETS_KEY: Buffer.alloc(32, 1).toString('base64') };
  t.throws(() => loadConfig({ ...production, ...cheap }), {
    message: /PASSWORD_HASH_MEMORY_KIB.*19456 KiB and 2 passes/,
  });
  t.throws(() => loadConfig({ ...production, PASSWORD_HASH_TIME_COST: '1' }), { message: /2 passes/ });
  // OWASP's smallest setting is accepted in production.
  t.deepEqual(
    loadConfig({
      ...production,
      PASSWORD_HASH_MEMORY_KIB: '19456',
      PASSWORD_HASH_TIME_COST: '2',
      PASSWORD_HASH_PARALLELISM: '1',
    }).passwordHashing,
    { memoryCost: 19456, timeCost: 2, parallelism: 1 },
  );
  // argon2 needs 8 KiB per lane; out-of-range values name their variable.
  t.throws(() => loadConfig({ PASSWORD_HASH_MEMORY_KIB: '16', PASSWORD_HASH_PARALLELISM: '4' }), {
    message: /PASSWORD_HASH_MEMORY_KIB: must be at least 8 KiB per lane/,
  });
  t.throws(() => loadConfig({ PASSWORD_HASH_TIME_COST: '0' }), {
    message: /PASSWORD_HASH_TIME_COST: must be an integer/,
  });
  t.throws(() => loadConfig({ PASSWORD_HASH_MEMORY_KIB: '1e9' }), {
    message: /PASSWORD_HASH_MEMORY_KIB: must be an integer/,
  });
});

test('check-config (run by npm start before it provisions) names a bad DATABASE_URL and exits 1', async (t) => {
  const cli = path.resolve(__dirname, '../../scripts/cli.js');
  const bad = await runToEnd(process.execPath, [cli, 'check-config'], {
    env: { ...process.env, DATABASE_URL: 'notaurl' },
    timeout: 20000,
  });
  t.is(bad.status, 1);
  t.regex(bad.stderr, /DATABASE_URL: must be a postgres:\/\/ or postgresql:\/\/ URL/);
  const good = await runToEnd(process.execPath, [cli, 'check-config'], { env: process.env, timeout: 20000 });
  t.is(good.status, 0, good.stderr);
  t.regex(good.stdout, /configuration ok/);
  t.regex(readFileSync(path.resolve(__dirname, '../../../scripts/start.sh'), 'utf8'), /check-config\n.*provision\.sh/s);
});

test('a process started with a bad variable exits with a message naming it', async (t) => {
  const entry = path.resolve(__dirname, '../../api/server.js');
  const r = await runToEnd(process.execPath, [entry], { env: { ...process.env, PORT: 'eighty' }, timeout: 20000 });
  t.is(r.status, 1);
  t.regex(r.stderr, /PORT: must be an integer/);
});
