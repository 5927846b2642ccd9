import Router from '@koa/router';
import { deleteDevice, saveDevice } from '../../../shared/commands/devices';
import { Device } from '../../../shared/models/Device';
import { deviceSchema, presentDevice } from '../../../shared/presenters/device';
import { findOr404 } from '../../../shared/rowLoader';
import { atLeastOne, z, zChars, zUuid } from '../../../shared/zod';
import { paginate, paginationQuery } from '../../pagination';
import { created, noContent, pageSchema, resource, resourceSchema } from '../../responses';
import { AppState, defineRoute } from '../../routing';
import type { ApiServices } from '../../services';
import { errors, idParam, zName, zText } from './schemas';
import { byName } from '../../../shared/queries/byName';

const deviceFields = {
  name: zName(),
  description: zText(),
  device_type: zChars({ trim: true, min: 1, max: 100 }).nullable().optional(),
  api_key_id: zUuid().nullable().optional().openapi({
    description:
      "Tracker API key to link (the key's owner or a system key only); a key linked elsewhere is moved here. null unlinks.",
  }),
};
const createBody = z.object(deviceFields);
const patchBody = atLeastOne(
  z.object({ ...deviceFields, name: zName().optional(), is_active: z.boolean().optional() }),
);
const linkErrors = { ...errors, 403: { description: "Missing permission, or linking a key that is not the caller's" } };

/** Spec §4.3. */
export function deviceRoutes(router: Router<AppState, { services: ApiServices }>): void {
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/devices',
      summary: 'List devices by name',
      tags: ['devices'],
      auth: { permission: 'devices:read' },
      cacheBy: ['devices'],
      query: paginationQuery(10),
      responses: { 200: { description: 'Devices', schema: pageSchema(deviceSchema) }, ...errors },
    },
    async (ctx, { query }) => {
      ctx.body = await paginate(ctx, Device.query(ctx.services.db).orderByRaw(byName()), query, presentDevice);
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/devices/:id',
      summary: 'Get a device',
      tags: ['devices'],
      auth: { permission: 'devices:read' },
      params: idParam,
      responses: { 200: { description: 'Device', schema: resourceSchema(deviceSchema) }, ...errors },
    },
    async (ctx, { params }) => {
      ctx.body = resource(ctx, presentDevice(await findOr404(Device, params.id, 'device')));
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/devices',
      summary: 'Create a device, optionally linked to its tracker API key',
      tags: ['devices'],
      auth: { permission: 'devices:write' },
      body: createBody,
      responses: { 201: { description: 'Created device', schema: resourceSchema(deviceSchema) }, ...linkErrors },
    },
    async (ctx, { body }) => {
      const device = await saveDevice(ctx.services, ctx.state.principal, null, body);
      created(ctx, resource(ctx, presentDevice(device), `/v1/devices/${device.id}`));
    },
  );

  defineRoute(
    router,
    {
      method: 'patch',
      path: '/v1/devices/:id',
      summary: 'Update a device (at least one field)',
      tags: ['devices'],
      auth: { permission: 'devices:write' },
      params: idParam,
      body: patchBody,
      responses: { 200: { description: 'Updated device', schema: resourceSchema(deviceSchema) }, ...linkErrors },
    },
    async (ctx, { params, body }) => {
      const device = await saveDevice(ctx.services, ctx.state.principal, params.id, body);
      ctx.body = resource(ctx, presentDevice(device));
    },
  );

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/devices/:id',
      summary: 'Delete a device',
      tags: ['devices'],
      auth: { permission: 'devices:delete' },
      params: idParam,
      responses: { 204: { description: 'Deleted' }, ...errors },
    },
    async (ctx, { params }) => {
      await deleteDevice(ctx.services, params.id);
      noContent(ctx);
    },
  );
}
