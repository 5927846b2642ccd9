import test, { type ExecutionContext } from 'ava';
import type { Knex } from 'knex';
import { issueAccountToken } from '../../shared/commands/accountTokens';
import { createSession } from '../../shared/commands/sessions';
import { transaction } from '../../shared/db';
import { freshEmail, sentOutboxRow, useAccountsStack } from '../helpers/accounts';
import { createUser } from '../helpers/factories';
import { tokenOf } from '../helpers/mailbox';

/**
 * What is left of an account's secrets and personal data: a used one-time token keeps no password
 * hash (nor the rest of its payload), and the purge of an account that changed its address leaves
 * no row with the old address, the new one, the username or the password hash.
 */
const { stack, mailbox } = useAccountsStack(test);

const PASSWORD = 'correct horse battery';

/** Every `table.column` of the schema's tables whose text holds `needle` (any case). */
async function columnsHolding(db: Knex, needle: string): Promise<string[]> {
  const columns: Array<{ table_name: string; column_name: string }> = await db('information_schema.columns as c')
    .join('information_schema.tables as t', function () {
      this.on('t.table_schema', 'c.table_schema').andOn('t.table_name', 'c.table_name');
    })
    .where('c.table_schema', db.raw('current_schema()'))
    .where('t.table_type', 'BASE TABLE')
    .whereIn('c.data_type', ['text', 'character varying', 'character', 'json', 'jsonb', 'ARRAY', 'USER-DEFINED'])
    .select('c.table_name', 'c.column_name');
  const found: string[] = [];
  for (const { table_name, column_name } of columns) {
    const hit = await db(table_name)
      .whereRaw('strpos(lower(??::text), lower(?)) > 0', [column_name, needle])
      .first(db.raw('1 AS hit'));
    if (hit) found.push(`${table_name}.${column_name}`);
  }
  return found;
}

/** register → mailed link → register/verify; returns the new user's id. */
async function registerAndVerify(t: ExecutionContext, email: string, username: string): Promise<string> {
  const s = stack();
  const r = await s.request('POST', '/v1/auth/register', { body: { email, password: PASSWORD, username } });
  t.is(r.status, 202, r.text);
  const token = tokenOf(await mailbox().waitFor(email));
  const v = await s.request('POST', '/v1/auth/register/verify', { body: { token } });
  t.is(v.status, 201, v.text);
  t.is(v.body.data.username, username);
  await sentOutboxRow(s.db, email, 'registration');
  return v.body.data.id as string;
}

/** Signs in with the email and password; returns the session token. */
async function signIn(t: ExecutionContext, email: string): Promise<string> {
  const login = await stack().request('POST', '/v1/auth/login', { body: { email, password: PASSWORD } });
  t.is(login.status, 200, login.text);
  return login.body.session.sessionToken as string;
}

/** Email change through the mailed link: request-change → mail → email/verify. */
async function changeEmail(t: ExecutionContext, userId: string, token: string, to: string): Promise<void> {
  const s = stack();
  const asked = await s.request('POST', `/v1/users/${userId}/email/request-change`, { token, body: { email: to } });
  t.is(asked.status, 200, asked.text);
  const link = tokenOf(await mailbox().waitFor(to));
  const verified = await s.request('POST', '/v1/users/email/verify', { token, body: { token: link } });
  t.is(verified.status, 200, verified.text);
  await sentOutboxRow(s.db, to, 'email_change');
}

/** The user deletes their account, then an administrator purges it at once. */
async function deleteAndPurge(t: ExecutionContext, userId: string, token: string): Promise<void> {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  t.is((await s.request('DELETE', '/v1/users/me', { token })).status, 200);
  const r = await s.request('POST', `/v1/admin/users/${userId}/force-delete`, {
    token: admin.token,
    body: { reason: 'purge test' },
  });
  t.is(r.status, 200, r.text);
  t.falsy(await s.db('users').where('id', userId).first());
}

