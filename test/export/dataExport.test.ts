import test from 'ava';
import { createSession } from '../../shared/commands/sessions';
import { hashPassword } from '../../shared/domain/passwords';
import { iso } from '../../shared/presenters/iso';
import { QueueName } from '../../shared/queues';
import { REPORT_LIST_LIMIT } from '../../workers/export/documents';
import { formatDate } from '../../workers/export/i18n';
import { sharedPdfRenderer } from '../../workers/export/pdfRenderer';
import { createKey, createOAuthToken, createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { download, pdfText, unzip } from './archive';
import { enableTwoFactor } from '../twoFactor/helpers';

const stack = useStack(test, { workers: true, env: { EXPORT_RATE_LIMIT_PER_HOUR: '3' } });

const SECTIONS = [
  'exportInfo',
  'user',
  'platformAccounts',
  'connectedApps',
  'ownedApps',
  'apiKeys',
  'roles',
  'twoFactorAuth',
  'deletionStatus',
  'exportLogs',
  'sessions',
];

const sorted = (xs: string[]) => [...xs].sort();

/** Archive keys still in Redis under the stack's prefix. */
/**
 * The parked archives of one user's finished exports still in Redis (the file's other tests export
 * in parallel, so only this user's archives are looked at).
 */
async function archiveKeys(userId: string): Promise<string[]> {
  const s = stack();
  const keys = (await completedJobs(userId)).map(
    (j) => `${s.config.redisPrefix}export:archive:${(j.returnvalue as { archiveId: string }).archiveId}`,
  );
  if (keys.length === 0) throw new Error(`no finished export job of ${userId}`);
  const exists = await Promise.all(keys.map((k) => s.redis.exists(k)));
  return keys.filter((_, i) => exists[i] === 1);
}

/** Finished export jobs of one user. */
async function completedJobs(userId: string) {
  const s = stack();
  const jobs = await s.workers!.ctx.queues.queue(QueueName.dataExport).getJobs(['completed']);
  return jobs.filter((j) => j.data.userId === userId);
}

test('401 without credentials; 403 for an API key whose grant does not name account:export', async (t) => {
  const s = stack();
  const r = await s.request('GET', '/v1/user/export');
  t.is(r.status, 401);
  t.is(r.body.error, 'Unauthorized');
  t.truthy(r.body.message);
  t.is((await s.request('GET', '/v1/user/export/logs')).status, 401);
  const user = await createUser(s.db);
  const key = await createKey({ userId: user.id, scopes: ['api_keys:read'] });
  const denied = await s.request('GET', '/v1/user/export', { token: key.key });
  t.is(denied.status, 403);
  t.regex(denied.body.message, /account:export/);
  t.is((await s.request('GET', '/v1/user/export', { token: s.systemKey })).status, 403);
});

test('a German user exports every section of data.json, a German report.pdf and README.txt; no secret anywhere', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  await s.db('users').where('id', user.id).update({ preferred_locale: 'de' });
  const passwordHash = await hashPassword('correct horse battery staple');
  await s.db('platform_accounts').where('user_id', user.id).update({ password_hash: passwordHash });
  const other = await createSession(s.db, user.id, new Date(Date.now() + 3600_000), {
    ipAddress: '203.0.113.45',
    userAgent: 'Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:120.0) Gecko/20100101 Firefox/120.0',
    platformSlug: 'email',
  });
  const v6 = await createSession(s.db, user.id, new Date(Date.now() + 3600_000), {
    ipAddress: '2001:db8:85a3::8a2e:370:7334',
  });
  const exporter = await createKey({ userId: user.id, scopes: ['account:export'], name: 'exporter' });
  const tracker = await createKey({ userId: user.id, scopes: ['gps:read'], name: 'tracker' });
  const reg = await s.request('POST', '/v1/oauth/clients', {
    token: user.token,
    body: { name: 'My Export App', redirect_uris: ['https://app.example.test/cb'] },
  });
  t.is(reg.status, 201, reg.text);
  const clientSecret: string = reg.body.client_secret;
  t.truthy(clientSecret);
  await createOAuthToken(s.db, user.id, ['users:read']);
  const { secret: totpSecret, backupCodes } = await enableTwoFactor(s, user.token);
  const [earlier] = await s
    .db('export_logs')
    .insert({
      user_id: user.id,
      exported_at: new Date(Date.now() - 86400_000),
      ip_address: '198.51.100.7',
      user_agent: 'curl/8',
      export_format: 'zip',
      file_size_bytes: 1234,
      locale: 'en',
    })
    .returning('*');

  const res = await download(`${s.url}/v1/user/export`, exporter.key, {
    'user-agent': 'export-test/1.0',
    'accept-encoding': 'br, gzip',
  });
  t.is(res.status, 200, res.body.toString());
  t.is(res.headers.get('content-type'), 'application/zip');
  // A ZIP is compressed already: the answer's compression leaves it as it is (api/compression.ts).
  t.is(res.headers.get('content-encoding'), null);
  t.true(res.body.length >= 16 * 1024, `${res.body.length} bytes: large enough to be compressed were it text`);
  const today = new Date().toISOString().slice(0, 10);
  t.is(res.headers.get('content-disposition'), `attachment; filename="service-data-export-${today}.zip"`);

  const files = await unzip(res.body);
  t.deepEqual(sorted([...files.keys()]), ['README.txt', 'data.json', 'report.pdf']);
  const data = JSON.parse(files.get('data.json')!.toString('utf8'));
  t.deepEqual(sorted(Object.keys(data)), sorted(SECTIONS));

  // exportInfo
  t.is(data.exportInfo.format, 'zip');
  t.is(data.exportInfo.version, '1.0');
  t.true(Math.abs(new Date(data.exportInfo.exportedAt).getTime() - Date.now()) < 60_000);
  // user
  const u = await s.db('users').where('id', user.id).first();
  t.deepEqual(data.user, {
    id: u.id,
    username: u.username,
    primaryPlatformAccountId: u.primary_platform_account_id,
    preferredLocale: 'de',
    privacyMode: u.privacy_mode,
    avatarsEnabled: u.avatars_enabled,
    createdAt: iso(u.created_at),
    updatedAt: iso(u.updated_at),
    lastLoginAt: iso(u.last_login_at),
    deletedAt: null,
  });
  // platformAccounts
  const accounts = await s.db('platform_accounts').where('user_id', user.id);
  t.deepEqual(sorted(data.platformAccounts.map((a: any) => a.id)), sorted(accounts.map((a) => a.id)));
  t.is(data.platformAccounts[0].email, user.email);
  t.is(data.platformAccounts[0].platformSlug, 'email');
  t.true(data.platformAccounts[0].isPrimary);
  // connectedApps
  const consents = await s.db('oauth_consents').where('user_id', user.id).whereNull('revoked_at');
  t.is(consents.length, 1);
  t.deepEqual(
    data.connectedApps.map((c: any) => [c.id, c.clientId, c.scopes]),
    consents.map((c) => [c.id, c.client_id, c.scopes]),
  );
  // ownedApps
  const clients = await s.db('oauth_clients').where('user_id', user.id);
  t.is(clients.length, 2);
  t.deepEqual(sorted(data.ownedApps.map((c: any) => c.id)), sorted(clients.map((c) => c.id)));
  const mine = data.ownedApps.find((c: any) => c.id === reg.body.client.id);
  t.is(mine.name, 'My Export App');
  t.deepEqual(mine.redirectUris, ['https://app.example.test/cb']);
  t.is(mine.clientType, 'confidential');
  // apiKeys
  const keys = await s.db('api_keys').where('user_id', user.id);
  t.deepEqual(
    sorted(data.apiKeys.map((k: any) => `${k.id} ${k.keyPrefix} ${k.name} ${k.scopes.join(',')}`)),
    sorted(keys.map((k) => `${k.id} ${k.key_prefix} ${k.name} ${k.scopes.join(',')}`)),
  );
  // roles
  const roles = await s.db('roles').join('user_roles', 'user_roles.role_id', 'roles.id').where('user_id', user.id);
  t.deepEqual(
    data.roles.map((r: any) => r.id),
    roles.map((r) => r.role_id),
  );
  t.is(data.roles[0].name, 'User');
  // twoFactorAuth: enabled, ten codes left, never the secret
  const tfa = await s.db('user_two_factor').where('user_id', user.id).first();
  t.deepEqual(data.twoFactorAuth, {
    enabled: true,
    enabledAt: iso(tfa.enabled_at),
    backupCodesRemaining: backupCodes.length,
  });
  // deletionStatus
  t.deepEqual(data.deletionStatus, {
    isScheduledForDeletion: false,
    scheduledDeletionAt: null,
    isDeleted: false,
    deletedAt: null,
  });
  // exportLogs: the earlier export (this one is logged once delivered)
  t.deepEqual(data.exportLogs, [
    {
      id: earlier.id,
      exportedAt: iso(earlier.exported_at),
      ipAddress: '198.51.100.7',
      userAgent: 'curl/8',
      exportFormat: 'zip',
      fileSizeBytes: 1234,
      locale: 'en',
      createdAt: iso(earlier.created_at),
    },
  ]);
  // sessions: camelCase, IP partly masked, never the token
  const sessions = await s.db('sessions').where('user_id', user.id);
  t.is(sessions.length, 3);
  t.deepEqual(sorted(data.sessions.map((x: any) => x.id)), sorted(sessions.map((x) => x.id)));
  const byId = new Map(data.sessions.map((x: any) => [x.id, x]));
  const firefox: any = byId.get(other.session.id);
  t.is(firefox.ipAddress, '203.0.*.*');
  t.is(firefox.browserName, 'Firefox 120');
  t.is(firefox.deviceType, 'desktop');
  t.is(firefox.provider, 'email');
  t.is(firefox.expiresAt, iso(other.session.expires_at));
  t.is((byId.get(v6.session.id) as any).ipAddress, '2001:db8:85a3:*');
  // A session made without an address or user agent: strings, as in the session list (spec §2).
  const bare: any = byId.get(user.sessionId);
  t.is(bare.ipAddress, '');
  t.is(bare.userAgent, '');
  t.is(bare.browserName, 'Unknown');
  for (const x of data.sessions)
    t.deepEqual(sorted(Object.keys(x)), [
      'browserName',
      'createdAt',
      'deviceType',
      'expiresAt',
      'id',
      'ipAddress',
      'lastActivityAt',
      'osName',
      'provider',
      'providerName',
      'userAgent',
    ]);

  // No secret, and no hash of one, in any byte of the archive or the PDF's text.
  const pdf = files.get('report.pdf')!;
  const text = await pdfText(pdf);
  const haystacks = [res.body, ...files.values(), Buffer.from(text)];
  const secrets: Record<string, string> = {
    'api key': exporter.key,
    'other api key': tracker.key,
    'session token': user.token,
    'other session token': other.token,
    'client secret': clientSecret,
    'TOTP secret': totpSecret,
    'TOTP secret (encrypted)': tfa.secret_encrypted,
    'a backup code': backupCodes[0],
    'password hash': passwordHash,
    'full session IP': '203.0.113.45',
  };
  for (const k of keys) secrets[`key hash ${k.name}`] = k.key_hash;
  for (const x of sessions) secrets[`session hash ${x.id}`] = x.token_hash;
  for (const c of clients) if (c.client_secret_hash) secrets[`client secret hash ${c.id}`] = c.client_secret_hash;
  for (const [what, secret] of Object.entries(secrets))
    for (const h of haystacks) t.false(h.includes(secret), `${what} appears in the export`);

  // report.pdf: a PDF whose text names the user, with German headings and dates
  t.is(pdf.subarray(0, 5).toString(), '%PDF-');
  t.true(text.includes(user.username));
  for (const heading of [
    'Ihr persönlicher Datenexport',
    'Benutzerkonto',
    'Anmeldekonten',
    'Verbundene Anwendungen',
    'Eigene Anwendungen',
    'API-Schlüssel',
    'Rollen',
    'Zwei-Faktor-Authentifizierung',
    'Kontolöschung',
    'Frühere Exporte',
    'Aktive Sitzungen',
  ])
    t.true(text.includes(heading), `report lacks ${heading}`);
  t.true(text.includes(formatDate('de', data.exportInfo.exportedAt, { never: '' } as never)));
  t.false(text.includes('Active sessions'));

  // README.txt: German, names the files and explains every field of every section
  const readme = files.get('README.txt')!.toString('utf8');
  t.true(readme.startsWith('Persönlicher Datenexport'));
  for (const f of ['data.json', 'report.pdf', 'README.txt']) t.true(readme.includes(f));
  for (const section of SECTIONS) {
    t.true(readme.includes(`\n${section} (`), `README lacks section ${section}`);
    const sample = Array.isArray(data[section]) ? data[section][0] : data[section];
    for (const field of Object.keys(sample))
      t.true(readme.includes(`  - ${field}: `), `README lacks ${section}.${field}`);
  }

  // Logged and audited; the archive left Redis with the download.
  const logs = await s.request('GET', '/v1/user/export/logs', { token: exporter.key });
  t.is(logs.status, 200);
  t.is(logs.body.total, 2);
  t.false(logs.body.hasMore);
  t.like(logs.body.logs[0], {
    exportFormat: 'zip',
    fileSizeBytes: res.body.length,
    locale: 'de',
    userAgent: 'export-test/1.0',
    ipAddress: '127.0.0.1',
  });
  t.deepEqual(sorted(Object.keys(logs.body.logs[0])), [
    'createdAt',
    'exportFormat',
    'exportedAt',
    'fileSizeBytes',
    'id',
    'ipAddress',
    'locale',
    'userAgent',
  ]);
  const audit = await s.db('audit_events').where({ user_id: user.id, event_type: 'data_exported' });
  t.is(audit.length, 1);
  t.is(audit[0].status, 'success');
  t.is(audit[0].actor_id, user.id);
  t.is(audit[0].metadata.file_size_bytes, res.body.length);
  t.deepEqual(await archiveKeys(user.id), []);
});

