import Router from '@koa/router';
import {
  deleteOAuthClient,
  regenerateClientSecret,
  registerOAuthClient,
  updateOAuthClient,
} from '../../shared/commands/oauthClients';
import { zDisplayName } from '../../shared/domain/displayNames';
import { redirectUriProblem } from '../../shared/domain/oauth';
import { OAuthClient } from '../../shared/models/OAuthClient';
import { Action, actingUserId, authorize, subjects } from '../../shared/policies';
import {
  oauthClientSchema,
  oauthClientSecretSchema,
  presentOAuthClient,
  presentOAuthClientSecret,
  presentRegisteredOAuthClient,
  registeredOAuthClientSchema,
} from '../../shared/presenters/oauthClient';
import { ownedClients } from '../../shared/queries/oauth';
import { findOr404 } from '../../shared/rowLoader';
import { emptyPatch, z, zChars, zHttpUrl, zList, zScope, zUuid } from '../../shared/zod';
import { paginate, paginationQuery } from '../pagination';
import { created, listSchema, noContent, pageSchema, resource, resourceSchema } from '../responses';
import { AppContext, AppState, defineRoute, requestAttribution } from '../routing';
import type { ApiServices } from '../services';

const zRedirectUri = () =>
  zChars(
    { max: 2000 },
    z.string().superRefine((v, ctx) => {
      const problem = redirectUriProblem(v);
      if (problem) ctx.addIssue({ code: z.ZodIssueCode.custom, message: problem });
    }),
  );

const fields = {
  // Shown on the consent screen: a name that looks like another app's is a phishing lure.
  name: zDisplayName(100),
  description: zChars({ max: 2000 }).nullish(),
  logo_url: zHttpUrl(2000).nullish(),
  homepage_url: zHttpUrl(2000).nullish(),
  privacy_policy_url: zHttpUrl(2000).nullish(),
  terms_of_service_url: zHttpUrl(2000).nullish(),
  redirect_uris: zList(zRedirectUri(), { min: 1, max: 20 }).transform((u) => [...new Set(u)]),
  allowed_scopes: zList(zScope(), { max: 200 }).transform((s) => [...new Set(s)]),
  client_type: z.enum(['public', 'confidential']),
  is_first_party: z.boolean(),
};

const idParam = z.object({ id: zUuid() });

/**
 * The client with this id (404), if the caller may do `action` on it (403). A change by someone
 * other than the owner is decided with what the owner holds (hierarchy, shared/policies).
 */
async function loadClient(ctx: AppContext, id: string, action: Action<'oauthClient'>): Promise<OAuthClient> {
  const p = ctx.state.principal;
  const client = await findOr404(OAuthClient, id, 'oauth client');
  const byOther = action !== 'read' && client.user_id !== null && client.user_id !== actingUserId(p);
  const owner = byOther ? (await ctx.services.credentials.access.user(client.user_id!)).permissionSet : undefined;
  authorize(p, action, subjects.oauthClient(client, owner));
  return client;
}

