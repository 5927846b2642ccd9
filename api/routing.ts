import type Router from '@koa/router';
import type { Middleware, ParameterizedContext } from 'koa';
import type { ZodTypeAny } from 'zod';
import type { Attribution } from '../shared/audit';
import { badRequest, forbidden, HttpError, validationError } from '../shared/errors';
import {
  AccountScope,
  actingUserId,
  actorIdOf,
  authorizePermission,
  authorize,
  authorizeSelf,
  Principal,
  requireAccountScope,
  requireAuthenticated,
  requireSystem,
  subjects,
} from '../shared/policies';
import { z, zInput, zInputEnvelope } from '../shared/zod';
import { KEYED_VERSIONS, KeyedVersionRef, VERSIONED_TABLES, VersionedTable } from '../shared/caches/tableVersions';
import { validatesItems } from './middleware/body';
import { clientIp, headerText } from './params';
import { describeSecurity, formExpressible, registerOperation, ResponseDoc } from './openapiSpec';
import { CACHED_HEADERS, cachedResponse } from './responseCache';
import { RequestUrl, urlForm } from './canonicalUrl';
import type { ApiServices } from './services';

export interface AppState {
  principal: Principal;
  /** Raw Bearer token of the request, when one was sent and resolved. */
  token?: string;
  /** The request's URL as defineRoute's route knows it (api/canonicalUrl.ts). */
  url?: RequestUrl;
  /** The credential cache's change mark when the token was resolved (`confirmCredential`). */
  credentialMark?: number;
  /** Until when (epoch ms) the answer being built holds without a write (`answerValidUntil`). */
  answerValidUntil?: number;
  /**
   * On a route that authenticates OAuth clients itself (`authenticatesClients`): the Authorization
   * header when it is not a bearer credential (HTTP Basic client credentials), for the route to check.
   */
  clientAuthorization?: string;
}

export type AppContext = ParameterizedContext<AppState, { services: ApiServices }>;

/**
 * Who may call a route:
 * - 'public': anyone, anonymous included;
 * - 'authenticated': any credential;
 * - 'system': the system key only (401 for everyone else, spec §4.11 /users/oauth);
 * - 'internal': the system key only, 401 anonymous and 403 for any other credential (spec §4.14
 *   internal sessions: a valid credential without the power is refused, not unauthenticated);
 * - { own }: the caller's own account (user credential or user-owned key); an OAuth token or API key
 *   needs `own` among its scopes;
 * - { account }: an account-security operation on the caller's own account: a session, or an OAuth
 *   token / API key whose grant names the scope explicitly;
 * - { permission, self?, scope?, manages? }: the permission, or (with `self`) the user whose id is
 *   in that path param, as far as the credential's grant allows; with `scope`, an account-security
 *   operation (narrowed credentials must name the scope); with `manages`, the path param names a user
 *   the caller must outrank (hold every permission of) unless it is the caller.
 */
export type AuthRule =
  | 'public'
  | 'authenticated'
  | 'system'
  | 'internal'
  | { own: string }
  | { account: AccountScope }
  | { permission: string; self?: string; scope?: AccountScope; manages?: string };

type AnyObject = z.ZodObject<z.ZodRawShape> | z.ZodEffects<z.ZodObject<z.ZodRawShape>>;

