import test from 'ava';
import { down, up } from '../../migrations/20261123000000_outbox_secrets';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

test('the outbox_secrets migration scrubs tokens from mails already sent, logged or failed, and keeps queued ones intact', async (t) => {
  const db = stack().db;
  await down(db);
  const body = (token: string) => `Reset here:\n\nhttps://app.example.test/auth/reset-password?token=${token}\n`;
  const html = (token: string) =>
    `<p><a href="https://app.example.test/auth/reset-password?token=${token}">link</a></p>`;
  const rows = await db('email_outbox')
    .insert(
      (['sent', 'logged', 'failed', 'queued'] as const).map((status, i) => ({
        to_address: `mig${i}@example.test`,
        subject: 'Reset your password',
        text_body: body(`tok${i}_Abc-123`),
        html_body: html(`tok${i}_Abc-123`),
        template: 'password_reset',
        status,
      })),
    )
    .returning(['id', 'status']);
  await up(db);
  for (const [i, row] of rows.entries()) {
    const after = await db('email_outbox').where('id', row.id).first();
    const expected = row.status === 'queued' ? `tok${i}_Abc-123` : 'REDACTED';
    t.is(after.text_body, body(expected), row.status);
    t.is(after.html_body, html(expected), row.status);
    t.is(after.token_sealed, null);
  }
});
