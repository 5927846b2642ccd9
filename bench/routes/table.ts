import type Koa from 'koa';
import pino from 'pino';
import { createApp } from '../../api/app';
import { buildGraphqlSchema } from '../../api/graphql';
import type { ApiServices } from '../../api/services';
import { loadConfig } from '../../shared/config';
import { systemKeyAllowed } from '../../shared/policies';
import { openApiRegistry } from '../../shared/zod';
import type { Fixtures } from './fixtures';

/** Who a route admits, as far as the benchmark needs to know to pick a credential. */
export type RouteAuth = 'public' | 'system' | 'credential' | 'undocumented';

export interface RouteEntry {
  method: string;
  /** Koa path pattern, e.g. `/v1/trips/:id`. */
  path: string;
  auth: RouteAuth;
  /** Query parameters the route's schema requires. */
  requiredQuery: string[];
}

interface RouterLayer {
  path: string | RegExp;
  methods: string[];
}

/**
 * The api's route table, read from the router the real application mounts: createApp() is called
 * here (in the benchmark process, not in the measured one) and its router's layers are listed, so
 * a route is in the benchmark by being in the application, whatever module registered it. What
 * defineRoute also recorded in the OpenAPI registry (access rule, query schema) is joined by method
 * and path; routes registered on the router directly (OpenAPI document, Swagger UI, GraphQL) are
 * 'undocumented' and called with the admin's session.
 */
export async function readRouteTable(env: Record<string, string | undefined>): Promise<RouteEntry[]> {
  const config = loadConfig({ ...env, LOG_LEVEL: 'silent' });
  // createApp only wires middleware and routes; nothing it builds is called here.
  const services = { config, logger: pino({ level: 'silent' }) } as unknown as ApiServices;
  const app = createApp(services, await buildGraphqlSchema()) as unknown as Koa;
  const dispatch = app.middleware.find((m) => (m as unknown as { router?: unknown }).router) as unknown as
    { router: { stack: RouterLayer[] } } | undefined;
  if (!dispatch)
    throw new Error('no router among the application middleware (api/app.ts): cannot read the route table');

  const documented = new Map(documentedRoutes().map((e) => [`${e.method} ${e.path}`, e]));
  const entries: RouteEntry[] = [];
  for (const layer of dispatch.router.stack) {
    for (const method of layer.methods) {
      if (method === 'HEAD') continue; // added by the router beside every GET
      // A pattern route cannot be filled, but is listed (as such) rather than dropped.
      const path = typeof layer.path === 'string' ? layer.path : String(layer.path);
      const doc = documented.get(`${method} ${path}`);
      entries.push(doc ?? { method, path, auth: 'undocumented', requiredQuery: [] });
    }
  }
  return entries;
}

/**
 * The routes defineRoute documented in the OpenAPI registry of this process (filled once the
 * application's routes are mounted: by createApp, or by a running api in the same process), with
 * their access rule and required query parameters. routing.ts documents 'public' with no security
 * requirement and 'system' as "Access: system.".
 */
export function documentedRoutes(): RouteEntry[] {
  const out = new Map<string, RouteEntry>();
  for (const d of openApiRegistry.definitions) {
    if (d.type !== 'route') continue;
    const r = d.route as unknown as {
      method: string;
      path: string;
      security?: unknown[];
      description?: string;
      request?: { query?: unknown };
    };
    const method = r.method.toUpperCase();
    const path = r.path.replace(/\{([A-Za-z0-9_]+)\}/g, ':$1');
    let auth: RouteAuth = 'credential';
    if (Array.isArray(r.security) && r.security.length === 0) auth = 'public';
    else if (/(^|\n)Access: system\./.test(r.description ?? '')) auth = 'system';
    out.set(`${method} ${path}`, { method, path, auth, requiredQuery: requiredKeys(r.request?.query) });
  }
  return [...out.values()];
}

/** Required keys of a zod object schema (unwrapping refinements), as far as it can be read. */
function requiredKeys(schema: unknown): string[] {
  let s = schema as
    | {
        shape?: Record<string, { isOptional(): boolean }>;
        _def?: { schema?: unknown; shape?: () => Record<string, { isOptional(): boolean }> };
      }
    | undefined;
  for (let i = 0; i < 5 && s && !s.shape && s._def?.schema; i++) s = s._def.schema as typeof s;
  const shape = s?.shape ?? s?._def?.shape?.();
  if (!shape) return [];
  return Object.entries(shape)
    .filter(([, v]) => !v.isOptional())
    .map(([k]) => k);
}

export type Credential = { kind: 'none' } | { kind: 'session' | 'system' | 'apiKey'; token: string; label: string };

export interface FilledRoute {
  entry: RouteEntry;
  /** Concrete paths (with query), rotated through by the load. */
  paths: string[];
  credential: Credential;
}

export interface UnfilledRoute {
  entry: RouteEntry;
  reason: string;
}

/**
 * Values of path parameters, by the literal segment before the parameter and its name
 * (`trips:id` for /v1/trips/:id, `users:id` for /v1/users/:id/roles and /v1/admin/users/:id,
 * `email:email` for /v1/users/email/:email), else by name alone (`*:token`).
 */