test('two parallel exports of one user run one job and both receive its archive', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const [a, b] = await Promise.all([
    download(`${s.url}/v1/user/export`, user.token),
    download(`${s.url}/v1/user/export`, user.token),
  ]);
  t.is(a.status, 200, a.body.toString());
  t.is(b.status, 200, b.body.toString());
  t.true(a.body.equals(b.body));
  t.is((await completedJobs(user.id)).length, 1);
  // English for a user without a preferred locale.
  const files = await unzip(a.body);
  const text = await pdfText(files.get('report.pdf')!);
  t.true(text.includes('Your personal data export'));
  t.true(text.includes('Active sessions'));
  t.true(files.get('README.txt')!.toString().startsWith('Personal data export'));
  // Each download is logged; the archive is gone once both have it.
  t.is((await s.request('GET', '/v1/user/export/logs', { token: user.token })).body.total, 2);
  t.deepEqual(await archiveKeys(user.id), []);
  // A later export is a new job.
  t.is((await download(`${s.url}/v1/user/export`, user.token)).status, 200);
  t.is((await completedJobs(user.id)).length, 2);
});

test('a list longer than the report prints: its first entries, how many more, and all of them in data.json', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const extra = 40;
  // Sessions beyond the report's limit, written straight to the table (each one's token is never used).
  await s.db('sessions').insert(
    Array.from({ length: REPORT_LIST_LIMIT + extra }, (_, i) => ({
      user_id: user.id,
      token_hash: `bulk-${user.id}-${i}`,
      expires_at: new Date(Date.now() + 3600_000),
    })),
  );
  const res = await download(`${s.url}/v1/user/export`, user.token);
  t.is(res.status, 200, res.body.toString());
  const files = await unzip(res.body);
  const data = JSON.parse(files.get('data.json')!.toString());
  t.true(data.sessions.length > REPORT_LIST_LIMIT, `${data.sessions.length} sessions in data.json`);
  const text = await pdfText(files.get('report.pdf')!);
  const more = data.sessions.length - REPORT_LIST_LIMIT;
  t.true(text.replace(/\s+/g, ' ').includes(`and ${more} more, in data.json`), text.slice(-400));
});

