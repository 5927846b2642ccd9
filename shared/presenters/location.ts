import type { Location } from '../models/Location';
import type { LocationContact } from '../models/LocationContact';

/** Location contact (spec §2). */
export function presentLocationContact(c: LocationContact) {
  return {
    id: c.id,
    location_id: c.location_id,
    name: c.name,
    phone: c.phone,
    email: c.email,
    role: c.role,
    created_at: c.created_at.toISOString(),
  };
}

/** Location (spec §2); `contacts` only when fetched singly or created. */
export function presentLocation(l: Location, contacts?: LocationContact[]) {
  return {
    id: l.id,
    name: l.name,
    street: l.street,
    zip: l.zip,
    city: l.city,
    country: l.country,
    latitude: l.latitude,
    longitude: l.longitude,
    notes: l.notes,
    is_active: l.is_active,
    created_at: l.created_at.toISOString(),
    updated_at: l.updated_at.toISOString(),
    ...(contacts ? { contacts: contacts.map(presentLocationContact) } : {}),
  };
}