const uniqueName = (tag: string) => `${tag}_${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;

test('a used registration token keeps no password hash and no username', async (t) => {
  const s = stack();
  const email = freshEmail('used-reg');
  const username = uniqueName('usedreg');
  const userId = await registerAndVerify(t, email, username);
  const hash = (await s.db('platform_accounts').where('user_id', userId).first('password_hash')).password_hash;
  t.regex(hash, /^\$argon2id\$/);
  const rows = await s.db('account_tokens').where({ purpose: 'registration', email });
  t.is(rows.length, 1);
  t.truthy(rows[0].used_at);
  t.is(rows[0].payload.password_hash, undefined);
  t.false(JSON.stringify(rows[0]).includes(hash));
  t.false(JSON.stringify(rows[0]).includes(username));
});

test('a used email-link token keeps no password hash', async (t) => {
  const s = stack();
  const signUp = await s.request('POST', '/v1/users/oauth', {
    token: s.systemKey,
    body: {
      email: freshEmail('prov'),
      name: 'Prov Link',
      oauthProvider: 'github',
      oauthProviderId: `gh-purge-${Date.now()}-${Math.random()}`,
    },
  });
  t.is(signUp.status, 200, signUp.text);
  const userId = signUp.body.data.id as string;
  const { token } = await createSession(s.db, userId, new Date(Date.now() + 3600_000), { platformSlug: 'github' });
  const email = freshEmail('link');
  const asked = await s.request('POST', `/v1/users/${userId}/email-link/request`, {
    token,
    body: { email, password: PASSWORD },
  });
  t.is(asked.status, 200, asked.text);
  const link = tokenOf(await mailbox().waitFor(email));
  const verified = await s.request('POST', '/v1/users/email-link/verify', { token, body: { token: link } });
  t.is(verified.status, 200, verified.text);
  const hash = (await s.db('platform_accounts').where({ user_id: userId, email }).first('password_hash')).password_hash;
  t.regex(hash, /^\$argon2id\$/);
  const row = await s.db('account_tokens').where({ purpose: 'email_link', user_id: userId }).first();
  t.truthy(row.used_at);
  t.is(row.payload.password_hash, undefined);
  t.false(JSON.stringify(row).includes(hash));
});

test('register → verify → change email → purge: no row keeps the old address, the new one, the username or the hash', async (t) => {
  const s = stack();
  const oldEmail = freshEmail('purge-old');
  const newEmail = freshEmail('purge-new');
  const username = uniqueName('purged');
  const userId = await registerAndVerify(t, oldEmail, username);
  const hash = (await s.db('platform_accounts').where('user_id', userId).first('password_hash')).password_hash;
  const session = await signIn(t, oldEmail);
  await changeEmail(t, userId, session, newEmail);
  // Before the purge every one of them is somewhere: the search below finds what it looks for.
  t.not((await columnsHolding(s.db, oldEmail)).length, 0);
  t.not((await columnsHolding(s.db, username)).length, 0);
  await deleteAndPurge(t, userId, session);
  t.deepEqual(await columnsHolding(s.db, oldEmail), [], 'the old address');
  t.deepEqual(await columnsHolding(s.db, newEmail), [], 'the new address');
  t.deepEqual(await columnsHolding(s.db, username), [], 'the username');
  t.deepEqual(await columnsHolding(s.db, hash), [], 'the password hash');
});

test('rows of a given-up address that name no user are found through the audit trail; a later holder keeps theirs', async (t) => {
  const s = stack();
  const oldEmail = freshEmail('legacy-old');
  const userId = await registerAndVerify(t, oldEmail, uniqueName('legacy'));
  const session = await signIn(t, oldEmail);
  // As rows written before registrations were tied to the user they created: no user named.
  await s.db('account_tokens').where({ purpose: 'registration', email: oldEmail }).update({ user_id: null });
  await s.db('email_outbox').where({ to_address: oldEmail, template: 'registration' }).update({ user_id: null });
  await changeEmail(t, userId, session, freshEmail('legacy-new'));
  // The address is free again: someone else starts a registration with it.
  const later = await transaction(s.db, (trx) =>
    issueAccountToken(trx, { purpose: 'registration', userId: null, email: oldEmail, payload: {} }),
  );
  const [laterMail] = await s
    .db('email_outbox')
    .insert({ to_address: oldEmail, subject: 's', text_body: 't', template: 'registration', status: 'sent' })
    .returning('id');
  await deleteAndPurge(t, userId, session);
  t.deepEqual(
    await s.db('account_tokens').where('email', oldEmail).pluck('id'),
    [later.row.id],
    'only the later registration token is left',
  );
  t.deepEqual(
    await s.db('email_outbox').where('to_address', oldEmail).pluck('id'),
    [laterMail.id],
    'only the later registration mail is left',
  );
});
