import test from 'ava';
import { up } from '../../migrations/20261215000000_used_token_payloads';
import { useStack } from '../helpers/stack';

const stack = useStack(test);

test('the used_token_payloads migration empties the payload of used tokens and keeps open ones intact', async (t) => {
  const db = stack().db;
  const payload = { password_hash: '$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA', username: 'mig_user', locale: null };
  const expires = new Date(Date.now() + 3600_000);
  const [used, open] = await db('account_tokens')
    .insert([
      {
        token_hash: 'a'.repeat(64),
        purpose: 'registration',
        email: 'mig-used@example.test',
        payload,
        expires_at: expires,
        used_at: new Date(),
      },
      {
        token_hash: 'b'.repeat(64),
        purpose: 'registration',
        email: 'mig-open@example.test',
        payload,
        expires_at: expires,
      },
    ])
    .returning('id');
  await up(db);
  t.deepEqual((await db('account_tokens').where('id', used.id).first()).payload, {});
  t.deepEqual((await db('account_tokens').where('id', open.id).first()).payload, payload);
});
