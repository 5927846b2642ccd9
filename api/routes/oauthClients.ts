import Router from '@koa/router';
import { invalidateCredentials } from '../../shared/commands/accessChanges';
import { clientTokenInvalidation, redirectUriProblem } from '../../shared/commands/oauthProvider';
import { recordAuditEvent } from '../../shared/audit';
import { OAUTH_CLIENT_SECRET_PREFIX } from '../../shared/auth/oauthTokens';
import { randomToken, sha256 } from '../../shared/crypto';
import { badRequest, notFound } from '../../shared/errors';
import { OAuthClient } from '../../shared/models/OAuthClient';
import { actingUserId, subjects, authorize, authorizeOwner } from '../../shared/policies';
import { presentOAuthClient } from '../../shared/presenters/oauthClient';
import { atLeastOne, z, zHttpUrl, zUuid } from '../../shared/zod';
import { paginate, paginationQuery } from '../pagination';
import { AppContext, AppState, defineRoute } from '../routing';
import type { ApiServices } from '../services';
import { zScope } from './apiKeys';
import { rowById } from '../../shared/rowLoader';
import { created, noContent, resource } from '../responses';

const zRedirectUri = () =>
  z
    .string()
    .max(2000)
    .superRefine((v, ctx) => {
      const problem = redirectUriProblem(v);
      if (problem) ctx.addIssue({ code: z.ZodIssueCode.custom, message: problem });
    });

const fields = {
  name: z.string().trim().min(1).max(100),
  description: z.string().max(2000).nullish(),
  logo_url: zHttpUrl(2000).nullish(),
  homepage_url: zHttpUrl(2000).nullish(),
  privacy_policy_url: zHttpUrl(2000).nullish(),
  terms_of_service_url: zHttpUrl(2000).nullish(),
  redirect_uris: z.array(zRedirectUri()).min(1).max(20).transform((u) => [...new Set(u)]),
  allowed_scopes: z.array(zScope()).max(200).transform((s) => [...new Set(s)]),
  client_type: z.enum(['public', 'confidential']),
  is_first_party: z.boolean(),
};

const clientSchema = z.object({
  id: z.string().uuid(),
  user_id: z.string().uuid().nullable(),
  name: z.string(),
  description: z.string().nullable(),
  logo_url: z.string().nullable(),
  homepage_url: z.string().nullable(),
  privacy_policy_url: z.string().nullable(),
  terms_of_service_url: z.string().nullable(),
  redirect_uris: z.array(z.string()),
  allowed_scopes: z.array(z.string()),
  client_type: z.enum(['public', 'confidential']),
  is_active: z.boolean(),
  is_first_party: z.boolean(),
  created_at: z.string(),
  updated_at: z.string(),
});
const links = z.object({ self: z.string() });
const idParam = z.object({ id: zUuid() });

/** Owner or admin: 'admin' is the oauth_clients permission of the action (or super admin). */
async function loadClient(ctx: AppContext, id: string, adminPermission: string): Promise<OAuthClient> {
  const client = await rowById(OAuthClient).load(id);
  if (!client) throw notFound('oauth client');
  authorizeOwner(ctx.state.principal, client.user_id, adminPermission);
  return client;
}

function audit(ctx: AppContext, client: OAuthClient, eventType: string, metadata: Record<string, unknown> = {}) {
  const actor = actingUserId(ctx.state.principal);
  return {
    user_id: client.user_id ?? actor,
    actor_id: actor,
    event_type: eventType,
    resource_type: 'oauth_client',
    resource_id: client.id,
    ip_address: ctx.ip,
    user_agent: ctx.get('user-agent') || null,
    metadata: { name: client.name, ...metadata },
  };
}

async function dropClientTokens(ctx: AppContext, clientId: string): Promise<void> {
  for (const msg of await clientTokenInvalidation(ctx.services.db, clientId)) await invalidateCredentials(ctx.services, msg);
}