test('the hourly limit answers 429 with Retry-After, counted atomically across parallel requests', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  // Each answer with the second it arrived (the 429s come long before the exports finish).
  const results = await Promise.all(
    Array.from({ length: 5 }, () =>
      download(`${s.url}/v1/user/export`, user.token).then((r) => ({ ...r, at: Math.floor(Date.now() / 1000) })),
    ),
  );
  const statuses = results.map((r) => r.status).sort();
  t.deepEqual(statuses, [200, 200, 200, 429, 429]);
  for (const r of results.filter((x) => x.status === 429)) {
    const retry = Number(r.headers.get('retry-after'));
    t.true(Number.isInteger(retry) && retry >= 1 && retry <= 3600, String(retry));
    const body = JSON.parse(r.body.toString());
    t.is(body.error, 'TooManyRequests');
    t.regex(body.message, /3 data exports per hour/);
    // The rate-limit headers are the export limit's, with a reset that agrees with Retry-After.
    t.is(r.headers.get('x-ratelimit-limit'), '3');
    t.is(r.headers.get('x-ratelimit-remaining'), '0');
    const reset = Number(r.headers.get('x-ratelimit-reset')) - r.at;
    t.true(Math.abs(reset - retry) <= 2, `reset in ${reset} s, Retry-After ${retry} s`);
    // The window is the clock hour: it ends at the next full hour, not an hour after the first export.
    const hourEnds = (Math.floor(r.at / 3600) + 1) * 3600 - r.at;
    t.true(Math.abs(hourEnds - retry) <= 2, `the hour ends in ${hourEnds} s, Retry-After ${retry} s`);
  }
  t.is((await download(`${s.url}/v1/user/export`, user.token)).status, 429);
  // Another user is not affected.
  const other = await createUser(s.db);
  t.is((await download(`${s.url}/v1/user/export`, other.token)).status, 200);
});

