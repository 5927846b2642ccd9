import type { Knex } from 'knex';
import type { LocationContact } from '../models/LocationContact';
import { turnBatcherByDb } from '../rowLoader';
import { contactsOfLocations } from './trackingBatches';

/** Contacts of the locations asked for in one turn: one statement (shared/rowLoader.ts turnBatcher). */
const contactsInTurn = turnBatcherByDb(contactsOfLocations);

/** The contacts of a location by name. */
export async function contactsOf(db: Knex, locationId: string): Promise<LocationContact[]> {
  return (await contactsInTurn(db, locationId)) ?? [];
}
