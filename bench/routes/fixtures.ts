import type { Knex } from 'knex';
import { randomToken, sha256 } from '../../shared/crypto';
import { API_KEY_PREFIX, keyPrefixOf } from '../../shared/commands/apiKeys';
import { SESSION_PREFIX } from '../../shared/auth/credentialSources';
import { createVerifiedEmailUser } from '../../shared/commands/users';
import { transaction } from '../../shared/db';
import { hashPassword } from '../../shared/domain/passwords';

/**
 * The data bench:routes reads and writes, seeded in bulk (INSERT … SELECT generate_series, or one
 * INSERT … SELECT unnest(…) of values made here when the benchmark needs the secret, e.g. a session
 * token, whose hash alone is stored). Every table a list route reads gets `rows` rows, and
 * gps_points gets `gpsPoints`, so a list's cost is measured at the size the targets name.
 *
 * Who is who: `bench_admin` (role_admin, `*:*`) calls most routes with a session; `bench_fleet`
 * (role_developer) owns one tracker API key per device (linked to it, scopes gps:write and
 * gps:read), so POST /v1/gps speaks for a different device with each key; `bench_u<n>` are plain
 * users, each with an email account, a session, a lifted ban and an OAuth client they consented to.
 */
export interface Fixtures {
  adminId: string;
  adminEmail: string;
  /** A session token of the super admin: the credential of most routes. */
  adminToken: string;
  /** An API key of the admin with scope gps:read (GET /v1/gps/current is what trackers and dashboards poll with keys). */
  gpsReadKey: string;
  /** Tracker keys (each linked to its own device), for the GPS writes. */
  trackerKeys: string[];
  /** Samples of ids (and other path values) per resource, rotated through by the load. */
  sample: {
    users: string[];
    emails: string[];
    sessionTokens: string[];
    /** A platform account of each sampled user, in the same order. */
    accounts: string[];
    devices: string[];
    trips: string[];
    locations: string[];
    /** A contact of each sampled location, in the same order. */
    contacts: string[];
    geofences: string[];
    categories: string[];
    templates: string[];
    roles: string[];
    permissions: string[];
    apiKeys: string[];
    oauthClients: string[];
    gpsPoints: string[];
    platforms: string[];
    settings: string[];
    systemConfig: string[];
    integrations: string[];
    chatGuilds: string[];
    chatGuildUuids: string[];
    chatMembers: string[];
  };
  /** Row counts per table after seeding (what the report states). */
  counts: Record<string, number>;
}

export interface FixtureOptions {
  rows: number;
  gpsPoints: number;
  /** How many distinct values of each path parameter the load rotates through. */
  sample: number;
  /** How many devices POST /v1/gps rotates through (tracker keys returned). */
  trackers: number;
}

/** Rows per INSERT of values made here. */
const CHUNK = 5000;

/** About `n` evenly spaced picks over the ids in id order (uuids: a spread over the whole table), chosen in SQL. */
async function pick(db: Knex, table: string, n: number, where?: (q: Knex.QueryBuilder) => void): Promise<string[]> {
  const inner = db(table).select(
    'id',
    db.raw('row_number() OVER (ORDER BY id) - 1 AS r'),
    db.raw('count(*) OVER () AS c'),
  );
  if (where) where(inner);
  const { rows } = await db.raw<{ rows: Array<{ id: string }> }>(
    'SELECT id FROM (?) x WHERE r % greatest(1, c / ?::int) = 0 ORDER BY id LIMIT ?::int',
    [inner, n, n],
  );
  return rows.map((r) => r.id);
}

async function newUserWithEmail(db: Knex, username: string, role: string): Promise<{ id: string; email: string }> {
  const email = `${username}@example.test`;
  // The same command registration uses: a verified email account, primary, with its password hash.
  const { user } = await transaction(db, async (trx) =>
    createVerifiedEmailUser(trx, { email, username, passwordHash: await hashPassword(`${username}-password`) }),
  );
  await db('user_roles').insert({ user_id: user.id, role_id: role });
  return { id: user.id, email };
}

/** Session rows for `userIds` (one each, in order); returns the tokens. Expire in a week. */
export async function insertSessions(db: Knex, userIds: string[]): Promise<string[]> {
  const tokens = userIds.map(() => randomToken(SESSION_PREFIX, 32));
  for (let i = 0; i < tokens.length; i += CHUNK) {
    await db.raw(
      `INSERT INTO sessions (token_hash, user_id, expires_at, platform_slug)
       SELECT h, u, now() + interval '7 days', 'email' FROM unnest(?::text[], ?::uuid[]) AS t(h, u)`,
      [tokens.slice(i, i + CHUNK).map(sha256), userIds.slice(i, i + CHUNK)],
    );
  }
  return tokens;
}