test('HEAD answers the headers of a download and runs nothing: no export, no count, no log, no audit', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  for (let i = 0; i < 5; i++) {
    const r = await fetch(`${s.url}/v1/user/export`, {
      method: 'HEAD',
      headers: { authorization: `Bearer ${user.token}` },
    });
    t.is(r.status, 200);
    t.is(r.headers.get('content-type'), 'application/zip');
    t.regex(
      r.headers.get('content-disposition') ?? '',
      /^attachment; filename="service-data-export-\d{4}-\d{2}-\d{2}\.zip"$/,
    );
    t.is(r.headers.get('cache-control'), 'no-store');
  }
  t.is((await s.db('export_logs').where('user_id', user.id)).length, 0);
  t.is((await s.db('audit_events').where({ user_id: user.id, event_type: 'data_exported' })).length, 0);
  t.deepEqual(await completedJobs(user.id), []);
  // Five HEADs later the hourly limit (3) is untouched.
  for (let i = 0; i < 3; i++) t.is((await download(`${s.url}/v1/user/export`, user.token)).status, 200);
  // HEAD still needs the credential GET needs.
  t.is((await fetch(`${s.url}/v1/user/export`, { method: 'HEAD' })).status, 401);
});

test('export logs: newest first, limit default 50 and clamped to 1-100, offset paging, hasMore', async (t) => {
  const s = stack();
  const user = await createUser(s.db);
  const base = Date.now() - 1000 * 3600_000;
  await s.db('export_logs').insert(
    Array.from({ length: 120 }, (_, i) => ({
      user_id: user.id,
      exported_at: new Date(base + i * 60_000),
      ip_address: '127.0.0.1',
      user_agent: `agent-${i}`,
      export_format: 'zip',
      file_size_bytes: 1000 + i,
      locale: 'en',
    })),
  );
  const other = await createUser(s.db);
  await s.db('export_logs').insert({
    user_id: other.id,
    exported_at: new Date(),
    export_format: 'zip',
    file_size_bytes: 1,
    locale: 'en',
  });
  const get = (q: string) => s.request('GET', `/v1/user/export/logs${q}`, { token: user.token });

  const def = await get('');
  t.is(def.status, 200);
  t.is(def.body.logs.length, 50);
  t.is(def.body.total, 120);
  t.true(def.body.hasMore);
  t.is(def.body.logs[0].userAgent, 'agent-119');
  t.is(def.body.logs[49].userAgent, 'agent-70');

  t.is((await get('?limit=0')).body.logs.length, 1);
  t.is((await get('?limit=-5')).body.logs.length, 1);
  t.is((await get('?limit=1000')).body.logs.length, 100);
  const last = await get('?limit=100&offset=100');
  t.is(last.body.logs.length, 20);
  t.false(last.body.hasMore);
  t.is(last.body.logs[19].userAgent, 'agent-0');
  t.is(last.body.logs[19].fileSizeBytes, 1000);
  const mid = await get('?limit=10&offset=110');
  t.deepEqual(
    mid.body.logs.map((l: any) => l.userAgent),
    Array.from({ length: 10 }, (_, i) => `agent-${9 - i}`),
  );
  t.false(mid.body.hasMore);
  t.true((await get('?limit=10&offset=109')).body.hasMore);
  const beyond = await get('?offset=500');
  t.deepEqual(beyond.body, { logs: [], total: 120, hasMore: false });

  const bad = await get('?limit=abc');
  t.is(bad.status, 400);
  t.regex(bad.body.message, /limit/);
  const neg = await get('?offset=-1');
  t.is(neg.status, 400);
  t.regex(neg.body.message, /offset/);
});

