import test from 'ava';
import { emailJobId } from '../../shared/queues';
import { RunningWorkers, startWorkers } from '../../workers/index';
import { freshEmail } from '../helpers/accounts';
import { createUser } from '../helpers/factories';
import { Mailbox, startMailbox, tokenOf } from '../helpers/mailbox';
import { startStack, Stack } from '../helpers/stack';
import { eventually } from '../helpers/wait';

// SMTP_URL names a port nobody listens on until the outage test starts the receiver there. Retries
// are milliseconds apart (EMAIL_RETRY_*), so attempts well past the old limit of 5 come quickly;
// "time passing" for a link's expiry is its row's deliver_until moved into the past.
let port: number;
let box: Mailbox | undefined;
let s: Stack;
let workers: RunningWorkers | undefined;

test.before(async () => {
  const probe = await startMailbox();
  port = Number(new URL(probe.url).port);
  await probe.close();
  s = await startStack({
    env: {
      SMTP_URL: `smtp://127.0.0.1:${port}`,
      APP_URL: 'https://app.example.test',
      RATE_LIMIT_ANONYMOUS: '100000',
      EMAIL_RETRY_DELAY_MS: '5',
      EMAIL_RETRY_MAX_DELAY_MS: '40',
    },
  });
  workers = await startWorkers(s.config, { schedule: false });
});

test.after.always(async () => {
  await workers?.close();
  await s?.close();
  await box?.close();
});

const outboxRow = (to: string, template: string) =>
  s.db('email_outbox').where({ to_address: to.toLowerCase(), template }).orderBy('created_at', 'desc').first();

/** The row once it has failed `attempts` times and still waits for delivery with its sealed token. */
const stillWaiting = (to: string, template: string, attempts: number) =>
  eventually(async () => {
    const row = await outboxRow(to, template);
    return row?.status === 'queued' && row.attempts >= attempts && row.token_sealed ? row : undefined;
  }, 30_000);

test.serial('a mail whose link expires while SMTP is down ends failed, its sealed token dropped', async (t) => {
  const user = await createUser(s.db);
  t.is((await s.request('POST', '/v1/auth/reset-password/request', { body: { email: user.email } })).status, 202);
  // Past the old 5 attempts, the mail still waits with its token.
  const waiting = await stillWaiting(user.email, 'password_reset', 6);
  t.regex(waiting.last_error, /ECONNREFUSED/);
  const token = await s.db('account_tokens').where({ purpose: 'password_reset', user_id: user.id }).first();
  t.is(new Date(waiting.deliver_until).getTime(), new Date(token.expires_at).getTime());

  await s
    .db('email_outbox')
    .where({ id: waiting.id })
    .update({ deliver_until: s.db.raw("now() - interval '1 second'") });
  const failed = await eventually(async () => {
    const row = await outboxRow(user.email, 'password_reset');
    return row.status === 'failed' ? row : undefined;
  }, 10_000);
  t.is(failed.token_sealed, null);
  t.regex(failed.last_error, /^not delivered before .*; last error: .*ECONNREFUSED/);
  t.true(failed.text_body.includes('token=REDACTED'));
});

test.serial(
  'SMTP down past the old retry window and across a worker restart: the mail arrives once it is back, with a working link',
  async (t) => {
    const email = freshEmail('outage');
    const r = await s.request('POST', '/v1/auth/register', { body: { email, password: 'correct horse battery' } });
    t.is(r.status, 202, r.text);
    await stillWaiting(email, 'registration', 3);
    // The pending retry is a delayed BullMQ job in Redis: a new worker process picks it up.
    await workers?.close();
    workers = await startWorkers(s.config, { schedule: false });
    const waiting = await stillWaiting(email, 'registration', 8);
    const stored = await s.db('account_tokens').where({ purpose: 'registration', email }).first();
    t.is(new Date(waiting.deliver_until).getTime(), new Date(stored.expires_at).getTime());

    box = await startMailbox(port);
    const mail = await box.waitFor(email, undefined, 20_000);
    t.regex(mail.text, /^https:\/\/app\.example\.test\/auth\/register\/verify\?token=/m);
    const verified = await s.request('POST', '/v1/auth/register/verify', { body: { token: tokenOf(mail) } });
    t.is(verified.status, 201, verified.text);
    const sent = await eventually(async () => {
      const row = await outboxRow(email, 'registration');
      return row.status === 'sent' ? row : undefined;
    });
    t.is(sent.token_sealed, null);
    t.true(sent.attempts > 8);
  },
);

test.serial('a permanent SMTP rejection (5xx) fails the mail at once and drops its token', async (t) => {
  box ??= await startMailbox(port);
  box.failCode = 550;
  box.failNext = 1;
  try {
    const user = await createUser(s.db);
    t.is((await s.request('POST', '/v1/auth/reset-password/request', { body: { email: user.email } })).status, 202);
    const failed = await eventually(async () => {
      const row = await outboxRow(user.email, 'password_reset');
      return row?.status === 'failed' ? row : undefined;
    }, 10_000);
    t.is(failed.attempts, 1);
    t.is(failed.token_sealed, null);
    t.regex(failed.last_error, /550/);
  } finally {
    box.failCode = 451;
    box.failNext = 0;
  }
});

test.serial('the requeue sweep gives a queued mail whose job is gone, or finished, a new one', async (t) => {
  box ??= await startMailbox(port);
  // A: its job was lost (say, with Redis's data). B: its job finished while the row was not queued.
  const [a, b] = await s
    .db('email_outbox')
    .insert([
      { to_address: 'lost-job@example.test', subject: 'Lost job', text_body: 'a', template: 'test' },
      { to_address: 'done-job@example.test', subject: 'Done job', text_body: 'b', template: 'test', status: 'sent' },
    ])
    .returning('id');
  const skipped = await s.api.services.queues.enqueueAndWait('email', { outboxId: b.id }, 10_000, {
    jobId: emailJobId(b.id),
  });
  t.deepEqual(skipped, { skipped: true });
  await s.db('email_outbox').where({ id: b.id }).update({ status: 'queued' });
  // Both were written over a minute ago: the sweep leaves younger rows to the side-effect relay.
  await s
    .db('email_outbox')
    .whereIn('id', [a.id, b.id])
    .update({ created_at: s.db.raw("now() - interval '2 minutes'") });

  const result = await s.api.services.queues.enqueueAndWait<'scheduled', { queued: number; requeued: number }>(
    'scheduled',
    { task: 'requeueEmails' },
    10_000,
  );
  t.true(result.requeued >= 2, JSON.stringify(result));
  t.is((await box.waitFor('lost-job@example.test')).subject, 'Lost job');
  t.is((await box.waitFor('done-job@example.test')).subject, 'Done job');
  await eventually(async () => (await s.db('email_outbox').where({ id: a.id }).first()).status === 'sent');
  t.pass();
});
