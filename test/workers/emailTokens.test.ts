import test from 'ava';
import { issuePasswordReset } from '../../shared/commands/emailFlows';
import { RunningWorkers, startWorkers } from '../../workers/index';
import { Mailbox, startMailbox, tokenOf } from '../helpers/mailbox';
import { sentOutboxRow } from '../helpers/accounts';
import { createUser } from '../helpers/factories';
import { startStack, Stack } from '../helpers/stack';

// The workers start inside the first test, so a mail can be looked at while it is pending. They
// stay up until the end: closing them destroys the database handle Objection's models are bound to.
let box: Mailbox;
let s: Stack;
let workers: RunningWorkers | undefined;

test.before(async () => {
  box = await startMailbox();
  s = await startStack({ env: { SMTP_URL: box.url, APP_URL: 'https://app.example.test' } });
});

test.after.always(async () => {
  await workers?.close();
  await s?.close();
  await box?.close();
});

const outboxRow = (to: string) => s.db('email_outbox').where({ to_address: to, template: 'password_reset' }).first();

test.serial(
  'a pending token mail holds no raw token; the sent mail carries a working link, the sent row no token',
  async (t) => {
    const user = await createUser(s.db);
    // What the passwordResets job does for the request, run here so no worker sends the mail yet.
    t.true(await issuePasswordReset(s.api.services, user.email, {}));
    const pending = await outboxRow(user.email);
    t.is(pending.status, 'queued');
    workers = await startWorkers(s.config, { schedule: false });
    const mail = await box.waitFor(user.email);
    const token = tokenOf(mail);
    t.false(JSON.stringify(pending).includes(token));
    t.true(mail.html.includes(`reset-password?token=${token}`));
    t.false((await sentOutboxRow(s.db, user.email, 'password_reset')).includes(token));
    const reset = await s.request('POST', '/v1/auth/reset-password/confirm', {
      body: { token, password: 'brand-new-pass-1' },
    });
    t.is(reset.status, 200, reset.text);
  },
);

test.serial(
  'a refused delivery is retried with the token still available, and the row never holds it in clear',
  async (t) => {
    const user = await createUser(s.db);
    box.failNext = 1;
    workers ??= await startWorkers(s.config, { schedule: false });
    t.is((await s.request('POST', '/v1/auth/reset-password/request', { body: { email: user.email } })).status, 202);
    let failed = await outboxRow(user.email);
    for (let i = 0; i < 200 && !failed?.last_error; i++) {
      await new Promise((r) => setTimeout(r, 50));
      failed = await outboxRow(user.email);
    }
    t.is(failed.status, 'queued');
    t.is(failed.attempts, 1);
    const mail = await box.waitFor(user.email, undefined, 20_000);
    const token = tokenOf(mail);
    t.false(JSON.stringify(failed).includes(token));
    t.false((await sentOutboxRow(s.db, user.email, 'password_reset')).includes(token));
    t.is(
      (await s.request('POST', '/v1/auth/reset-password/confirm', { body: { token, password: 'brand-new-pass-2' } }))
        .status,
      200,
    );
  },
);
