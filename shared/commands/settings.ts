import type { Knex } from 'knex';
import { attributed, Attribution, recordAuditEvent } from '../audit';
import { transaction } from '../db';
import { conflict, notFound } from '../errors';
import { Setting } from '../models/Setting';

/** Body of POST /v1/settings (key included) and PUT /v1/settings/{key} (key from the path). */
export interface SettingInput {
  value: unknown;
  description?: string | null;
  is_public?: boolean;
}

const row = (r: Record<string, unknown>) => Setting.fromDatabaseJson(r) as Setting;

function settingEvent(key: string, event_type: string, metadata: Record<string, unknown> = {}) {
  return { event_type, resource_type: 'setting', resource_id: key, metadata: { key, ...metadata } };
}

/** Creates a setting (409 when the key exists) and records setting_created. */
export async function createSetting(db: Knex, key: string, input: SettingInput, by: Attribution): Promise<Setting> {
  return transaction(db, async (trx) => {
    const [created] = await trx('settings')
      .insert({
        key,
        value: JSON.stringify(input.value),
        description: input.description ?? null,
        is_public: input.is_public ?? false,
      })
      .onConflict('key')
      .ignore()
      .returning('*');
    if (!created) throw conflict(`setting ${key} already exists`);
    await recordAuditEvent(attributed(by, settingEvent(key, 'setting_created', { is_public: created.is_public })), trx);
    return row(created);
  });
}

/**
 * Replaces a setting's value, description and is_public (404 when missing; omitted description and
 * is_public are reset to null and false, as a PUT replaces) and records setting_updated.
 */
export async function replaceSetting(db: Knex, key: string, input: SettingInput, by: Attribution): Promise<Setting> {
  return transaction(db, async (trx) => {
    const [updated] = await trx('settings')
      .where('key', key)
      .update({
        value: JSON.stringify(input.value),
        description: input.description ?? null,
        is_public: input.is_public ?? false,
        updated_at: trx.fn.now(),
      })
      .returning('*');
    if (!updated) throw notFound('setting');
    await recordAuditEvent(attributed(by, settingEvent(key, 'setting_updated', { is_public: updated.is_public })), trx);
    return row(updated);
  });
}

/** Deletes a setting (404 when missing) and records setting_deleted. */
export async function deleteSetting(db: Knex, key: string, by: Attribution): Promise<void> {
  await transaction(db, async (trx) => {
    const n = await trx('settings').where('key', key).delete();
    if (!n) throw notFound('setting');
    await recordAuditEvent(attributed(by, settingEvent(key, 'setting_deleted')), trx);
  });
}
