import { randomBytes, randomUUID } from 'node:crypto';
import { sha256 } from '../../shared/crypto';
import type { Knex } from 'knex';
import { createApiKey } from '../../shared/commands/apiKeys';
import { createSession } from '../../shared/commands/sessions';
import { hashPassword } from '../../shared/domain/passwords';
import { ApiKey } from '../../shared/models/ApiKey';

export interface TestUser {
  id: string;
  username: string;
  email: string;
  token: string;
  sessionId: string;
}

let counter = 0;

/** A user with an email platform account, the given roles and a live session token. */
export async function createUser(
  db: Knex,
  opts: { roles?: string[]; username?: string; email?: string; password?: string } = {},
): Promise<TestUser> {
  const n = `${Date.now().toString(36)}${(counter++).toString(36)}${randomBytes(2).toString('hex')}`;
  const username = opts.username ?? `user_${n}`.slice(0, 30);
  const email = opts.email ?? `${username}@example.test`;
  const [user] = await db('users').insert({ username }).returning('id');
  const platform = await db('platforms').where('slug', 'email').first('id');
  const [account] = await db('platform_accounts')
    .insert({
      user_id: user.id,
      platform_id: platform.id,
      platform_user_id: email,
      is_oauth: false,
      is_primary: true,
      username,
      email,
      email_verified_at: new Date(),
      // A password to sign in with, hashed as registration stores it.
      ...(opts.password === undefined ? {} : { password_hash: await hashPassword(opts.password) }),
    })
    .returning('id');
  await db('users').where('id', user.id).update({ primary_platform_account_id: account.id });
  const roles = opts.roles ?? ['role_user'];
  if (roles.length) await db('user_roles').insert(roles.map((role_id) => ({ user_id: user.id, role_id })));
  const { session, token } = await createSession(db, user.id, new Date(Date.now() + 3600_000), {
    platformSlug: 'email',
  });
  return { id: user.id, username, email, token, sessionId: session.id };
}

/** An API key owned by `userId` with the given scopes (full key returned). */
export async function createKey(opts: {
  userId: string | null;
  scopes?: string[];
  system?: boolean;
  expiresAt?: Date;
  name?: string;
}): Promise<{ id: string; key: string }> {
  const { apiKey, key } = await createApiKey(
    {
      userId: opts.userId,
      name: opts.name ?? 'test key',
      scopes: opts.scopes ?? [],
      isSystem: opts.system,
      expiresAt: opts.expiresAt,
    },
    ApiKey.knex(),
  );
  return { id: apiKey.id, key };
}

/**
 * An OAuth access token of `userId` for a fresh client owned by the user, granted `scopes` (the
 * client allows exactly those): what an app holds after the authorization-code flow.
 */
export async function createOAuthToken(
  db: Knex,
  userId: string,
  scopes: string[],
): Promise<{ token: string; clientId: string; tokenId: string }> {
  const [client] = await db('oauth_clients')
    .insert({ user_id: userId, name: `App ${randomBytes(3).toString('hex')}`, allowed_scopes: JSON.stringify(scopes) })
    .returning('id');
  const token = `oat_${randomBytes(32).toString('base64url')}`;
  const [row] = await db('oauth_access_tokens')
    .insert({
      token_hash: sha256(token),
      client_id: client.id,
      user_id: userId,
      scopes: JSON.stringify(scopes),
      family_id: randomUUID(),
      expires_at: new Date(Date.now() + 3600_000),
    })
    .returning('id');
  await db('oauth_consents').insert({ user_id: userId, client_id: client.id, scopes: JSON.stringify(scopes) });
  return { token, clientId: client.id, tokenId: row.id };
}

/**
 * `count` GPS points of one device (and trip, when given), one minute apart from 2026-01-01 and
 * 0.001° of latitude apart, straight into the table.
 */
export async function insertTrackPoints(
  db: Knex,
  count: number,
  where: { device_id: string; trip_id?: string },
): Promise<void> {
  const t0 = Date.UTC(2026, 0, 1);
  await db('gps_points').insert(
    Array.from({ length: count }, (_, i) => ({
      ...where,
      latitude: 52 + i / 1000,
      longitude: 13,
      timestamp: new Date(t0 + i * 60_000),
      speed_kmh: 1,
      speed_mps: 0.28,
      speed_mph: 0.62,
      speed_knots: 0.54,
    })),
  );
}