export interface RouteDef<P extends AnyObject, Q extends AnyObject, B extends ZodTypeAny> {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** Koa path, e.g. `/v1/trips/:id`. */
  path: string;
  summary: string;
  description?: string;
  tags: string[];
  auth: AuthRule;
  params?: P;
  query?: Q;
  body?: B;
  /** Documented responses; defaults to a bare 200. */
  responses?: Record<number, ResponseDoc>;
  /** An example request body for the document. */
  bodyExample?: unknown;
  /**
   * Documentation only, for a route that reads no body (a placeholder): the body the document shows.
   * The request's body is then not validated beyond the text rule every input gets.
   */
  bodyDoc?: ZodTypeAny;
  /**
   * Documentation only, for a 'public' route that checks credentials of its own (an app key, an
   * assertion): the security requirement the document shows instead of none, as alternatives of
   * the schemes of api/openapiSpec.ts (`bearerAuth`, `idAppKey`, `idAppAssertion`, `clientBasic`).
   */
  security?: Array<Record<string, string[]>>;
  /**
   * For a 'public' route that authenticates OAuth clients itself (RFC 6749 §2.3.1: the token
   * endpoint): an Authorization header that is not a bearer credential, such as HTTP Basic client
   * credentials, reaches it in `ctx.state.clientAuthorization`, where every other route refuses it
   * as a malformed credential (401) before it runs. The document shows the `clientBasic` scheme,
   * beside none (the body may carry the credentials, and a public client has no secret).
   */
  authenticatesClients?: true;
  /**
   * For a route that answers errors as RFC 6749 §5.2 says (the token endpoint): whatever refuses a
   * malformed request, before the route runs or in its validation (a missing or repeated
   * parameter, a body that does not parse or is neither JSON nor a form), answers 400
   * `invalid_request` with `error_description` (asOAuthError, in the error handler), and every
   * refusal carries `Cache-Control: no-store`. Its own errors carry their OAuth codes already.
   */
  oauthErrors?: true;
  /**
   * 'items': the body's text rule (zInput) and the body parser's rule for numbers beyond a double
   * are left to the route for the items (the contents of the body's arrays), which it validates one
   * by one, so one bad item is rejected alone rather than the whole body; the rest of the body (its
   * keys, fields beside the items) still gets the text rule (zInputEnvelope). The body schema must then accept only what the route checks (an
   * object of an item array), and the items must hold no free-form JSON.
   */
  bodyText?: 'items';
  /**
   * For a GET whose answer depends only on these tables (and keyed versions) and the URL (never on
   * the caller beyond the access check): the serialised answer is reused while their versions are
   * unchanged (api/responseCache.ts). Each table needs a version trigger (VERSIONED_TABLES); a
   * keyed version (e.g. `tripTrackOf('id')`, a trip's points) takes its key from a path parameter.
   * The answer may be JSON or a string with its own Content-Type (and Content-Disposition).
   */
  cacheBy?: ReadonlyArray<VersionedTable | KeyedVersionRef>;
  /**
   * With `cacheBy`, for an answer that depends on the caller only through what this returns (a
   * policy of shared/policies.ts, e.g. which keys a caller may list): answers are cached per value,
   * so callers with equal values share one and others never see it.
   */
  cacheVariant?: (principal: Principal) => string;
}

/**
 * What the middleware in front of the router (authentication, the error handler) needs to know of
 * the route a request is for, also when it refuses the request before the route runs: its
 * declarations, by the router's own layer. Only routes that declare something have an entry.
 */
export interface RouteTraits {
  authenticatesClients: boolean;
  oauthErrors: boolean;
  /**
   * The route's access check as far as it can be made without the request's body or path values
   * (`accessBeforeBody`): the whole rule, or for an 'or self' rule that a caller is authenticated.
   */
  checkAccess?: (ctx: AppContext) => void;
}

const traitsOfLayer = new WeakMap<Router.Layer, RouteTraits>();

/**
 * Refuses a request with a body before the body is read when the caller may not use the route
 * (401 without a credential, 403 without the permission): the body of a request that is refused
 * anyway is neither read nor parsed (up to 4 MB of JSON), and the refusal is the access answer,
 * not a complaint about the body. Requests without a body skip it (their route checks as it runs).
 */
export function accessBeforeBody(routeOf: (ctx: AppContext) => RouteTraits | undefined): Middleware {
  return (ctx, next) => {
    const m = ctx.method;
    if (m === 'GET' || m === 'HEAD' || m === 'OPTIONS') return next();
    const c = ctx as unknown as AppContext;
    routeOf(c)?.checkAccess?.(c);
    return next();
  };
}

/**
 * The traits of the route the router will run for this method and path (its first matching
 * route, matched as it matches), or undefined for a route that declares none and for no route. A
 * match of its own: asked only when a decision needs it (an Authorization header that is not a
 * bearer credential, a refusal), not on every request.
 */
export function routeTraits(router: Pick<Router, 'match'>, method: string, path: string): RouteTraits | undefined {
  const layer = router.match(path, method).pathAndMethod.find((l) => l.methods.length > 0);
  return layer && traitsOfLayer.get(layer);
}

export interface RouteInput<P extends AnyObject, Q extends AnyObject, B extends ZodTypeAny> {
  params: z.infer<P>;
  query: z.infer<Q>;
  body: z.infer<B>;
}

