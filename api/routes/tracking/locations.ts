import Router from '@koa/router';
import {
  addLocationContact,
  createLocation,
  deleteLocation,
  deleteLocationContact,
  updateLocation,
  updateLocationContact,
} from '../../../shared/commands/locations';
import { notFound } from '../../../shared/errors';
import { Location } from '../../../shared/models/Location';
import { LocationContact } from '../../../shared/models/LocationContact';
import {
  locationContactSchema,
  locationSchema,
  presentLocation,
  presentLocationContact,
} from '../../../shared/presenters/location';
import { contactsOf } from '../../../shared/queries/locationContacts';
import { findOr404 } from '../../../shared/rowLoader';
import { atLeastOne, z, zChars, zList, zUuid } from '../../../shared/zod';
import { paginate, paginationQuery } from '../../pagination';
import { created, noContent, pageSchema, resource, resourceSchema } from '../../responses';
import { AppState, defineRoute } from '../../routing';
import type { ApiServices } from '../../services';
import { errors, idParam, zLatitude, zLongitude, zName, zText } from './schemas';
import { byName } from '../../../shared/queries/byName';

const contactParams = z.object({ id: zUuid(), cid: zUuid() });
const zShort = (max: number) =>
  zChars({ trim: true, max }, z.string({ invalid_type_error: 'must be a string' }))
    .nullable()
    .optional();

const contactFields = {
  name: zName(),
  phone: zShort(64),
  email: zChars({ max: 320 }, z.string().trim().email('must be an email address')).nullable().optional(),
  role: zShort(255),
};
const contactBody = z.object(contactFields);
const contactPatch = atLeastOne(z.object({ ...contactFields, name: zName().optional() }));

const locationFields = {
  name: zName(),
  street: zShort(255),
  zip: zShort(32),
  city: zShort(255),
  country: z
    .string()
    .trim()
    .regex(/^[A-Za-z]{2,3}$/, 'must be an ISO 3166 country code (2 or 3 letters)')
    .transform((c) => c.toUpperCase())
    .nullable()
    .optional(),
  latitude: zLatitude().nullable().optional(),
  longitude: zLongitude().nullable().optional(),
  notes: zText(),
};
const createBody = z.object({ ...locationFields, contacts: zList(contactBody, { max: 100 }).optional() });
const patchBody = atLeastOne(
  z.object({ ...locationFields, name: zName().optional(), is_active: z.boolean().optional() }),
);

