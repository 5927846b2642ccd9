import test from 'ava';
import { startChatBot } from '../helpers/chatBot';
import { createUser } from '../helpers/factories';
import { useStack } from '../helpers/stack';
import { fixture } from './fixtures';

const stack = useStack(test, { realtime: 1 });

test.serial('linking, permission changes and unlinking of chat accounts reach the bot (protobuf 80-82)', async (t) => {
  const s = stack();
  const admin = await createUser(s.db, { roles: ['role_admin'] });
  const user = await createUser(s.db, { roles: ['role_user'] });
  const other = await createUser(s.db, { roles: ['role_user'] });
  const bot = await startChatBot(s, fixture);
  try {
    // A chat sign-in whose verified email belongs to a user links the chat account to that user.
    const signin = await s.request('POST', '/v1/users/oauth', {
      token: s.systemKey,
      body: {
        email: user.email,
        name: 'alice_chat',
        oauthProvider: 'chat',
        oauthProviderId: '5550001',
        image: 'https://cdn.example.test/a.png',
      },
    });
    t.is(signin.status, 200);
    const linked = await bot.waitFor((e) => e.event === 'chat_user_linked' && e.chatId === '5550001');
    t.like(linked, { userId: user.id, chatUsername: 'alice_chat', avatarUrl: 'https://cdn.example.test/a.png' });
    t.truthy(Date.parse(linked.timestamp));

    // A chat sign-in of someone unknown creates a user with the chat account: linked too.
    const created = await s.request('POST', '/v1/users/oauth', {
      token: s.systemKey,
      body: { email: null, name: 'newcomer', oauthProvider: 'chat', oauthProviderId: '5550002' },
    });
    t.is(created.status, 200);
    t.like(await bot.waitFor((e) => e.event === 'chat_user_linked' && e.chatId === '5550002'), {
      userId: created.body.data.id,
      chatUsername: 'newcomer',
    });
    // A repeated sign-in of a linked account is a login, not a link.
    await s.request('POST', '/v1/users/oauth', {
      token: s.systemKey,
      body: { email: user.email, name: 'alice_chat', oauthProvider: 'chat', oauthProviderId: '5550001' },
    });

    // A role change of a user with a chat account: ChatPermissionChanged with the new permissions.
    const other1 = await s.request('POST', `/v1/users/${other.id}/roles`, {
      token: admin.token,
      body: { role_id: 'role_moderator' },
    });
    t.is(other1.status, 201);
    const grant = await s.request('POST', `/v1/users/${user.id}/roles`, {
      token: admin.token,
      body: { role_id: 'role_moderator' },
    });
    t.is(grant.status, 201);
    const changed = await bot.waitFor((e) => e.event === 'chat_permission_changed' && e.userId === user.id);
    t.is(changed.chatId, '5550001');
    t.true(changed.permissions.includes('chat:read'));
    t.true(changed.permissions.includes('users:ban'));
    // Users without a chat account are none of the bot's business.
    t.false(bot.events.some((e) => e.event === 'chat_permission_changed' && e.userId === other.id));

    // Unlinking the chat account (the user themself; the email account stays primary).
    const account = await s
      .db('platform_accounts as pa')
      .join('platforms as p', 'p.id', 'pa.platform_id')
      .where({ 'pa.user_id': user.id, 'p.slug': 'chat' })
      .first('pa.id');
    const unlink = await s.request('DELETE', `/v1/users/${user.id}/accounts/${account.id}`, { token: user.token });
    t.is(unlink.status, 204);
    t.like(await bot.waitFor((e) => e.event === 'chat_user_unlinked' && e.chatId === '5550001'), {
      userId: user.id,
    });
    // Linked / unlinked events went out once each.
    t.is(bot.events.filter((e) => e.event === 'chat_user_linked' && e.chatId === '5550001').length, 1);
  } finally {
    await bot.stop();
  }
});