function paramValues(f: Fixtures): Record<string, string[]> {
  const s = f.sample;
  return {
    'sessions:token': s.sessionTokens,
    'roles:id': s.roles,
    'permissions:id': s.permissions,
    'api-keys:id': s.apiKeys,
    'clients:id': s.oauthClients,
    'gps:id': s.gpsPoints,
    'devices:id': s.devices,
    'trips:id': s.trips,
    'locations:id': s.locations,
    'contacts:cid': s.contacts,
    'geofences:id': s.geofences,
    'trip-categories:id': s.categories,
    'trip-templates:id': s.templates,
    'users:id': s.users,
    'accounts:account_id': s.accounts,
    'email:email': s.emails,
    'platforms:id_or_slug': s.platforms,
    'settings:key': s.settings,
    'system-config:key': s.systemConfig,
    'integrations:id': s.integrations,
    'platform:slug': ['stream'],
    'guilds:guild_id': s.chatGuilds,
    'members:user_id': s.chatMembers,
    'users:user_id': s.users,
    // The stylesheet the Swagger UI page itself loads.
    'swagger-ui:file': ['swagger-ui.css'],
  };
}

/**
 * Query strings for routes that need one to answer 2xx and whose schema the registry does not hold
 * (routes outside defineRoute). GET /v1/gql is GraphQL over GET: a small query of the caller.
 */
const QUERY_FOR: Record<string, string> = {
  'GET /v1/gql': `query=${encodeURIComponent('{ me { userId roles isSuperAdmin } }')}`,
};

/** Path values of one route where the parameter's name and segment mean another id than elsewhere. */
function ROUTE_PARAM_VALUES(f: Fixtures): Record<string, Record<string, string[]>> {
  // The spec addresses a guild's members by the guild's internal UUID, its other routes by snowflake.
  return {
    'GET /v1/chat/guilds/:guild_id/members': { guild_id: f.sample.chatGuildUuids },
    'GET /v1/chat/guilds/:guild_id/members/:user_id': { guild_id: f.sample.chatGuildUuids },
  };
}

/**
 * GET routes that are not reads: they start work measured elsewhere. Listed as not filled, with why.
 */
export const NOT_READS: Record<string, string> = {
  'GET /v1/user/export': 'starts a data export job (measured by bench:export)',
};

/** Credentials that differ from the rule's default: the routes trackers and dashboards poll with API keys. */
const API_KEY_ROUTES = new Set(['GET /v1/gps/current']);

/** Routes only the system key may call for any user (the first-party app's lookups, spec §4.11). */
const SYSTEM_KEY_ROUTES = new Set(['GET /v1/users/email/:email']);

/** Picks the credential of a route: none for public, the system key for system routes, else the admin's session. */
export function credentialFor(entry: RouteEntry, f: Fixtures, systemKey: string): Credential {
  const key = `${entry.method} ${entry.path}`;
  if (API_KEY_ROUTES.has(key)) return { kind: 'apiKey', token: f.gpsReadKey, label: 'API key (gps:read)' };
  if (entry.auth === 'public') return { kind: 'none' };
  if (entry.auth === 'system' || SYSTEM_KEY_ROUTES.has(key))
    return {
      kind: 'system',
      token: systemKey,
      label: systemKeyAllowed(entry.path.replace(/\/:.*$/, ''))
        ? 'system key'
        : 'system key (path not on SYSTEM_KEY_ALLOWLIST)',
    };
  return { kind: 'session', token: f.adminToken, label: 'session (super admin)' };
}

/** Fills a route's path parameters (and needed query) from the fixtures, or says why it cannot. */
export function fillRoute(
  entry: RouteEntry,
  f: Fixtures,
  systemKey: string,
  maxVariants: number,
): FilledRoute | UnfilledRoute {
  if (!entry.path.startsWith('/'))
    return { entry, reason: `path is a pattern (${entry.path}), not a path with named parameters` };
  const notRead = NOT_READS[`${entry.method} ${entry.path}`];
  const byRoute = ROUTE_PARAM_VALUES(f)[`${entry.method} ${entry.path}`] ?? {};
  if (notRead) return { entry, reason: notRead };
  const values = paramValues(f);
  const segments = entry.path.split('/');
  const params: Array<{ index: number; values: string[] }> = [];
  let resource = '';
  for (const [index, seg] of segments.entries()) {
    if (!seg.startsWith(':')) {
      if (seg) resource = seg;
      continue;
    }
    const name = seg.slice(1).replace(/[?*+]$/, '');
    const v = byRoute[name] ?? values[`${resource}:${name}`] ?? values[`*:${name}`];
    if (!v || v.length === 0) return { entry, reason: `no fixture value for :${name} of ${resource || '/'}` };
    params.push({ index, values: v });
  }
  const key = `${entry.method} ${entry.path}`;
  const query = QUERY_FOR[key];
  if (!query && entry.requiredQuery.length)
    return { entry, reason: `required query ${entry.requiredQuery.join(', ')} (no fixture value)` };
  const variants = params.length ? Math.min(maxVariants, Math.max(...params.map((p) => p.values.length))) : 1;
  const paths: string[] = [];
  for (let k = 0; k < variants; k++) {
    const segs = [...segments];
    for (const p of params) segs[p.index] = encodeURIComponent(p.values[k % p.values.length]);
    paths.push(segs.join('/') + (query ? `?${query}` : ''));
  }
  return { entry, paths, credential: credentialFor(entry, f, systemKey) };
}