test.serial(
  'a Chromium killed mid-job: the job is retried with a fresh browser and the request still gets the ZIP',
  async (t) => {
    const s = stack();
    const user = await createUser(s.db);
    const renderer = sharedPdfRenderer({
      executablePath: s.config.chromiumPath,
      maxPages: s.config.dataExport.pdfMaxPages,
      logger: s.workers!.ctx.logger,
    });
    let killed: number | undefined;
    renderer.once('render', (page: { browser(): { process(): { pid?: number } | null } }) => {
      killed = page.browser().process()?.pid;
      if (killed) process.kill(killed, 'SIGKILL');
    });
    const worker = s.workers!.workers.find((w) => w.name === QueueName.dataExport)!;
    const failures: string[] = [];
    const onFailed = (job: { data: { userId: string } } | undefined, err: Error) => {
      if (job?.data.userId === user.id) failures.push(err.message);
    };
    worker.on('failed', onFailed);
    try {
      const res = await download(`${s.url}/v1/user/export`, user.token);
      t.is(res.status, 200, res.body.toString());
      t.truthy(killed);
      t.true(failures.length >= 1, 'the first attempt failed');
      const files = await unzip(res.body);
      t.true((await pdfText(files.get('report.pdf')!)).includes(user.username));
      const pid = await renderer.browserPid();
      t.truthy(pid);
      t.not(pid, killed);
      const [job] = await completedJobs(user.id);
      t.true((job.attemptsStarted ?? 0) >= 2, `attempts started: ${job.attemptsStarted}`);
    } finally {
      worker.off('failed', onFailed);
    }
  },
);
