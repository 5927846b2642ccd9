import type { Knex } from 'knex';
import { transaction } from '../db';
import { notFound } from '../errors';
import { Location } from '../models/Location';
import { LocationContact } from '../models/LocationContact';
import { insertGrouped } from '../groupedInsert';
import { contactsOf } from '../queries/locationContacts';
import { deleteById, insertRow, patchLoaded } from '../models/AppModel';

/** Fields of POST/PATCH /v1/locations. */
export interface LocationInput {
  name?: string;
  street?: string | null;
  zip?: string | null;
  city?: string | null;
  country?: string | null;
  latitude?: number | null;
  longitude?: number | null;
  notes?: string | null;
  is_active?: boolean;
}

/** Fields of a location contact. */
export interface LocationContactInput {
  name?: string;
  phone?: string | null;
  email?: string | null;
  role?: string | null;
}

/** Creates a location with its contacts in one transaction; returns both as stored. */
export async function createLocation(
  db: Knex,
  input: LocationInput & { name: string; contacts?: Array<LocationContactInput & { name: string }> },
): Promise<{ location: Location; contacts: LocationContact[] }> {
  const { contacts = [], ...fields } = input;
  // Without contacts it is one INSERT, shared with the locations created meanwhile (insertGrouped).
  if (contacts.length === 0) return { location: await insertGrouped(Location, db, fields), contacts: [] };
  return transaction(db, async (trx) => {
    const location = await insertRow(Location, trx, fields);
    if (contacts.length) {
      await LocationContact.query(trx).insert(contacts.map((c) => ({ ...c, location_id: location.id })));
    }
    return { location, contacts: await contactsOf(trx, location.id) };
  });
}

/** Patches a location the caller loaded (contacts have their own commands). */
export async function updateLocation(db: Knex, location: Location, input: LocationInput): Promise<Location> {
  return patchLoaded(location, db, input, 'location');
}

/** Deletes a location and, by the foreign key, its contacts (404 when there is none). */
export async function deleteLocation(db: Knex, id: string): Promise<void> {
  const n = await deleteById(Location, db, id);
  if (!n) throw notFound('location');
}

/** Adds a contact to a location the caller loaded. */
export async function addLocationContact(
  db: Knex,
  location: Location,
  input: LocationContactInput & { name: string },
): Promise<LocationContact> {
  return insertGrouped(LocationContact, db, { ...input, location_id: location.id });
}

/** Patches a contact of a location (404 when the location has no such contact). */
export async function updateLocationContact(
  db: Knex,
  locationId: string,
  contactId: string,
  input: LocationContactInput,
): Promise<LocationContact> {
  const contact = await LocationContact.query(db).findOne({ id: contactId, location_id: locationId });
  if (!contact) throw notFound('location contact');
  return patchLoaded(contact, db, input, 'location contact');
}

/** Removes a contact of a location (404 when the location has no such contact). */
export async function deleteLocationContact(db: Knex, locationId: string, contactId: string): Promise<void> {
  const n = await LocationContact.query(db).delete().where({ id: contactId, location_id: locationId });
  if (!n) throw notFound('location contact');
}
