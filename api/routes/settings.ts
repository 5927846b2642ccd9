import Router from '@koa/router';
import { publicStats } from '../../shared/caches/publicStats';
import { createSetting, deleteSetting, replaceSetting } from '../../shared/commands/settings';
import { updateSystemConfig } from '../../shared/commands/systemConfig';
import { Setting } from '../../shared/models/Setting';
import { presentSetting, settingSchema } from '../../shared/presenters/setting';
import { presentSystemConfig, systemConfigSchema, SystemConfigRow } from '../../shared/presenters/systemConfig';
import { findOr404 } from '../../shared/rowLoader';
import { notFound } from '../../shared/errors';
import { z, zChars, zJsonAtMost } from '../../shared/zod';
import { created, listSchema, noContent, resource, resourceSchema } from '../responses';
import { AppState, defineRoute, requestAttribution } from '../routing';
import type { ApiServices } from '../services';

const zSettingKey = () =>
  zChars(
    { min: 1, max: 100 },
    z
      .string({ required_error: 'is required', invalid_type_error: 'must be a string' })
      .regex(
        /^[A-Za-z0-9][A-Za-z0-9._-]*$/,
        'may contain only letters, digits, dot, underscore and hyphen, and must start with a letter or digit',
      ),
  )
    // In any case: paths match case-insensitively, so GET /v1/settings/Public is the public list.
    .refine((k) => k.toLowerCase() !== 'public', 'public is reserved (in any case)');
/**
 * Largest value of a setting (or config entry), as JSON: settings are read whole, by every client
 * that lists them (the public ones without credentials), so one may not be a document store.
 */
const MAX_SETTING_VALUE_BYTES = 64 * 1024;
const settingFields = {
  value: zJsonAtMost(
    z.unknown().refine((v) => v !== undefined, 'is required'),
    MAX_SETTING_VALUE_BYTES,
  ).openapi({ description: `Any JSON value, at most ${MAX_SETTING_VALUE_BYTES / 1024} KiB as JSON` }),
  description: zChars({ max: 10_000 }, z.string({ invalid_type_error: 'must be a string' }))
    .nullable()
    .optional(),
  is_public: z.boolean({ invalid_type_error: 'must be a boolean' }).optional(),
};
const keyParam = z.object({ key: zSettingKey() });
const configKeyParam = z.object({ key: zChars({ min: 1, max: 200 }) });
const errors = {
  400: { description: 'Invalid input' },
  401: { description: 'Authentication required' },
  403: { description: 'Insufficient permissions' },
  404: { description: 'Not found' },
};
const publicStatsSchema = z
  .object({
    users: z.number().int(),
    devices: z.number().int(),
    trips: z.object({ total: z.number().int(), active: z.number().int() }),
    gps_points: z.number().int(),
    geofences: z.number().int(),
    guilds: z.number().int(),
  })
  .openapi('PublicStats');

const escapeLike = (s: string) => s.replace(/[\\%_]/g, '\\$&');

