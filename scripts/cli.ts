import 'reflect-metadata';
import knex from 'knex';
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { sessionLifetimeMs } from '../shared/queries/accountSettings';
import { createApiKey, ownerPermissionScopes } from '../shared/commands/apiKeys';
import { configurePasswordHashing, hashPassword, PASSWORD_MAX, PASSWORD_MIN } from '../shared/domain/passwords';
import { recordAuditEvent } from '../shared/audit';
import { createSession } from '../shared/commands/sessions';
import { createVerifiedEmailUser } from '../shared/commands/users';
import { zEmail } from '../shared/domain/accounts';
import { HttpError } from '../shared/errors';
import { Config, loadConfigOrExit } from '../shared/config';
import { createDb, migrate, rollbackLastBatch } from '../shared/db';
import { createLogger } from '../shared/logger';
import { ALL_PERMISSIONS, DEFAULT_ROLES } from '../shared/permissions';
import { seed } from '../shared/seed';
import { createRedis } from '../shared/redis';
import { AuthInvalidation, EventBus } from '../shared/events';
import { isUuid } from '../shared/zod';
import { rotateSecrets } from '../shared/commands/rotateSecrets';
import { secretKeyId } from '../shared/crypto';

const USAGE = `usage: npm run cli -- <command>
  check-config                              validate the environment (exit 1 naming what is wrong)
  migrate                                   create the database if missing, apply migrations
  migrate-rollback                          undo the last batch of migrations (the last migrate
                                            that applied any), dropping what they created
  seed                                      roles, permissions, platforms, system config (idempotent)
  create-admin --email <e> [--password <p>] [--api-key]
                                            a verified email user with the Admin role; prints a
                                            session token (and an API key with --api-key), and the
                                            password once when none was given
  list-roles                                roles with their permissions
  grant-role <user> <role>                  user by id, username or email; role by name or id
  create-api-key (--user <user> | --system) --name <n> [--scopes a:b,c:d]
                                            prints the key once; without --scopes the key holds
                                            the owner's permissions
  rotate-secrets                            re-encrypt every sealed column (TOTP secrets, mail
                                            tokens) under SECRETS_KEY; SECRETS_KEY_PREVIOUS holds
                                            the old key(s) until it has run`;

const ADMIN_ROLE_ID = 'role_admin';

const say = (msg: string) => process.stdout.write(`${msg}\n`);
// Output into a pipe whose reader is gone (`npm run cli -- list-roles | head`): done, as other
// command-line tools end, rather than with an EPIPE stack trace.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code !== 'EPIPE') throw err;
  process.exit(0);
});

/** knex's own console output (a connection error's stack) is left out: the CLI ends with one `error:` line. */
const QUIET = { warn: () => undefined, error: () => undefined, deprecate: () => undefined, debug: () => undefined };
/** The CLI's database: its errors reach the user as that line, not as the client's log. */
const cliDb = (config: Config) => createDb(config, { poolMax: 2, logger: createLogger('cli', 'silent'), name: 'cli' });

/** Creates the database named in DATABASE_URL when the server has no such database yet. */
async function ensureDatabase(config: Config): Promise<void> {
  const url = new URL(config.databaseUrl);
  const name = decodeURIComponent(url.pathname.slice(1));
  url.pathname = '/postgres';
  const admin = knex({ client: 'pg', connection: url.toString(), pool: { min: 0, max: 1 }, log: QUIET });
  try {
    const exists = await admin.raw('SELECT 1 FROM pg_database WHERE datname = ?', [name]);
    if (exists.rows.length === 0) {
      say(`creating database ${name}`);
      // UTF8 whatever the cluster's default (an old cluster's may be SQL_ASCII or LATIN1): text is
      // stored as sent, and the migrations' normalize() needs it. A cluster whose default is not UTF8
      // gets the C locale, which goes with any encoding.
      const template = await admin.raw(
        "SELECT pg_encoding_to_char(encoding) AS encoding FROM pg_database WHERE datname = 'template1'",
      );
      const utf8 = template.rows[0]?.encoding === 'UTF8';
      const create = utf8
        ? admin.raw('CREATE DATABASE ??', [name])
        : admin.raw("CREATE DATABASE ?? ENCODING 'UTF8' TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'", [name]);
      await create.catch((err: { code?: string }) => {
        // Another migrator started at the same time created it first (duplicate_database, or the
        // unique index of pg_database when both passed the check at once).
        if (err.code !== '42P04' && err.code !== '23505') throw err;
      });
    }
  } finally {
    await admin.destroy();
  }
}