/** OAuth client applications (spec §4.19). */
export function oauthClientRoutes(router: Router<AppState, { services: ApiServices }>): void {
  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/oauth/clients',
      summary: 'List the OAuth clients you own',
      tags: ['oauth'],
      auth: { own: 'oauth_clients:read' },
      responses: { 200: { description: 'Your clients', schema: listSchema(oauthClientSchema) } },
    },
    async (ctx) => {
      const uid = actingUserId(ctx.state.principal);
      const clients = uid ? await ownedClients(ctx.services.db).load(uid) : [];
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
      cacheBy: ['oauth_clients'],
      query: paginationQuery(20),
      responses: { 200: { description: 'Paginated clients', schema: pageSchema(oauthClientSchema) } },
    },
    async (ctx, { query }) => {
      ctx.body = await paginate(
        ctx,
        OAuthClient.query(ctx.services.db).orderBy('created_at', 'desc').orderBy('id'),
        query,
        presentOAuthClient,
      );
    },
  );

  defineRoute(
    router,
    {
      method: 'get',
      path: '/v1/oauth/clients/:id',
      summary: 'Get an OAuth client (owner or admin)',
      tags: ['oauth'],
      auth: { own: 'oauth_clients:read' },
      params: idParam,
      responses: {
        200: { description: 'Client', schema: resourceSchema(oauthClientSchema) },
        403: { description: 'Not the owner' },
        404: { description: 'No such client' },
      },
    },
    async (ctx, { params }) => {
      ctx.body = resource(ctx, presentOAuthClient(await loadClient(ctx, params.id, 'read')));
    },
  );

  defineRoute(
    router,
    {
      method: 'post',
      path: '/v1/oauth/clients',
      summary: 'Register an OAuth client (the secret is shown once)',
      description:
        'Redirect URIs must be absolute https URLs, or http on localhost/127.0.0.1. Confidential clients get a client_secret (public clients: null). Only admins (oauth_clients:write) may mark a client first-party.',
      tags: ['oauth'],
      auth: { own: 'oauth_clients:write' },
      body: z.object({
        ...fields,
        allowed_scopes: fields.allowed_scopes.default([]),
        client_type: fields.client_type.default('confidential'),
        is_first_party: fields.is_first_party.default(false),
      }),
      responses: { 201: { description: 'Created client and its secret', schema: registeredOAuthClientSchema } },
    },
    async (ctx, { body }) => {
      const p = ctx.state.principal;
      const ownerId = actingUserId(p);
      if (body.is_first_party) authorize(p, 'markFirstParty', subjects.oauthClient({ user_id: ownerId }));
      const { client, secret } = await registerOAuthClient(
        ctx.services.db,
        ownerId,
        {
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
        },
        requestAttribution(ctx),
      );
      created(ctx, presentRegisteredOAuthClient(client, secret), `/v1/oauth/clients/${client.id}`);
    },
  );

  defineRoute(
    router,
    {
      method: 'patch',
      path: '/v1/oauth/clients/:id',
      summary: 'Update an OAuth client (owner or admin)',
      description:
        'The create fields, all optional, plus is_active. Deactivating a client or narrowing its scopes takes effect on its live tokens at once.',
      tags: ['oauth'],
      auth: { own: 'oauth_clients:write' },
      params: idParam,
      body: z.object({
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
      responses: {
        200: { description: 'Updated client', schema: resourceSchema(oauthClientSchema) },
        403: { description: 'Not the owner' },
        404: { description: 'No such client' },
      },
    },
    async (ctx, { params, body }) => {
      const p = ctx.state.principal;
      const client = await loadClient(ctx, params.id, 'update');
      if (body.is_first_party !== undefined && body.is_first_party !== client.is_first_party)
        authorize(p, 'markFirstParty', subjects.oauthClient(client));
      // Every field is optional (spec §4.24: "Same fields, all optional"); nothing named, nothing changes.
      const updated = emptyPatch(body)
        ? client
        : await updateOAuthClient(ctx.services, client, body, requestAttribution(ctx));
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
      responses: {
        200: { description: 'New secret', schema: oauthClientSecretSchema },
        400: { description: 'Public client' },
        403: { description: 'Not the owner' },
        404: { description: 'No such client' },
      },
    },
    async (ctx, { params }) => {
      const client = await loadClient(ctx, params.id, 'update');
      ctx.body = presentOAuthClientSecret(
        client,
        await regenerateClientSecret(ctx.services.db, client, requestAttribution(ctx)),
      );
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
      responses: {
        204: { description: 'Deleted' },
        403: { description: 'Not the owner' },
        404: { description: 'No such client' },
      },
    },
    async (ctx, { params }) => {
      const client = await loadClient(ctx, params.id, 'delete');
      await deleteOAuthClient(ctx.services, client, requestAttribution(ctx));
      noContent(ctx);
    },
  );
}
