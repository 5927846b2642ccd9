import type { Location } from '../models/Location';
import type { LocationContact } from '../models/LocationContact';
import { z } from '../zod';
import { iso } from './iso';

/** Location contact (spec §2). */
export const locationContactSchema = z
  .object({
    id: z.string().uuid(),
    location_id: z.string().uuid(),
    name: z.string(),
    phone: z.string().nullable(),
    email: z.string().nullable(),
    role: z.string().nullable(),
    created_at: z.string().describe('ISO 8601'),
  })
  .openapi('LocationContact');

/** Location (spec §2); `contacts` only when fetched singly or created. */
export const locationSchema = z
  .object({
    id: z.string().uuid(),
    name: z.string(),
    street: z.string().nullable(),
    zip: z.string().nullable(),
    city: z.string().nullable(),
    country: z.string().nullable(),
    latitude: z.number().nullable(),
    longitude: z.number().nullable(),
    notes: z.string().nullable(),
    is_active: z.boolean(),
    created_at: z.string().describe('ISO 8601'),
    updated_at: z.string().describe('ISO 8601'),
    contacts: z.array(locationContactSchema).optional().describe('single GET and create only'),
  })
  .openapi('Location');

/** A location contact as the API shows it. */
export function presentLocationContact(c: LocationContact): z.infer<typeof locationContactSchema> {
  return {
    id: c.id,
    location_id: c.location_id,
    name: c.name,
    phone: c.phone,
    email: c.email,
    role: c.role,
    created_at: iso(c.created_at),
  };
}

/** A location as the API shows it, with its contacts when given. */
export function presentLocation(l: Location, contacts?: LocationContact[]): z.infer<typeof locationSchema> {
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
    created_at: iso(l.created_at),
    updated_at: iso(l.updated_at),
    ...(contacts ? { contacts: contacts.map(presentLocationContact) } : {}),
  };
}