async function findUser(db: ReturnType<typeof createDb>, ref: string): Promise<{ id: string; username: string }> {
  const user = await db('users as u')
    .leftJoin('platform_accounts as pa', 'pa.user_id', 'u.id')
    .where((q) => {
      if (isUuid(ref)) q.orWhere('u.id', ref);
      q.orWhereRaw('lower(u.username) = lower(?)', [ref]).orWhereRaw('lower(pa.email) = lower(?)', [ref]);
    })
    .first('u.id', 'u.username');
  if (!user) throw new Error(`no user with id, username or email "${ref}"`);
  return user;
}

/**
 * Tells running api and realtime instances to drop cached credentials, as the API does after the
 * same change, and waits for their acknowledgement; with no Redis (nothing running) it says so.
 */
async function invalidateRunningInstances(config: Config, msg: AuthInvalidation): Promise<void> {
  const redis = createRedis(config, { maxRetriesPerRequest: 1, connectTimeout: 2000 });
  redis.on('error', () => undefined);
  const bus = new EventBus(redis, config);
  try {
    // The CLI is its own process without a credential cache: it only publishes, and says so when it cannot.
    // eslint-disable-next-line no-restricted-syntax
    await bus.invalidateAuth(msg);
  } catch (err) {
    say(
      `note: could not notify running instances (${(err as Error).message}); they pick the change up within a minute`,
    );
  } finally {
    bus.close();
    redis.disconnect();
  }
}

/**
 * create-admin: the first administrator of a fresh installation (or another one). A verified email
 * user as registration creates it (argon2id password, email platform account), plus the Admin role,
 * a session (printed: it works at once, before any sign-in) and, with --api-key, a key holding the
 * user's permissions (`*:*`). Without --password a random one is generated and printed once.
 */
async function createAdmin(db: ReturnType<typeof createDb>, args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      email: { type: 'string' },
      password: { type: 'string' },
      'api-key': { type: 'boolean', default: false },
    },
  });
  if (!values.email) throw new Error('create-admin needs --email');
  const email = zEmail().safeParse(values.email);
  if (!email.success) throw new Error(`--email: ${email.error.issues[0].message}`);
  if (
    values.password !== undefined &&
    (values.password.length < PASSWORD_MIN || values.password.length > PASSWORD_MAX)
  ) {
    throw new Error(`--password: must be ${PASSWORD_MIN} to ${PASSWORD_MAX} characters`);
  }
  const generated = values.password === undefined;
  const password = values.password ?? randomBytes(18).toString('base64url');
  const passwordHash = await hashPassword(password);
  const created = await db
    .transaction(async (trx) => {
      const { user, account } = await createVerifiedEmailUser(trx, { email: email.data, passwordHash });
      await trx('user_roles')
        .insert({ user_id: user.id, role_id: ADMIN_ROLE_ID })
        .onConflict(['user_id', 'role_id'])
        .ignore();
      const audit = {
        user_id: user.id,
        actor_id: null,
        user_agent: 'cli create-admin',
        resource_type: 'user',
        resource_id: user.id,
      };
      await recordAuditEvent(
        {
          ...audit,
          event_type: 'user_created',
          metadata: { platform: 'email', platform_account_id: account.id, via: 'cli', roles: ['Admin'] },
        },
        trx,
      );
      const expires = new Date(Date.now() + (await sessionLifetimeMs(trx)));
      const { session, token } = await createSession(trx, user.id, expires, {
        platformSlug: 'email',
        userAgent: 'cli create-admin',
      });
      await recordAuditEvent(
        {
          ...audit,
          event_type: 'session_created',
          resource_type: 'session',
          resource_id: session.id,
          metadata: { via: 'cli', session_id: session.id },
        },
        trx,
      );
      const apiKey = values['api-key']
        ? await createApiKey(
            {
              userId: user.id,
              name: 'admin',
              description: 'created by cli create-admin',
              scopes: await ownerPermissionScopes(trx, user.id),
            },
            trx,
          )
        : null;
      return { user, session, token, apiKey };
    })
    .catch((err) => {
      if (err instanceof HttpError && err.status === 409)
        throw new Error(
          `${email.data} already has an account: make it an administrator with: npm run cli -- grant-role ${email.data} Admin`,
        );
      throw err;
    });
  say(
    `created administrator ${created.user.username} (${created.user.id}) <${email.data}>: email verified, role Admin`,
  );
  if (generated) say(`password (generated, shown only once): ${password}`);
  say(`session token (valid until ${created.session.expires_at.toISOString()}): ${created.token}`);
  if (created.apiKey)
    say(
      `api key ${created.apiKey.apiKey.id} (scopes ${created.apiKey.apiKey.scopes.join(',')}, shown only once): ${created.apiKey.key}`,
    );
}