/** OAuth client applications (spec §4.19). */
export function oauthClientRoutes(router: Router<AppState, { services: ApiServices }>): void {
  defineRoute(
    router,
    { method: 'get', path: '/v1/oauth/clients', summary: 'List the OAuth clients you own', tags: ['oauth'], auth: { own: 'oauth_clients:read' }, responses: { 200: { description: 'Your clients', schema: z.object({ data: z.array(clientSchema), _links: links }) } } },
    async (ctx) => {
      const uid = actingUserId(ctx.state.principal);
      const clients = uid ? await OAuthClient.query().where('user_id', uid).orderBy('created_at', 'desc') : [];
      ctx.body = resource(ctx, clients.map(presentOAuthClient));
    },
  );

  // Registered before /:id so that "all" is never read as an id.
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/oauth/clients/all',
      summary: 'List every OAuth client (admins)',
      tags: ['oauth'],
      auth: { permission: 'oauth_clients:read' },
      query: paginationQuery(20),
      responses: { 200: { description: 'Paginated clients' } },
    },
    async (ctx, { query }) => {
      ctx.body = await paginate(ctx, OAuthClient.query().orderBy('created_at', 'desc').orderBy('id'), query, presentOAuthClient);
    },
  );

  defineRoute(
    router,
    { method: 'get', path: '/v1/oauth/clients/:id', summary: 'Get an OAuth client (owner or admin)', tags: ['oauth'], auth: { own: 'oauth_clients:read' }, params: idParam, responses: { 200: { description: 'Client', schema: z.object({ data: clientSchema, _links: links }) }, 403: { description: 'Not the owner' }, 404: { description: 'No such client' } } },
    async (ctx, { params }) => {
      ctx.body = resource(ctx, presentOAuthClient(await loadClient(ctx, params.id, 'oauth_clients:read')));
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/oauth/clients',
      summary: 'Register an OAuth client (the secret is shown once)',
      description: 'Redirect URIs must be absolute https URLs, or http on localhost/127.0.0.1. Confidential clients get a client_secret (public clients: null). Only admins (oauth_clients:write) may mark a client first-party.',
      tags: ['oauth'],
      auth: { own: 'oauth_clients:write' },
      body: z.object({
        ...fields,
        allowed_scopes: fields.allowed_scopes.default([]),
        client_type: fields.client_type.default('confidential'),
        is_first_party: fields.is_first_party.default(false),
      }),
      responses: {
        201: {
          description: 'Created client and its secret',
          schema: z.object({ client: z.object({ id: z.string().uuid(), name: z.string(), client_type: z.string(), is_active: z.boolean() }), client_secret: z.string().nullable() }),
        },
      },
    },
    async (ctx, { body }) => {
      const p = ctx.state.principal;
      if (body.is_first_party) authorize(p, 'markFirstParty', subjects.oauthClient({ user_id: actingUserId(p) }));
      const secret = body.client_type === 'confidential' ? randomToken(OAUTH_CLIENT_SECRET_PREFIX, 32) : null;
      const client = await ctx.services.db.transaction(async (trx) => {
        const c = await OAuthClient.query(trx).insertAndFetch({
          user_id: actingUserId(p),
          name: body.name,
          description: body.description ?? null,
          logo_url: body.logo_url ?? null,
          homepage_url: body.homepage_url ?? null,
          privacy_policy_url: body.privacy_policy_url ?? null,
          terms_of_service_url: body.terms_of_service_url ?? null,
          redirect_uris: body.redirect_uris,
          allowed_scopes: body.allowed_scopes,
          client_type: body.client_type,
          is_first_party: body.is_first_party,
          is_active: true,
          client_secret_hash: secret ? sha256(secret) : null,
        });
        await recordAuditEvent(audit(ctx, c, 'client_created', { client_type: c.client_type, redirect_uris: c.redirect_uris, allowed_scopes: c.allowed_scopes }), trx);
        return c;
      });
      ctx.set('Location', `/v1/oauth/clients/${client.id}`);
      created(ctx, { client: { id: client.id, name: client.name, client_type: client.client_type, is_active: client.is_active }, client_secret: secret });
    },
  );

  defineRoute(
    router,
    {
      method: 'patch',
      path: '/v1/oauth/clients/:id',
      summary: 'Update an OAuth client (owner or admin)',
      description: 'The create fields, all optional, plus is_active. Deactivating a client or narrowing its scopes takes effect on its live tokens at once.',
      tags: ['oauth'],
      auth: { own: 'oauth_clients:write' },
      params: idParam,
      body: atLeastOne(
        z.object({
          name: fields.name.optional(),
          description: fields.description,
          logo_url: fields.logo_url,
          homepage_url: fields.homepage_url,
          privacy_policy_url: fields.privacy_policy_url,
          terms_of_service_url: fields.terms_of_service_url,
          redirect_uris: fields.redirect_uris.optional(),
          allowed_scopes: fields.allowed_scopes.optional(),
          client_type: fields.client_type.optional(),
          is_first_party: fields.is_first_party.optional(),
          is_active: z.boolean().optional(),
        }),
      ),
      responses: { 200: { description: 'Updated client', schema: z.object({ data: clientSchema, _links: links }) }, 403: { description: 'Not the owner' }, 404: { description: 'No such client' } },
    },
    async (ctx, { params, body }) => {
      const client = await loadClient(ctx, params.id, 'oauth_clients:write');
      if (body.is_first_party !== undefined && body.is_first_party !== client.is_first_party) authorize(ctx.state.principal, 'markFirstParty', subjects.oauthClient(client));
      if (body.client_type === 'confidential' && client.client_type === 'public') {
        throw badRequest('client_type: a public client cannot become confidential; register a new client');
      }
      const patch: Partial<OAuthClient> = {};
      for (const k of ['name', 'description', 'logo_url', 'homepage_url', 'privacy_policy_url', 'terms_of_service_url', 'redirect_uris', 'allowed_scopes', 'client_type', 'is_first_party', 'is_active'] as const) {
        if (body[k] !== undefined) (patch as Record<string, unknown>)[k] = body[k];
      }
      // A confidential client turned public has no secret any more.
      if (body.client_type === 'public') patch.client_secret_hash = null;
      const updated = await ctx.services.db.transaction(async (trx) => {
        const c = await OAuthClient.query(trx).patchAndFetchById(client.id, patch);
        await recordAuditEvent(audit(ctx, c, 'client_updated', { fields: Object.keys(patch).filter((k) => k !== 'client_secret_hash') }), trx);
        return c;
      });
      if (body.is_active !== undefined || body.allowed_scopes !== undefined) await dropClientTokens(ctx, client.id);
      ctx.body = resource(ctx, presentOAuthClient(updated));
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/oauth/clients/:id/regenerate-secret',
      summary: 'Regenerate the client secret (shown once)',
      tags: ['oauth'],
      auth: { own: 'oauth_clients:write' },
      params: idParam,
      responses: { 200: { description: 'New secret', schema: z.object({ client_id: z.string().uuid(), client_secret: z.string(), message: z.string() }) }, 400: { description: 'Public client' }, 403: { description: 'Not the owner' }, 404: { description: 'No such client' } },
    },
    async (ctx, { params }) => {
      const client = await loadClient(ctx, params.id, 'oauth_clients:write');
      if (client.client_type !== 'confidential') throw badRequest('public clients have no client secret');
      const secret = randomToken(OAUTH_CLIENT_SECRET_PREFIX, 32);
      await ctx.services.db.transaction(async (trx) => {
        await OAuthClient.query(trx).patchAndFetchById(client.id, { client_secret_hash: sha256(secret) });
        await recordAuditEvent(audit(ctx, client, 'client_secret_regenerated'), trx);
      });
      ctx.body = { client_id: client.id, client_secret: secret, message: 'Store this secret now: it will not be shown again. The previous secret no longer works.' };
    },
  );

  defineRoute(
    router,
    {
      method: 'delete',
      path: '/v1/oauth/clients/:id',
      summary: 'Delete an OAuth client (owner or admin); its tokens and consents go with it',
      tags: ['oauth'],
      auth: { own: 'oauth_clients:delete' },
      params: idParam,
      responses: { 204: { description: 'Deleted' }, 403: { description: 'Not the owner' }, 404: { description: 'No such client' } },
    },
    async (ctx, { params }) => {
      const client = await loadClient(ctx, params.id, 'oauth_clients:delete');
      const invalidations = await clientTokenInvalidation(ctx.services.db, client.id);
      await ctx.services.db.transaction(async (trx) => {
        await OAuthClient.query(trx).deleteById(client.id);
        await recordAuditEvent(audit(ctx, client, 'client_deleted'), trx);
      });
      for (const msg of invalidations) await invalidateCredentials(ctx.services, msg);
      noContent(ctx);
    },
  );
}