function parse<T extends ZodTypeAny>(schema: T, value: unknown, where: string): z.infer<T> {
  const r = schema.safeParse(value);
  if (!r.success) throw validationError(r.error, where);
  return r.data;
}

/** A user id path value with `me` resolved to the caller's user. */
function pathUserId(p: Principal, value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  return value === 'me' ? (actingUserId(p) ?? undefined) : value;
}

function checkAccess(ctx: AppContext, auth: AuthRule, params: Record<string, unknown>): void {
  const p = ctx.state.principal;
  if (auth === 'public') return;
  if (auth === 'authenticated') return requireAuthenticated(p);
  if (auth === 'system') return requireSystem(p, 'only the system key may call this endpoint');
  if (auth === 'internal') {
    requireAuthenticated(p);
    if (p.kind !== 'system') throw forbidden('only the system key may call this endpoint');
    return;
  }
  if ('own' in auth) return void authorizeSelf(p, auth.own);
  if ('account' in auth) {
    authorizeSelf(p);
    return requireAccountScope(p, auth.account);
  }
  authorizePermission(p, auth.permission, {
    selfId: auth.self ? pathUserId(p, params[auth.self]) : undefined,
    scope: auth.scope,
  });
}

/** Hierarchy (`manages`): the target's permissions (cached access set), then the policy decides. */
async function checkHierarchy(ctx: AppContext, param: string, params: Record<string, unknown>): Promise<void> {
  const p = ctx.state.principal;
  const target = pathUserId(p, params[param]);
  if (!target || target === actingUserId(p)) return;
  authorize(p, 'manage', subjects.user(target, (await ctx.services.credentials.access.user(target)).permissionSet));
}

/**
 * A cached answer is shared by every caller who passes the route's access check, so only a GET
 * whose rule is a plain permission (or public) may be cached: 'or self', hierarchy, own-account and
 * scope rules make the answer depend on the caller.
 */
function assertCacheable(def: {
  method: string;
  path: string;
  auth: AuthRule;
  params?: AnyObject;
  cacheBy?: ReadonlyArray<string | KeyedVersionRef>;
}): void {
  const plain =
    def.auth === 'public' ||
    (typeof def.auth === 'object' &&
      'permission' in def.auth &&
      !def.auth.self &&
      !def.auth.manages &&
      !def.auth.scope);
  if (def.method !== 'get' || !plain || def.path.includes('/me/') || def.path.endsWith('/me'))
    throw new Error(`${def.method.toUpperCase()} ${def.path}: cacheBy needs a GET with a plain permission rule`);
  for (const t of def.cacheBy ?? []) {
    if (typeof t !== 'string') {
      // A keyed version's key is a validated path parameter of this route.
      if (!(t.keyed in KEYED_VERSIONS) || !def.path.split('/').includes(`:${t.param}`) || !def.params)
        throw new Error(
          `${def.method.toUpperCase()} ${def.path}: ${t.keyed} needs a validated path parameter :${t.param}`,
        );
    } else if (!VERSIONED_TABLES.includes(t as VersionedTable))
      throw new Error(`${def.method.toUpperCase()} ${def.path}: ${t} has no version trigger`);
  }
}

/** The shape of a route's params or query schema (an object, possibly refined). */
function objectShape(schema: AnyObject): z.ZodRawShape {
  return schema instanceof z.ZodEffects ? schema._def.schema.shape : schema.shape;
}

/**
 * A declared query parameter sent in an array or object form (`status[]=draft`, `device_id[0]=x`,
 * as qs and axios write arrays) is a 400 naming it: as an undeclared name it would be ignored, and
 * the client would get the unfiltered list it did not ask for. Other undeclared parameters are
 * ignored (a cache-buster, a provider's extra callback parameters).
 */
