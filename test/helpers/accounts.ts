import type { TestFn } from 'ava';
import type { Knex } from 'knex';
import { issueAccountToken } from '../../shared/commands/accountTokens';
import { transaction } from '../../shared/db';
import { useStack, Stack } from './stack';
import { Mailbox, startMailbox } from './mailbox';

/**
 * A stack with in-process workers whose email queue delivers to a real SMTP receiver started
 * for the file. Anonymous rate limits are raised: these files sign in anonymously many times.
 */
export function useAccountsStack(
  test: TestFn,
  extraEnv: Record<string, string> = {},
): { stack: () => Stack; mailbox: () => Mailbox } {
  let box: Mailbox | undefined;
  const env: Record<string, string> = {
    RATE_LIMIT_ANONYMOUS: '100000',
    // Tests register many accounts from one address; registrationThrottle.test.ts sets its own.
    RATE_LIMIT_REGISTER: '100000',
    APP_URL: 'https://app.example.test',
    ...extraEnv,
  };
  test.before(async () => {
    box = await startMailbox();
    env.SMTP_URL = box.url;
  });
  const stack = useStack(test, { env, workers: true });
  test.after.always(async () => {
    await box?.close();
  });
  return {
    stack,
    mailbox: () => {
      if (!box) throw new Error('mailbox not started');
      return box;
    },
  };
}

let n = 0;
/** A fresh address per call. */
export function freshEmail(tag = 'u'): string {
  return `${tag}.${Date.now().toString(36)}${(n++).toString(36)}${Math.random().toString(36).slice(2, 6)}@example.test`;
}

/**
 * The whole stored row (every column, JSON-encoded) of the newest `template` mail to `to`, once the
 * worker has marked it sent: what someone reading the database would see.
 */
export async function sentOutboxRow(db: Knex, to: string, template: string, ms = 10_000): Promise<string> {
  const deadline = Date.now() + ms;
  for (;;) {
    const row = await db('email_outbox')
      .where({ to_address: to.toLowerCase(), template })
      .orderBy('created_at', 'desc')
      .first();
    if (row?.status === 'sent') return JSON.stringify(row);
    if (Date.now() > deadline)
      throw new Error(`outbox row ${template} to ${to} not sent within ${ms} ms: ${JSON.stringify(row)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A password reset token for `user`'s email account, issued as the passwordResets job issues the mailed one. */
export async function passwordResetToken(db: Knex, user: { id: string; email: string }): Promise<string> {
  const account = await db('platform_accounts').where({ user_id: user.id }).first('id');
  const { token } = await transaction(db, (trx) =>
    issueAccountToken(trx, {
      purpose: 'password_reset',
      userId: user.id,
      email: user.email,
      payload: { platform_account_id: account.id },
    }),
  );
  return token;
}