/** list-roles: every role with its permissions and how many users hold it; default roles first. */
async function listRoles(db: ReturnType<typeof createDb>): Promise<void> {
  const roles: Array<{ id: string; name: string; description: string | null; is_system: boolean }> = await db(
    'roles',
  ).select('id', 'name', 'description', 'is_system');
  const perms: Array<{ role_id: string; perm: string }> = await db('role_permissions as rp')
    .join('permissions as p', 'p.id', 'rp.permission_id')
    .select('rp.role_id', db.raw("p.resource || ':' || p.action as perm"));
  const holders: Array<{ role_id: string; n: string }> = await db('user_roles')
    .groupBy('role_id')
    .select('role_id', db.raw('count(*) as n'));
  const order = (id: string) => {
    const i = DEFAULT_ROLES.findIndex((r) => r.id === id);
    return i < 0 ? DEFAULT_ROLES.length : i;
  };
  roles.sort((a, b) => order(a.id) - order(b.id) || a.name.localeCompare(b.name));
  for (const r of roles) {
    const users = Number(holders.find((h) => h.role_id === r.id)?.n ?? 0);
    say(
      `${r.name} (id ${r.id}${r.is_system ? ', system role' : ''}, ${users} user${users === 1 ? '' : 's'}): ${r.description ?? ''}`.trimEnd(),
    );
    const list = perms
      .filter((p) => p.role_id === r.id)
      .map((p) => p.perm)
      .sort();
    say(`  ${list.join(' ') || '(no permissions)'}`);
  }
  say('grant one with: npm run cli -- grant-role <user> <role name or id>');
}

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  const config = loadConfigOrExit();
  configurePasswordHashing(config.passwordHashing);
  if (!command || command === 'help' || command === '--help') {
    say(USAGE);
    return;
  }
  // Start-up runs it before anything acts on DATABASE_URL or REDIS_URL (scripts/start.sh).
  if (command === 'check-config') {
    say('configuration ok');
    return;
  }
  if (command === 'migrate') {
    await ensureDatabase(config);
    const db = cliDb(config);
    try {
      // Text rules (NFC and NFKC role names, code-point limits) assume UTF8: another encoding would
      // fail a migration half-way, or store what clients send altered.
      const encoding = (await db.raw('SHOW server_encoding')).rows[0]?.server_encoding;
      if (encoding !== 'UTF8')
        throw new Error(
          `the database's encoding is ${encoding}, not UTF8: create it with ENCODING 'UTF8' (or let migrate create it)`,
        );
      say('applying migrations…');
      const applied = await migrate(db, { log: say });
      say(applied.length ? applied.map((m) => `  applied ${m}`).join('\n') : '  already up to date');
    } finally {
      await db.destroy();
    }
    return;
  }
  if (command === 'migrate-rollback') {
    const db = cliDb(config);
    try {
      say('rolling back the last batch of migrations…');
      const undone = await rollbackLastBatch(db, { log: say });
      say(undone.length ? undone.map((m) => `  rolled back ${m}`).join('\n') : '  nothing to roll back');
    } finally {
      await db.destroy();
    }
    return;
  }
  const db = cliDb(config);
  try {
    if (command === 'seed') {
      let step = 0;
      const report = await seed(db, {
        systemApiKey: config.systemApiKey,
        supportedLocales: config.supportedLocales,
        onProgress: (s) => say(`[${++step}/5] seeding ${s}`),
      });
      say(
        `seeded ${report.permissions} permissions, ${report.roles} roles, ${report.platforms} platforms, ${report.config} config entries`,
      );
      // Role grants may have changed under running instances: they drop every cached credential.
      await invalidateRunningInstances(config, { all: true });
    } else if (command === 'grant-role') {
      const [userRef, roleRef] = rest;
      if (!userRef || !roleRef) throw new Error('grant-role needs <user> <role>');
      const user = await findUser(db, userRef);
      const role = await db('roles')
        .where('id', roleRef)
        .orWhereRaw('lower(name) = lower(?)', [roleRef.normalize('NFC')])
        .first('id', 'name');
      if (!role) throw new Error(`no role with id or name "${roleRef}"`);
      await db('user_roles').insert({ user_id: user.id, role_id: role.id }).onConflict(['user_id', 'role_id']).ignore();
      await invalidateRunningInstances(config, { userIds: [user.id] });
      say(`granted role ${role.name} to ${user.username} (${user.id})`);
    } else if (command === 'create-admin') {
      await createAdmin(db, rest);
    } else if (command === 'rotate-secrets') {
      say(`re-encrypting sealed columns under key ${secretKeyId(config.secretKeys[0])}…`);
      for (const r of await rotateSecrets(db, config.secretKeys))
        say(`  ${r.table}.${r.column}: ${r.rotated} re-encrypted, ${r.current} already current`);
      say('done: SECRETS_KEY_PREVIOUS may now be removed');
    } else if (command === 'list-roles') {
      await listRoles(db);
    } else if (command === 'create-api-key') {
      const { values } = parseArgs({
        args: rest,
        options: {
          user: { type: 'string' },
          name: { type: 'string' },
          scopes: { type: 'string' },
          system: { type: 'boolean', default: false },
        },
      });
      if (!values.name) throw new Error('create-api-key needs --name');
      if (!values.system && !values.user) throw new Error('create-api-key needs --user (or --system)');
      // A system key belongs to no user: with an owner, deleting that account took the key with it.
      if (values.system && values.user !== undefined)
        throw new Error('--system keys belong to no user (they hold every scope on their own): leave --user out');
      // A system key holds every scope: a list given with it would be silently dropped.
      if (values.system && values.scopes !== undefined)
        throw new Error('--scopes cannot narrow a --system key (it holds every scope): leave one of them out');
      // An empty list is a mistake (an unset variable, say), not "no scopes given": refused rather
      // than read as the owner's whole power.
      if (values.scopes !== undefined && !values.scopes.split(',').some((x) => x.trim()))
        throw new Error('--scopes is empty: name at least one scope (a:b,c:d), or leave --scopes out');
      let scopes = values.scopes
        ? values.scopes
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean)
        : [];
      // A scope is a catalogue permission or `<known resource>:*`.
      const known = new Set(ALL_PERMISSIONS);
      const resources = new Set(ALL_PERMISSIONS.map((p) => p.split(':')[0]));
      const unknown = scopes.filter((s) => !known.has(s) && !(s.endsWith(':*') && resources.has(s.slice(0, -2))));
      if (unknown.length) throw new Error(`unknown scopes: ${unknown.join(', ')}`);
      const user = values.user ? await findUser(db, values.user) : null;
      if (values.system) scopes = ['*:*'];
      else if (!values.scopes && user) {
        // A key with no scopes could do nothing: without --scopes it gets what its owner holds.
        scopes = await ownerPermissionScopes(db, user.id);
        say(`no --scopes given: the key holds ${user.username}'s permissions: ${scopes.join(', ') || '(none)'}`);
        if (!scopes.includes('*:*'))
          say(
            '  (later grants to the owner are not added to the key; a permission the owner loses leaves the key too)',
          );
      }
      const { apiKey, key } = await createApiKey(
        { userId: user?.id ?? null, name: values.name, scopes, isSystem: values.system },
        db,
      );
      say(`created API key ${apiKey.id} (${apiKey.key_prefix}…)${values.system ? ' [system]' : ''}`);
      say('the key is shown only once:');
      say(key);
    } else {
      throw new Error(`unknown command "${command}"\n${USAGE}`);
    }
  } finally {
    await db.destroy();
  }
}

main(process.argv.slice(2)).catch((err) => {
  process.stderr.write(`error: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