function refuseBracketForms(query: Record<string, unknown>, declared: ReadonlySet<string>): void {
  for (const key of Object.keys(query)) {
    const base = /^([^[\]]+)\[/.exec(key)?.[1];
    if (base && declared.has(base)) {
      const message = `${base} takes one value, without brackets (${base}=…)`;
      throw new HttpError(400, 'BadRequest', `${key.slice(0, 100)}: ${message}`, {
        details: [{ field: key.slice(0, 100), message }],
      });
    }
  }
}

/** Whether a query parameter's schema takes a list (a repeated parameter arrives as an array). */
function takesList(schema: z.ZodTypeAny): boolean {
  if (schema instanceof z.ZodArray) return true;
  if (schema instanceof z.ZodOptional || schema instanceof z.ZodNullable) return takesList(schema.unwrap());
  if (schema instanceof z.ZodDefault) return takesList(schema._def.innerType);
  if (schema instanceof z.ZodEffects) return takesList(schema._def.schema);
  if (schema instanceof z.ZodPipeline) return takesList(schema._def.in);
  if (schema instanceof z.ZodUnion) return (schema.options as z.ZodTypeAny[]).some(takesList);
  return false;
}

/**
 * A declared single-valued query parameter sent more than once (`?limit=5&limit=7`) is a 400
 * saying so, not its schema's complaint about the array the query parser made of it ("must be an
 * integer" for two integers).
 */
function refuseRepeated(query: Record<string, unknown>, single: readonly string[]): void {
  for (const key of single) {
    // badRequest lists the named field in `details`, as a schema's refusal does.
    if (Array.isArray(query[key])) throw badRequest(`${key}: given more than once`);
  }
}

/** The access rule in words, for the OpenAPI description. */
function describeAuth(auth: AuthRule): string {
  if (auth === 'internal') return 'Access: system. Another credential gets 403, none 401.';
  if (typeof auth === 'string') return `Access: ${auth}.`;
  if ('own' in auth) return `Access: your own account; OAuth tokens and API keys need the \`${auth.own}\` scope.`;
  if ('account' in auth)
    return `Access: your own account; OAuth tokens and API keys need the \`${auth.account}\` scope.`;
  const parts = [`Requires \`${auth.permission}\`${auth.self ? ' or self' : ''}.`];
  if (auth.scope) parts.push(`OAuth tokens and API keys also need the \`${auth.scope}\` scope.`);
  if (auth.manages) parts.push('You must hold every permission the target user holds.');
  return parts.join(' ');
}

/**
 * Registers one route: authenticate (already done by middleware) → check access → validate
 * params, query and body → handler. Also documents the route in the OpenAPI registry, so the
 * document and the validation can never disagree. Params, query and body pass the text rule of
 * zInput (no NUL, no unpaired surrogate, anywhere) before their schemas, also when a route
 * declares none: no route can store what PostgreSQL rejects.
 */
export function defineRoute<
  P extends AnyObject = z.ZodObject<{}>,
  Q extends AnyObject = z.ZodObject<{}>,
  B extends ZodTypeAny = z.ZodUnknown,
>(
  router: Router<AppState, { services: ApiServices }>,
  def: RouteDef<P, Q, B>,
  handler: (ctx: AppContext, input: RouteInput<P, Q, B>) => Promise<void> | void,
): void {
  const selfRule = typeof def.auth === 'object' && 'permission' in def.auth && def.auth.self;
  const manages = typeof def.auth === 'object' && 'permission' in def.auth ? def.auth.manages : undefined;
  const input = {
    params: zInput(def.params ?? z.unknown()),
    query: zInput(def.query ?? z.unknown()),
    body: def.bodyText === 'items' ? zInputEnvelope(def.body ?? z.unknown()) : zInput(def.body ?? z.unknown()),
  };
  if (def.authenticatesClients && def.auth !== 'public')
    throw new Error(`${def.method.toUpperCase()} ${def.path}: authenticatesClients needs auth 'public'`);
  if (def.bodyText === 'items') {
    if (def.path.includes(':'))
      throw new Error(`${def.method.toUpperCase()} ${def.path}: bodyText 'items' needs a path without parameters`);
    validatesItems(def.method, def.path);
  }
  // A form's values are all text: only a body of text fields takes one (and the document says so).
  const refusesForms = def.body !== undefined && !formExpressible(def.body);
  const queryShape = def.query ? objectShape(def.query) : {};
  const queryKeys = new Set(Object.keys(queryShape));
  const singleQueryKeys = [...queryKeys].filter((k) => !takesList(queryShape[k]));
  const form = urlForm(def.path, [...queryKeys]);
  const cacheBy = def.cacheBy;
  if (cacheBy) assertCacheable(def);
  else if (def.cacheVariant) throw new Error(`${def.method.toUpperCase()} ${def.path}: cacheVariant needs cacheBy`);
  const layer = router.register(def.path, [def.method], (ctx) => {
    const c = ctx as unknown as AppContext;
    // Permission checks come before validation (a caller without access learns nothing about the
    // input rules), except for 'or self' rules, which need the validated path id.
    if (!selfRule) checkAccess(c, def.auth, {});
    const params: z.infer<P> = parse(input.params, ctx.params, 'params');
    if (selfRule) checkAccess(c, def.auth, params as Record<string, unknown>);
    if (ctx.querystring.includes('[') || ctx.querystring.includes('%5B')) refuseBracketForms(ctx.query, queryKeys);
    if (singleQueryKeys.length && ctx.querystring.includes('&')) refuseRepeated(ctx.query, singleQueryKeys);
    const rawQuery = parse(input.query, ctx.query, 'query');
    const query = (def.query ? rawQuery : {}) as z.infer<Q>;
    c.state.url = { form, params: params as Record<string, unknown> };
    const rawBody = (ctx.request as { body?: unknown }).body;
    if (refusesForms && rawBody !== undefined && isFormRequest(ctx)) throw formRefused(ctx);
    const body: z.infer<B> = parse(input.body, def.body ? (rawBody ?? {}) : rawBody, 'body');
    if (manages)
      return checkHierarchy(c, manages, params as Record<string, unknown>).then(() =>
        handler(c, { params, query, body }),
      );
    if (cacheBy)
      return cachedResponse(
        c,
        cacheBy,
        params as Record<string, unknown>,
        async () => {
          await handler(c, { params, query, body });
          return {
            body: c.body,
            type: c.type,
            headers: Object.fromEntries(CACHED_HEADERS.map((name) => [name, c.response.get(name)])),
            validUntil: c.state.answerValidUntil,
          };
        },
        def.cacheVariant?.(c.state.principal),
      );
    return handler(c, { params, query, body });
  });
  traitsOfLayer.set(layer, {
    authenticatesClients: Boolean(def.authenticatesClients),
    oauthErrors: Boolean(def.oauthErrors),
    checkAccess:
      def.auth === 'public'
        ? undefined
        : selfRule
          ? (c) => requireAuthenticated(c.state.principal)
          : (c) => checkAccess(c, def.auth, {}),
  });

  // A documented example must pass the route's own validation (checked once, at mount).
  if (def.bodyExample !== undefined && def.body && !def.body.safeParse(def.bodyExample).success)
    throw new Error(`${def.method.toUpperCase()} ${def.path}: bodyExample does not pass the body schema`);
  const permission = typeof def.auth === 'object' && 'permission' in def.auth ? def.auth.permission : undefined;
  const security = def.security ?? (def.authenticatesClients ? [{ clientBasic: [] }, {}] : undefined);
  registerOperation({
    ...def,
    security,
    body: def.body ?? def.bodyDoc,
    access: security ? describeSecurity(security) : describeAuth(def.auth),
    secured: def.auth !== 'public',
    permission,
    // The text rule of zInput checks every parameter, declared or not: any route can answer 400.
    validates: true,
    // A permission or an account scope can be refused to a valid credential ('system' answers 401).
    forbids: typeof def.auth === 'object' || def.auth === 'internal',
    // A cached answer carries an ETag and answers 304 to If-None-Match (api/responseCache.ts).
    conditional: Boolean(cacheBy),
  });
}

const isFormRequest = (ctx: ParameterizedContext) =>
  (ctx.req.headers['content-type'] ?? '').toLowerCase().startsWith('application/x-www-form-urlencoded');

const formRefused = (ctx: ParameterizedContext) =>
  new HttpError(
    415,
    'UnsupportedMediaType',
    `${ctx.method} ${ctx.path} takes a JSON body (application/json): its fields are not all text, as a form's are`,
  );

/**
 * The request's audit attribution: the acting user (or key), the client's IP and user agent. A
 * relaying system key (the first-party web app) names the user's address in X-Forwarded-For
 * (`clientIp`): sessions it creates and sign-ins it relays record that, not the web server's.
 */
export function requestAttribution(ctx: AppContext): Attribution {
  return {
    actorId: actorIdOf(ctx.state.principal),
    ipAddress: clientIp(ctx) ?? ctx.ip,
    userAgent: headerText(ctx, 'user-agent'),
  };
}
