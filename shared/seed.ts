import type { Knex } from 'knex';
import { ensureSystemApiKey, RetiredSystemKeyError } from './commands/apiKeys';
import { DEFAULT_ROLES, PERMISSION_CATALOGUE } from './permissions';
import { defaultConfigRows } from './systemConfig';

/** Sign-in platforms: the email/password platform and the OAuth providers. */
const DEFAULT_PLATFORMS = [
  { slug: 'email', name: 'Email', is_oauth: false, two_factor_supported: true },
  { slug: 'chat', name: 'Chat', is_oauth: true, two_factor_supported: true },
  { slug: 'stream', name: 'Stream', is_oauth: true, two_factor_supported: true },
  { slug: 'google', name: 'Google', is_oauth: true, two_factor_supported: false },
  { slug: 'github', name: 'GitHub', is_oauth: true, two_factor_supported: false },
];

/** Pre-seeded system config entries: every key declared in shared/systemConfig.ts, with its default. */
const DEFAULT_SYSTEM_CONFIG = defaultConfigRows();

export interface SeedReport {
  permissions: number;
  roles: number;
  platforms: number;
  config: number;
}

/**
 * Idempotent seed: the permission catalogue, the seven default roles with their permission sets,
 * the platforms, the system config entries and (when given) the system API key. Existing rows are
 * left as operators edited them, except default role grants, which are re-added if missing, and
 * config descriptions, which follow the registry.
 */
export async function seed(
  db: Knex,
  opts: { systemApiKey?: string; onProgress?: (step: string) => void; supportedLocales?: string[] } = {},
): Promise<SeedReport> {
  const progress = opts.onProgress ?? (() => undefined);
  return db.transaction(async (trx) => {
    progress('permissions');
    const perms = Object.entries(PERMISSION_CATALOGUE).flatMap(([resource, { actions, description }]) =>
      actions.map((action) => ({ resource, action, description: `${description}: ${action}` })),
    );
    await trx('permissions').insert(perms).onConflict(['resource', 'action']).ignore();
    const permRows: Array<{ id: string; resource: string; action: string }> = await trx('permissions').select(
      'id',
      'resource',
      'action',
    );
    const permId = new Map(permRows.map((p) => [`${p.resource}:${p.action}`, p.id]));

    progress('roles');
    await trx('roles')
      .insert(DEFAULT_ROLES.map((r) => ({ id: r.id, name: r.name, description: r.description, is_system: true })))
      .onConflict('id')
      .ignore();
    const grants = DEFAULT_ROLES.flatMap((r) =>
      r.permissions.map((p) => {
        const id = permId.get(p);
        if (!id) throw new Error(`role ${r.name} names unknown permission ${p}`);
        return { role_id: r.id, permission_id: id };
      }),
    );
    await trx('role_permissions').insert(grants).onConflict(['role_id', 'permission_id']).ignore();

    progress('platforms');
    await trx('platforms').insert(DEFAULT_PLATFORMS).onConflict('slug').ignore();

    progress('system config');
    // Values stay as operators set them; descriptions belong to the code (nothing else writes them),
    // so a row an older migration or version wrote gets the current words.
    // auth.supported_locales starts as SUPPORTED_LOCALES says (when given), not as the registry's en, de.
    const initial = (c: (typeof DEFAULT_SYSTEM_CONFIG)[number]) =>
      c.key === 'auth.supported_locales' && opts.supportedLocales?.length ? opts.supportedLocales : c.value;
    await trx('system_config')
      .insert(DEFAULT_SYSTEM_CONFIG.map((c) => ({ ...c, value: JSON.stringify(initial(c)) })))
      .onConflict('key')
      .merge(['description']);

    if (opts.systemApiKey) {
      progress('system api key');
      // A regenerated (retired) value is not stored again; the rest of the seed stands.
      await ensureSystemApiKey(trx, opts.systemApiKey).catch((err: unknown) => {
        if (!(err instanceof RetiredSystemKeyError)) throw err;
        progress(`system api key not stored: ${err.message}`);
      });
    }
    return {
      permissions: perms.length,
      roles: DEFAULT_ROLES.length,
      platforms: DEFAULT_PLATFORMS.length,
      config: DEFAULT_SYSTEM_CONFIG.length,
    };
  });
}