/** Spec §4.5. */
export function locationRoutes(router: Router<AppState, { services: ApiServices }>): void {
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/locations',
      summary: 'List locations by name',
      tags: ['locations'],
      auth: { permission: 'locations:read' },
      cacheBy: ['locations'],
      query: paginationQuery(10),
      responses: {
        200: { description: 'Locations (without contacts)', schema: pageSchema(locationSchema) },
        ...errors,
      },
    },
    async (ctx, { query }) => {
      ctx.body = await paginate(ctx, Location.query(ctx.services.db).orderByRaw(byName()), query, (l) =>
        presentLocation(l),
      );
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/locations/:id',
      summary: 'Get a location with its contacts',
      tags: ['locations'],
      auth: { permission: 'locations:read' },
      cacheBy: ['locations', 'location_contacts'],
      params: idParam,
      responses: { 200: { description: 'Location', schema: resourceSchema(locationSchema) }, ...errors },
    },
    async (ctx, { params }) => {
      // Both reads in the same turn's batches: one round trip, not two.
      const [location, contacts] = await Promise.all([
        findOr404(Location, params.id, 'location'),
        contactsOf(ctx.services.db, params.id),
      ]);
      ctx.body = resource(ctx, presentLocation(location, contacts));
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/locations',
      summary: 'Create a location with its contacts',
      tags: ['locations'],
      auth: { permission: 'locations:write' },
      body: createBody,
      bodyExample: { name: 'Depot', latitude: 52.52, longitude: 13.405 },
      responses: {
        201: { description: 'Created location with contacts', schema: resourceSchema(locationSchema) },
        ...errors,
      },
    },
    async (ctx, { body }) => {
      const { location, contacts } = await createLocation(ctx.services.db, body);
      created(ctx, resource(ctx, presentLocation(location, contacts), `/v1/locations/${location.id}`));
    },
  );

  defineRoute(
    router,
    {
      method: 'patch',
      path: '/v1/locations/:id',
      summary: 'Update a location (at least one field; contacts have their own routes)',
      tags: ['locations'],
      auth: { permission: 'locations:write' },
      params: idParam,
      body: patchBody,
      responses: {
        200: { description: 'Updated location with contacts', schema: resourceSchema(locationSchema) },
        ...errors,
      },
    },
    async (ctx, { params, body }) => {
      const location = await findOr404(Location, params.id, 'location');
      const updated = await updateLocation(ctx.services.db, location, body);
      ctx.body = resource(ctx, presentLocation(updated, await contactsOf(ctx.services.db, location.id)));
    },
  );

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/locations/:id',
      summary: 'Delete a location and its contacts',
      tags: ['locations'],
      auth: { permission: 'locations:delete' },
      params: idParam,
      responses: { 204: { description: 'Deleted' }, ...errors },
    },
    async (ctx, { params }) => {
      await deleteLocation(ctx.services.db, params.id);
      noContent(ctx);
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/locations/:id/contacts',
      summary: 'Add a contact to a location',
      tags: ['locations'],
      auth: { permission: 'locations:write' },
      params: idParam,
      body: contactBody,
      responses: { 201: { description: 'Created contact', schema: resourceSchema(locationContactSchema) }, ...errors },
    },
    async (ctx, { params, body }) => {
      const location = await findOr404(Location, params.id, 'location');
      const contact = await addLocationContact(ctx.services.db, location, body);
      created(
        ctx,
        resource(ctx, presentLocationContact(contact), `/v1/locations/${location.id}/contacts/${contact.id}`),
      );
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/locations/:id/contacts/:cid',
      summary: 'Get a contact of a location',
      description: "The `_links.self` of a contact's create and update. 404 for a contact of another location.",
      tags: ['locations'],
      auth: { permission: 'locations:read' },
      cacheBy: ['location_contacts'],
      params: contactParams,
      responses: { 200: { description: 'Contact', schema: resourceSchema(locationContactSchema) }, ...errors },
    },
    async (ctx, { params }) => {
      // One batched read by id; a contact reached through another location's path is not found,
      // as PATCH and DELETE of that path answer.
      const contact = await findOr404(LocationContact, params.cid, 'location contact');
      if (contact.location_id !== params.id) throw notFound('location contact');
      ctx.body = resource(ctx, presentLocationContact(contact));
    },
  );

  defineRoute(
    router,
    {
      method: 'patch',
      path: '/v1/locations/:id/contacts/:cid',
      summary: 'Update a contact (at least one field)',
      tags: ['locations'],
      auth: { permission: 'locations:write' },
      params: contactParams,
      body: contactPatch,
      responses: { 200: { description: 'Updated contact', schema: resourceSchema(locationContactSchema) }, ...errors },
    },
    async (ctx, { params, body }) => {
      const contact = await updateLocationContact(ctx.services.db, params.id, params.cid, body);
      ctx.body = resource(ctx, presentLocationContact(contact));
    },
  );

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/locations/:id/contacts/:cid',
      summary: 'Remove a contact',
      tags: ['locations'],
      auth: { permission: 'locations:write' },
      params: contactParams,
      responses: { 204: { description: 'Deleted' }, ...errors },
    },
    async (ctx, { params }) => {
      await deleteLocationContact(ctx.services.db, params.id, params.cid);
      noContent(ctx);
    },
  );
}
