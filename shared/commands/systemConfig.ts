import { attributed, Attribution, recordAuditEvent } from '../audit';
import { invalidateCachedConfig, publishConfigChange } from '../caches/systemConfig';
import type { ServiceContext } from '../context';
import { afterCommit, transaction } from '../db';
import { notFound, validationError } from '../errors';
import { deferToOutbox } from '../outbox';
import type { SystemConfigRow } from '../presenters/systemConfig';
import { isConfigKey, SYSTEM_CONFIG } from '../systemConfig';

/**
 * Sets a system config entry (PATCH /v1/system-config/{key}): the value must satisfy the key's
 * declared schema (400 naming `value`); an undeclared or unseeded key is a 404, entries are never
 * created or deleted here. After the commit this process drops its cached value and the change is
 * published, so every other process drops its own within the time a Redis message takes.
 */
export async function updateSystemConfig(
  ctx: Pick<ServiceContext, 'db' | 'redis' | 'config' | 'logger'> & Partial<Pick<ServiceContext, 'outbox'>>,
  key: string,
  value: unknown,
  by: Attribution,
): Promise<SystemConfigRow> {
  if (!isConfigKey(key)) throw notFound('system config entry');
  const parsed = SYSTEM_CONFIG[key].schema.safeParse(value);
  if (!parsed.success) throw validationError(prefixed(parsed.error), 'value');
  return transaction(ctx.db, async (trx) => {
    const before = await trx('system_config').where('key', key).forUpdate().first('value');
    if (!before) throw notFound('system config entry');
    const [row] = await trx('system_config')
      .where('key', key)
      .update({ value: JSON.stringify(parsed.data), updated_at: trx.fn.now() })
      .returning(['key', 'value', 'description', 'updated_at']);
    await recordAuditEvent(
      attributed(by, {
        event_type: 'system_config_updated',
        resource_type: 'system_config',
        resource_id: key,
        metadata: { key, old_value: before.value, new_value: parsed.data },
      }),
      trx,
    );
    afterCommit(trx, async () => {
      invalidateCachedConfig(ctx.db, key);
      // Redis down or hung: the other processes would keep the old value (a Redis that hung keeps
      // their subscriptions open, so they keep trusting their caches); the relay announces it later.
      await publishConfigChange(ctx.redis, ctx.config, key).catch((err: unknown) =>
        deferToOutbox(ctx, 'systemConfigChange', { key }, err, 'publish a system config change', { key }),
      );
    });
    return row as SystemConfigRow;
  });
}

/** The schema's issues with their paths under `value` (value.0 for the first item of an array). */
function prefixed<E extends { issues: Array<{ path: Array<string | number> }> }>(err: E): E {
  for (const i of err.issues) i.path = ['value', ...i.path];
  return err;
}
