import type { Knex } from 'knex';
import { LocationContact } from '../models/LocationContact';

/** The contacts of a location by name. */
export async function contactsOf(db: Knex, locationId: string): Promise<LocationContact[]> {
  return LocationContact.query(db).where('location_id', locationId).orderByRaw('lower(name), name, created_at');
}
