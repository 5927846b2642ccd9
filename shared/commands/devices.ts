import type { Knex } from 'knex';
import { afterCommit, runCommitted, transaction } from '../db';
import { badRequest, notFound } from '../errors';
import { Device } from '../models/Device';
import { insertGrouped } from '../groupedInsert';
import { authorize, Principal, subjects } from '../policies';
import { invalidateTrackerLinks, TrackerLinkServices } from './trackerLinks';
import { insertRow, patchFound, patchLoaded } from '../models/AppModel';

/** Device fields of POST/PATCH /v1/devices. */
export interface DeviceInput {
  name?: string;
  description?: string | null;
  device_type?: string | null;
  is_active?: boolean;
  /** Tracker key to link (null unlinks). */
  api_key_id?: string | null;
}

/**
 * Locks the key and checks who may link it (spec §4.3): the key's owner or a system key. Returns
 * the other devices the key is linked to now (at most one), which lose it: while the key's row is
 * locked no other link of it can commit.
 */
async function lockKey(trx: Knex, principal: Principal, apiKeyId: string, deviceId: string | null): Promise<string[]> {
  const key = await trx('api_keys').where('id', apiKeyId).forUpdate().first('id', 'user_id', 'is_system');
  if (!key) throw badRequest('api_key_id: no such API key');
  authorize(principal, 'linkToDevice', subjects.apiKey(key));
  const q = trx('devices').where('api_key_id', apiKeyId);
  if (deviceId) q.whereNot('id', deviceId);
  return (await q.select('id')).map((r: { id: string }) => r.id);
}

/**
 * Creates (id null) or patches a device, linking its API key when asked. The tracker keys whose
 * cached device/trip link changed are invalidated after the commit.
 */
export async function saveDevice(
  services: TrackerLinkServices,
  principal: Principal,
  id: string | null,
  input: DeviceInput,
): Promise<Device> {
  const fields = Object.fromEntries(Object.entries(input).filter(([, v]) => v !== undefined)) as Partial<Device>;
  // A new device without a tracker key is one INSERT (shared with concurrent creates, insertGrouped):
  // nothing to lock, take or invalidate, so no transaction (BEGIN and COMMIT would be two more round trips).
  if (id === null && typeof input.api_key_id !== 'string') return insertGrouped(Device, services.db, fields);
  if (id !== null && input.api_key_id === undefined) {
    // A change that leaves the tracker key alone: one UPDATE … RETURNING, no lock, no transaction.
    return patchFound(Device, services.db, id, fields, 'device');
  }
  // A key taken as unchanged that another change moved before the lock: the save runs again from
  // the start, now as a change of key (locked and checked), rather than answering an error.
  for (let attempt = 1; ; attempt++) {
    try {
      return await saveDeviceOnce(services, principal, id, input, fields);
    } catch (err) {
      if (!(err instanceof KeyMoved) || attempt >= 3) throw err;
    }
  }
}

class KeyMoved extends Error {}

async function saveDeviceOnce(
  services: TrackerLinkServices,
  principal: Principal,
  id: string | null,
  input: DeviceInput,
  fields: Partial<Device>,
): Promise<Device> {
  return transaction(services.db, async (trx) => {
    // An unknown device is a 404 whatever the body says; a key sent as it already is (a client
    // sending the whole device back) is no change: neither locked nor checked.
    const current = id ? await trx('devices').where('id', id).first('api_key_id') : undefined;
    if (id && !current) throw notFound('device');
    const newKey =
      typeof input.api_key_id === 'string' && input.api_key_id !== current?.api_key_id ? input.api_key_id : undefined;
    // The key first, then every device the change touches (this one and the key's current one) in
    // id order: two requests swapping keys between two devices each locked their own device and
    // then waited for the other's, a deadlock (500).
    const holders = newKey ? await lockKey(trx, principal, newKey, id) : [];
    const devices = [...new Set([...(id ? [id] : []), ...holders])].sort();
    if (devices.length) await trx('devices').whereIn('id', devices).orderBy('id').forUpdate().select('id');
    const before = id ? await Device.query(trx).findById(id) : undefined;
    if (id && !before) throw notFound('device');
    // The key was taken as unchanged, but another change moved it before the lock: not checked
    // here, so the save starts again (saveDevice).
    if (!newKey && typeof input.api_key_id === 'string' && input.api_key_id !== before?.api_key_id)
      throw new KeyMoved();
    const trackerKeys: string[] = [];
    if (newKey && newKey !== before?.api_key_id) {
      trackerKeys.push(newKey);
      // Still holding it (a change that committed while this waited may have given it another key).
      const unlinked = holders.length
        ? await trx('devices')
            .whereIn('id', holders)
            .where('api_key_id', newKey)
            .update({ api_key_id: null, updated_at: trx.fn.now() })
        : 0;
      if (unlinked) trackerKeys.push(newKey);
    }
    if (before?.api_key_id && input.api_key_id !== undefined && input.api_key_id !== before.api_key_id)
      trackerKeys.push(before.api_key_id);
    const device = before ? await patchLoaded(before, trx, fields, 'device') : await insertRow(Device, trx, fields);
    afterCommit(trx, () => invalidateTrackerLinks(services, trackerKeys));
    return device;
  });
}

/** Deletes a device; its trips and templates keep existing without it. Its tracker key's link is dropped. */
export async function deleteDevice(services: TrackerLinkServices, id: string): Promise<void> {
  // One statement, so no transaction: the key's link is dropped once the delete has committed.
  const [row] = await services.db('devices').where('id', id).delete().returning('api_key_id');
  if (!row) throw notFound('device');
  await runCommitted(() => invalidateTrackerLinks(services, [row.api_key_id]));
}
