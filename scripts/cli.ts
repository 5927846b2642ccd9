import 'reflect-metadata';
import knex from 'knex';
import { parseArgs } from 'node:util';
import { createApiKey } from '../shared/commands/apiKeys';
import { Config, loadConfigOrExit } from '../shared/config';
import { createDb, migrate } from '../shared/db';
import { ALL_PERMISSIONS } from '../shared/permissions';
import { seed } from '../shared/seed';
import { createRedis } from '../shared/redis';
import { AuthInvalidation, EventBus } from '../shared/events';

const USAGE = `usage: npm run cli -- <command>
  migrate                                   create the database if missing, apply migrations
  seed                                      roles, permissions, platforms, system config (idempotent)
  grant-role <user> <role>                  user by id, username or email; role by name or id
  create-api-key --user <user> --name <n> [--scopes a:b,c:d] [--system]
                                            prints the key once`;

const say = (msg: string) => process.stdout.write(`${msg}\n`);

/** Creates the database named in DATABASE_URL when the server has no such database yet. */
async function ensureDatabase(config: Config): Promise<void> {
  const url = new URL(config.databaseUrl);
  const name = decodeURIComponent(url.pathname.slice(1));
  url.pathname = '/postgres';
  const admin = knex({ client: 'pg', connection: url.toString(), pool: { min: 0, max: 1 } });
  try {
    const exists = await admin.raw('SELECT 1 FROM pg_database WHERE datname = ?', [name]);
    if (exists.rows.length === 0) {
      say(`creating database ${name}`);
      await admin.raw('CREATE DATABASE ??', [name]);
    }
  } finally {
    await admin.destroy();
  }
}

async function findUser(db: ReturnType<typeof createDb>, ref: string): Promise<{ id: string; username: string }> {
  const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(ref);
  const user = await db('users as u')
    .leftJoin('platform_accounts as pa', 'pa.user_id', 'u.id')
    .where((q) => {
      if (uuid) q.orWhere('u.id', ref);
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
    await bus.invalidateAuth(msg);
  } catch (err) {
    say(`note: could not notify running instances (${(err as Error).message}); they pick the change up within a minute`);
  } finally {
    bus.close();
    redis.disconnect();
  }
}

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  const config = loadConfigOrExit();
  if (!command || command === 'help' || command === '--help') {
    say(USAGE);
    return;
  }
  if (command === 'migrate') {
    await ensureDatabase(config);
    const db = createDb(config, { poolMax: 2 });
    try {
      say('applying migrations…');
      const applied = await migrate(db);
      say(applied.length ? applied.map((m) => `  applied ${m}`).join('\n') : '  already up to date');
    } finally {
      await db.destroy();
    }
    return;
  }
  const db = createDb(config, { poolMax: 2 });
  try {
    if (command === 'seed') {
      let step = 0;
      const report = await seed(db, { systemApiKey: config.systemApiKey, onProgress: (s) => say(`[${++step}/5] seeding ${s}`) });
      say(`seeded ${report.permissions} permissions, ${report.roles} roles, ${report.platforms} platforms, ${report.config} config entries`);
      // Role grants may have changed under running instances: they drop every cached credential.
      await invalidateRunningInstances(config, { all: true });
    } else if (command === 'grant-role') {
      const [userRef, roleRef] = rest;
      if (!userRef || !roleRef) throw new Error('grant-role needs <user> <role>');
      const user = await findUser(db, userRef);
      const role = await db('roles').where('id', roleRef).orWhereRaw('lower(name) = lower(?)', [roleRef]).first('id', 'name');
      if (!role) throw new Error(`no role with id or name "${roleRef}"`);
      await db('user_roles').insert({ user_id: user.id, role_id: role.id }).onConflict(['user_id', 'role_id']).ignore();
      await invalidateRunningInstances(config, { userId: user.id });
      say(`granted role ${role.name} to ${user.username} (${user.id})`);
    } else if (command === 'create-api-key') {
      const { values } = parseArgs({ args: rest, options: { user: { type: 'string' }, name: { type: 'string' }, scopes: { type: 'string' }, system: { type: 'boolean', default: false } } });
      if (!values.name) throw new Error('create-api-key needs --name');
      if (!values.system && !values.user) throw new Error('create-api-key needs --user (or --system)');
      const scopes = values.scopes ? values.scopes.split(',').map((s) => s.trim()).filter(Boolean) : [];
      // A scope is a catalogue permission or `<known resource>:*`.
      const known = new Set(ALL_PERMISSIONS);
      const resources = new Set(ALL_PERMISSIONS.map((p) => p.split(':')[0]));
      const unknown = scopes.filter((s) => !known.has(s) && !(s.endsWith(':*') && resources.has(s.slice(0, -2))));
      if (unknown.length) throw new Error(`unknown scopes: ${unknown.join(', ')}`);
      const user = values.user ? await findUser(db, values.user) : null;
      const { apiKey, key } = await createApiKey({ userId: user?.id ?? null, name: values.name, scopes: values.system ? ['*:*'] : scopes, isSystem: values.system });
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