/** Row counts of the tables the fixtures fill (compared after the run: writes must leave them as seeded). */
export async function tableCounts(db: Knex): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const t of [
    'users',
    'sessions',
    'api_keys',
    'devices',
    'trips',
    'gps_points',
    'locations',
    'location_contacts',
    'geofences',
    'trip_categories',
    'trip_templates',
    'roles',
    'oauth_clients',
    'oauth_consents',
    'api_key_roles',
    'bans',
    'settings',
    'audit_events',
    'geofence_events',
    'chat_members',
    'integrations',
  ]) {
    counts[t] = Number((await db(t).count({ n: '*' }))[0].n);
  }
  return counts;
}

export async function seedFixtures(db: Knex, o: FixtureOptions, log: (s: string) => void): Promise<Fixtures> {
  const N = o.rows;
  const step = async (what: string, work: () => Promise<unknown>) => {
    const t0 = Date.now();
    await work();
    log(`  ${what} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  };

  const admin = await newUserWithEmail(db, 'bench_admin', 'role_admin');
  const fleet = await newUserWithEmail(db, 'bench_fleet', 'role_developer');
  const [adminToken] = await insertSessions(db, [admin.id, admin.id, admin.id]);
  const gpsReadKey = randomToken(API_KEY_PREFIX, 32);
  await db('api_keys').insert({
    user_id: admin.id,
    name: 'bench gps reader',
    key_hash: sha256(gpsReadKey),
    key_prefix: keyPrefixOf(gpsReadKey),
    scopes: JSON.stringify(['gps:read']),
  });
  const emailPlatform = (await db('platforms').where('slug', 'email').first('id')).id as string;

  await step(
    `${N} users with email accounts, role_user, a session, a lifted ban and an OAuth client (consented) each`,
    async () => {
      await db.raw(`INSERT INTO users (username) SELECT 'bench_u' || i FROM generate_series(1, ?::int) i`, [N]);
      await db.raw(
        `INSERT INTO platform_accounts (user_id, platform_id, platform_user_id, is_oauth, is_primary, username, email, email_verified_at)
       SELECT id, ?, username || '@example.test', false, true, username, username || '@example.test', now() FROM users WHERE username LIKE 'bench\\_u%'`,
        [emailPlatform],
      );
      await db.raw(
        `UPDATE users u SET primary_platform_account_id = pa.id FROM platform_accounts pa WHERE pa.user_id = u.id AND u.username LIKE 'bench\\_u%'`,
      );
      await db.raw(
        `INSERT INTO user_roles (user_id, role_id) SELECT id, 'role_user' FROM users WHERE username LIKE 'bench\\_u%'`,
      );
      await db.raw(
        `INSERT INTO bans (user_id, reason, banned_by, banned_at, is_permanent, unbanned_at, unbanned_by)
       SELECT id, 'bench: lifted ban', ?::uuid, now() - interval '2 days', true, now() - interval '1 day', ?::uuid FROM users WHERE username LIKE 'bench\\_u%'`,
        [admin.id, admin.id],
      );
      await db.raw(
        `INSERT INTO oauth_clients (user_id, name, redirect_uris, allowed_scopes)
       SELECT id, 'bench app ' || username, '["https://app.example.test/cb"]', '["profile"]' FROM users WHERE username LIKE 'bench\\_u%'`,
      );
      await db.raw(
        `INSERT INTO oauth_clients (user_id, name, redirect_uris, allowed_scopes) SELECT ?::uuid, 'bench admin app ' || i, '["https://app.example.test/cb"]', '["profile"]' FROM generate_series(1, 5) i`,
        [admin.id],
      );
      // Every user (the admin included) consented to the apps they own.
      await db.raw(
        `INSERT INTO oauth_consents (user_id, client_id, scopes) SELECT user_id, id, '["profile"]' FROM oauth_clients`,
      );
    },
  );
  const userIds = (await db('users').where('username', 'like', 'bench\\_u%').orderBy('id').select('id')).map(
    (r: { id: string }) => r.id,
  );
  let userTokens: string[] = [];
  await step(`${N} user sessions`, async () => {
    userTokens = await insertSessions(db, userIds);
  });

  const trackerKeys = Array.from({ length: N }, () => randomToken(API_KEY_PREFIX, 32));
  await step(
    `${N} API keys (tracker keys of bench_fleet, role_developer) and ${N} devices, each linked to one key`,
    async () => {
      for (let i = 0; i < N; i += CHUNK) {
        const keys = trackerKeys.slice(i, i + CHUNK);
        await db.raw(
          `WITH k AS (
           INSERT INTO api_keys (user_id, name, key_hash, key_prefix, scopes)
           SELECT ?::uuid, 'tracker ' || (? + n), h, p, '["gps:write","gps:read"]'::jsonb FROM unnest(?::text[], ?::text[]) WITH ORDINALITY AS t(h, p, n)
           RETURNING id, name
         )
         INSERT INTO devices (name, description, device_type, api_key_id) SELECT 'bench device ' || substr(name, 9), 'bench fixture', 'tracker', id FROM k`,
          [fleet.id, i, keys.map(sha256), keys.map(keyPrefixOf)],
        );
      }
      // A role per key, the owner's own (no escalation), so GET /v1/api-keys/{id}/roles lists one.
      await db.raw(
        `INSERT INTO api_key_roles (api_key_id, role_id) SELECT id, 'role_developer' FROM api_keys WHERE user_id = ?`,
        [fleet.id],
      );
    },
  );

  await step(`${N} locations (2 contacts each), geofences, trip categories, roles (3 permissions each)`, async () => {
    await db.raw(
      `INSERT INTO locations (name, street, zip, city, country, latitude, longitude, notes)
       SELECT 'bench location ' || i, 'Street ' || i, lpad((i % 99999)::text, 5, '0'), 'City ' || (i % 100), 'DE', 47 + (i % 700) * 0.01, 6 + (i % 900) * 0.01, 'bench fixture' FROM generate_series(1, ?::int) i`,
      [N],
    );
    await db.raw(
      `INSERT INTO location_contacts (location_id, name, phone, email, role)
       SELECT id, c || ' ' || name, '+49 30 123456', 'contact' || c || '@example.test', CASE c WHEN 1 THEN 'dispatch' ELSE 'gate' END FROM locations, generate_series(1, 2) c WHERE name LIKE 'bench location %'`,
    );
    await db.raw(
      `INSERT INTO geofences (name, description, latitude, longitude, radius_km, metadata)
       SELECT 'bench geofence ' || i, 'bench fixture', 47 + (i % 700) * 0.01, 6 + (i % 900) * 0.01, 0.5 + (i % 10) * 0.1, '{"zone":"bench"}' FROM generate_series(1, ?::int) i`,
      [N],
    );
    await db.raw(
      `INSERT INTO trip_categories (name, description, color, sort_order) SELECT 'bench category ' || i, 'bench fixture', '#336699', i % 50 FROM generate_series(1, ?::int) i`,
      [N],
    );
    await db.raw(
      `INSERT INTO roles (id, name, description) SELECT 'bench_role_' || i, 'Bench role ' || i, 'bench fixture' FROM generate_series(1, ?::int) i`,
      [N],
    );
    await db.raw(
      `WITH p AS (SELECT id, row_number() OVER (ORDER BY resource, action) - 1 AS n, count(*) OVER () AS total FROM permissions)
       INSERT INTO role_permissions (role_id, permission_id)
       SELECT 'bench_role_' || i, p.id FROM generate_series(1, ?::int) i, generate_series(0, 2) j JOIN p ON true WHERE p.n = (i * 3 + j) % p.total`,
      [N],
    );
  });

  // Rows of one kind paired by position (device i ↔ trip i ↔ category i …): numbered views.
  const numbered = (table: string, like: string) =>
    `(SELECT id, row_number() OVER (ORDER BY id) - 1 AS n FROM ${table} WHERE name LIKE '${like}')`;
  await step(`${N} trip templates and ${N} trips (mixed statuses, status history)`, async () => {
    await db.raw(
      `INSERT INTO trip_templates (name, description, category_id, origin_id, destination_id, device_id, default_weight_kg, notes, tags)
       SELECT 'bench template ' || d.n, 'bench fixture', c.id, o.id, t.id, d.id, 1000 + d.n % 500, 'bench', '{bench,template}'
       FROM ${numbered('devices', 'bench device %')} d
       JOIN ${numbered('trip_categories', 'bench category %')} c ON c.n = d.n
       JOIN ${numbered('locations', 'bench location %')} o ON o.n = d.n
       JOIN ${numbered('locations', 'bench location %')} t ON t.n = (d.n + 1) % ?::int`,
      [N],
    );
    // Statuses draft, active, paused, completed in turn; GPS logging off, so the one-active-trip
    // rule never binds and tracker points carry no trip.
    await db.raw(
      `INSERT INTO trips (name, description, status, device_id, category_id, origin_id, destination_id, weight_kg, notes, tags, started_at, ended_at, created_at)
       SELECT 'bench trip ' || d.n, 'bench fixture', (ARRAY['draft','active','paused','completed'])[1 + d.n % 4], d.id, c.id, o.id, t.id, 1000 + d.n % 500, 'bench', '{bench}',
              CASE WHEN d.n % 4 > 0 THEN now() - interval '2 days' END, CASE WHEN d.n % 4 = 3 THEN now() - interval '1 day' END, now() - make_interval(secs => ?::int - d.n)
       FROM ${numbered('devices', 'bench device %')} d
       JOIN ${numbered('trip_categories', 'bench category %')} c ON c.n = d.n
       JOIN ${numbered('locations', 'bench location %')} o ON o.n = d.n
       JOIN ${numbered('locations', 'bench location %')} t ON t.n = (d.n + 1) % ?::int`,
      [N, N],
    );
    await db.raw(
      `INSERT INTO trip_status_history (trip_id, old_status, new_status, changed_by, changed_at)
       SELECT id, 'draft', 'active', ?::uuid, now() - interval '2 days' FROM trips WHERE name LIKE 'bench trip %' AND status <> 'draft'
       UNION ALL SELECT id, 'active', 'paused', ?::uuid, now() - interval '36 hours' FROM trips WHERE name LIKE 'bench trip %' AND status = 'paused'
       UNION ALL SELECT id, 'active', 'completed', ?::uuid, now() - interval '1 day' FROM trips WHERE name LIKE 'bench trip %' AND status = 'completed'`,
      [admin.id, admin.id, admin.id],
    );
  });

  await step(
    `${o.gpsPoints} GPS points (INSERT … SELECT generate_series), spread over the ${N} devices and their trips`,
    async () => {
      // Point i belongs to trip i mod N and that trip's device, one second apart, the newest now.
      await db.raw(
        `INSERT INTO gps_points (device_id, trip_id, latitude, longitude, altitude, heading, "timestamp", speed_kmh, speed_mps, speed_mph, speed_knots, hdop, created_at)
       SELECT t.device_id::text, t.id, 47 + (i % 7000) * 0.001, 6 + (i % 9000) * 0.001, 30 + i % 50, i % 360,
              now() - make_interval(secs => ?::int - i), 36, 10, 22.37, 19.44, 0.9, now() - make_interval(secs => ?::int - i)
       FROM generate_series(0, ?::int - 1) i
       JOIN (SELECT id, device_id, row_number() OVER (ORDER BY id) - 1 AS n FROM trips WHERE name LIKE 'bench trip %') t ON t.n = i % ?::int`,
        [o.gpsPoints, o.gpsPoints, o.gpsPoints, N],
      );
    },
  );

  await step(
    `${N} settings, ${N} audit events, ${N} geofence events, a chat guild with ${N} members, integrations of the admin`,
    async () => {
      await db.raw(
        `INSERT INTO settings (key, value, description, is_public) SELECT 'bench.setting.' || i, to_jsonb(i), 'bench fixture', i % 2 = 0 FROM generate_series(1, ?::int) i`,
        [N],
      );
      // The admin's own events and everyone else's, a day apart, newest now.
      await db.raw(
        `INSERT INTO audit_events (user_id, event_type, resource_type, resource_id, actor_id, ip_address, user_agent, status, source_service, created_at)
         SELECT CASE WHEN i % 10 = 0 THEN ?::text ELSE u.id::text END, (ARRAY['login','logout','session_created','api_key_created'])[1 + i % 4], 'user', u.id::text, u.id::text, '203.0.113.' || (i % 250), 'bench', 'success', 'api', now() - make_interval(secs => i)
         FROM generate_series(1, ?::int) i JOIN (SELECT id, row_number() OVER (ORDER BY id) AS n FROM users WHERE username LIKE 'bench\\_u%') u ON u.n = 1 + i % ?::int`,
        [admin.id, N, N],
      );
      await db.raw(
        `INSERT INTO geofence_events (geofence_id, device_id, event, distance_km, latitude, longitude, occurred_at)
         SELECT g.id, d.id::text, CASE WHEN g.n % 2 = 0 THEN 'enter' ELSE 'exit' END, 0.1, 47, 6, now() - make_interval(secs => g.n::int)
         FROM ${numbered('geofences', 'bench geofence %')} g JOIN ${numbered('devices', 'bench device %')} d ON d.n = g.n`,
      );
      await db.raw(
        `INSERT INTO chat_guilds (guild_id, name, member_count) VALUES ('100000000000000001', 'Bench guild', ?::int)`,
        [N],
      );
      await db.raw(
        `INSERT INTO chat_members (guild_id, user_id, username, global_name, joined_at)
         SELECT (SELECT id FROM chat_guilds WHERE guild_id = '100000000000000001'), (200000000000000000 + i)::text, 'member' || i, 'Member ' || i, now() - make_interval(days => i % 400)
         FROM generate_series(1, ?::int) i`,
        [N],
      );
      await db.raw(
        `INSERT INTO integrations (user_id, platform_slug, platform_user_id, username, access_token_sealed, scopes)
         SELECT ?::uuid, 'stream', 'bench' || i, 'bench_streamer_' || i, 'sealed-bench-placeholder', '["user:read:email"]' FROM generate_series(1, 3) i`,
        [admin.id],
      );
    },
  );

  await step('VACUUM ANALYZE', () => db.raw('VACUUM ANALYZE'));

  const counts = await tableCounts(db);

  // Trackers: keys in device order, the first `trackers` of them.
  const linked = await db('devices')
    .whereNotNull('api_key_id')
    .whereLike('name', 'bench device %')
    .orderBy('id')
    .limit(o.trackers)
    .select('api_key_id');
  const keyByHash = new Map(trackerKeys.map((k) => [sha256(k), k]));
  const hashes = await db('api_keys')
    .whereIn(
      'id',
      linked.map((r: { api_key_id: string }) => r.api_key_id),
    )
    .select('id', 'key_hash');
  const trackers = hashes.map((h: { key_hash: string }) => keyByHash.get(h.key_hash)!);

  const S = o.sample;
  const sampleUsers = await pick(db, 'users', S, (q) => q.whereLike('username', 'bench\\_u%'));
  const sampleLocations = await pick(db, 'locations', S);
  // A child's path value (a contact, an account) comes with its parent's: the load fills the k-th
  // value of each parameter (fillRoute), so the k-th child is the first of the k-th parent. Every
  // seeded location has contacts and every bench user an account.
  const firstChildren = async (table: string, parentColumn: string, parents: string[]) => {
    const rows: Array<Record<string, string>> = await db(table)
      .whereIn(parentColumn, parents)
      .orderBy([parentColumn, 'created_at', 'id'])
      .select('id', parentColumn);
    const first = new Map<string, string>();
    for (const r of rows) if (!first.has(r[parentColumn])) first.set(r[parentColumn], r.id);
    return parents.flatMap((p) => first.get(p) ?? []);
  };
  const tokenByUser = new Map(userIds.map((id, i) => [id, userTokens[i]]));
  const platforms = await db('platforms').select('id', 'slug');
  return {
    adminId: admin.id,
    adminEmail: admin.email,
    adminToken,
    gpsReadKey,
    trackerKeys: trackers,
    sample: {
      users: sampleUsers,
      emails: (await db('platform_accounts').whereIn('user_id', sampleUsers).orderBy('user_id').select('email')).map(
        (r: { email: string }) => r.email,
      ),
      sessionTokens: sampleUsers.map((id) => tokenByUser.get(id)!),
      accounts: await firstChildren('platform_accounts', 'user_id', sampleUsers),
      devices: await pick(db, 'devices', S),
      trips: await pick(db, 'trips', S),
      locations: sampleLocations,
      contacts: await firstChildren('location_contacts', 'location_id', sampleLocations),
      geofences: await pick(db, 'geofences', S),
      categories: await pick(db, 'trip_categories', S),
      templates: await pick(db, 'trip_templates', S),
      roles: await pick(db, 'roles', S),
      permissions: await pick(db, 'permissions', S),
      apiKeys: await pick(db, 'api_keys', S, (q) => q.where('is_system', false)),
      oauthClients: await pick(db, 'oauth_clients', S),
      gpsPoints: await pick(db, 'gps_points', S),
      platforms: platforms.flatMap((p: { id: string; slug: string }) => [p.slug, p.id]),
      settings: (await db('settings').orderBy('key').limit(S).select('key')).map((r: { key: string }) => r.key),
      systemConfig: (await db('system_config').orderBy('key').limit(S).select('key')).map(
        (r: { key: string }) => r.key,
      ),
      integrations: (await db('integrations').where('user_id', admin.id).select('id')).map((r: { id: string }) => r.id),
      chatGuilds: ['100000000000000001'],
      chatGuildUuids: (await db('chat_guilds').where('guild_id', '100000000000000001').select('id')).map(
        (r: { id: string }) => r.id,
      ),
      chatMembers: (await db('chat_members').orderBy('user_id').limit(S).select('user_id')).map(
        (r: { user_id: string }) => r.user_id,
      ),
    },
    counts,
  };
}