/** Spec §4.9: settings, system config and the public statistics. */
export function settingRoutes(router: Router<AppState, { services: ApiServices }>): void {
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/settings',
      summary: 'All settings, by key',
      tags: ['settings'],
      auth: { permission: 'settings:read' },
      cacheBy: ['settings'],
      responses: { 200: { description: 'Settings', schema: listSchema(settingSchema) }, ...errors },
    },
    async (ctx) => {
      ctx.body = resource(ctx, (await Setting.query(ctx.services.db).orderBy('key')).map(presentSetting));
    },
  );

  // Before /:key, so `public` is never read as a key (and no setting may be called that).
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/settings/public',
      summary: 'The public settings (is_public), by key',
      tags: ['settings'],
      auth: 'public',
      cacheBy: ['settings'],
      responses: { 200: { description: 'Public settings', schema: listSchema(settingSchema) } },
    },
    async (ctx) => {
      ctx.body = resource(
        ctx,
        (await Setting.query(ctx.services.db).where('is_public', true).orderBy('key')).map(presentSetting),
      );
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/settings/:key',
      summary: 'Get a setting',
      tags: ['settings'],
      auth: { permission: 'settings:read' },
      params: keyParam,
      responses: { 200: { description: 'Setting', schema: resourceSchema(settingSchema) }, ...errors },
    },
    async (ctx, { params }) => {
      ctx.body = resource(ctx, presentSetting(await findOr404(Setting, params.key, 'setting')));
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/settings',
      summary: 'Create a setting (409 when the key exists)',
      tags: ['settings'],
      auth: { permission: 'settings:write' },
      body: z.object({ key: zSettingKey(), ...settingFields }),
      responses: {
        201: { description: 'Created setting', schema: resourceSchema(settingSchema) },
        409: { description: 'The key exists' },
        ...errors,
      },
    },
    async (ctx, { body }) => {
      const { key, ...input } = body;
      const s = await createSetting(ctx.services.db, key, input, requestAttribution(ctx));
      const self = `/v1/settings/${encodeURIComponent(s.key)}`;
      created(ctx, resource(ctx, presentSetting(s), self), self);
    },
  );

  defineRoute(
    router,
    {
      method: 'put',
      path: '/v1/settings/:key',
      summary: 'Replace a setting’s value, description and is_public (404 when missing)',
      description: 'Omitted description and is_public become null and false.',
      tags: ['settings'],
      auth: { permission: 'settings:write' },
      params: keyParam,
      body: z.object(settingFields),
      responses: { 200: { description: 'Replaced setting', schema: resourceSchema(settingSchema) }, ...errors },
    },
    async (ctx, { params, body }) => {
      const s = await replaceSetting(ctx.services.db, params.key, body, requestAttribution(ctx));
      ctx.body = resource(ctx, presentSetting(s));
    },
  );

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/settings/:key',
      summary: 'Delete a setting',
      tags: ['settings'],
      auth: { permission: 'settings:delete' },
      params: keyParam,
      responses: { 204: { description: 'Deleted' }, ...errors },
    },
    async (ctx, { params }) => {
      await deleteSetting(ctx.services.db, params.key, requestAttribution(ctx));
      noContent(ctx);
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/system-config',
      summary: 'System config entries by key (bare array), optionally those whose key starts with prefix',
      tags: ['system-config'],
      auth: { permission: 'settings:read' },
      cacheBy: ['system_config'],
      query: z.object({ prefix: zChars({ max: 200 }).optional() }),
      responses: { 200: { description: 'Entries', schema: z.array(systemConfigSchema) }, ...errors },
    },
    async (ctx, { query }) => {
      const q = ctx.services.db('system_config').select('key', 'value', 'description', 'updated_at').orderBy('key');
      if (query.prefix) q.whereRaw("key LIKE ? ESCAPE '\\'", [`${escapeLike(query.prefix)}%`]);
      ctx.body = ((await q) as SystemConfigRow[]).map(presentSystemConfig);
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/system-config/:key',
      summary: 'Get a system config entry',
      tags: ['system-config'],
      auth: { permission: 'settings:read' },
      cacheBy: ['system_config'],
      params: configKeyParam,
      responses: { 200: { description: 'Entry', schema: resourceSchema(systemConfigSchema) }, ...errors },
    },
    async (ctx, { params }) => {
      const row: SystemConfigRow | undefined = await ctx.services
        .db('system_config')
        .where('key', params.key)
        .first('key', 'value', 'description', 'updated_at');
      if (!row) throw notFound('system config entry');
      ctx.body = resource(ctx, presentSystemConfig(row));
    },
  );

  defineRoute(
    router,
    {
      method: 'patch',
      path: '/v1/system-config/:key',
      summary: 'Set a system config entry’s value (of the type declared for the key)',
      description:
        'Entries are pre-seeded and never created or deleted. A value of the wrong type or range is a 400 naming `value`; every running process uses the new value within a second.',
      tags: ['system-config'],
      auth: { permission: 'settings:write' },
      params: configKeyParam,
      body: z.object({ value: settingFields.value }).strict(),
      responses: { 200: { description: 'Updated entry', schema: resourceSchema(systemConfigSchema) }, ...errors },
    },
    async (ctx, { params, body }) => {
      const row = await updateSystemConfig(ctx.services, params.key, body.value, requestAttribution(ctx));
      ctx.body = resource(ctx, presentSystemConfig(row));
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/stats/public',
      summary: 'Public platform statistics (cached for a minute)',
      tags: ['stats'],
      auth: 'public',
      responses: { 200: { description: 'Counts', schema: publicStatsSchema } },
    },
    async (ctx) => {
      const s = ctx.services;
      ctx.body = await publicStats(s.db, s.redis, s.config);
      ctx.set('Cache-Control', 'public, max-age=60');
    },
  );
}
