import type { Context } from 'koa';
import type { ZodTypeAny } from 'zod';
import { z } from '../shared/zod';
import { DYNAMIC_MIN_BYTES, notModifiedHeaders, reusable } from './compression';
import { canonicalUrl } from './canonicalUrl';

/**
 * The response envelopes, built in one place: `{data, _links}` for a resource or a bare list,
 * `{data, pagination, _links}` for a page (api/pagination.ts builds the page's links). Routes hand
 * a presenter's output to these and declare the matching schema from the same file, so the
 * OpenAPI document and the JSON cannot drift.
 */

export interface Envelope<T> {
  data: T;
  _links: { self: string };
}

/**
 * `{data, _links: {self}}`: a single resource, or a bare list of them. `self` is the request's URL
 * in its documented spelling with its declared query (api/canonicalUrl.ts): a query that selects
 * (`?lat=…&lon=…`, `?user_id=…`) is part of what was answered.
 */
export function resource<T>(ctx: Context, data: T, self?: string): Envelope<T> {
  return { data, _links: { self: self ?? canonicalUrl(ctx) } };
}

const selfLinks = z.object({ self: z.string() }).openapi('SelfLinks');
const pageLinks = z
  .object({
    self: z.string(),
    first: z.string(),
    last: z.string(),
    prev: z.string().optional(),
    next: z.string().optional(),
  })
  .openapi('PageLinks');

const pagination = z
  .object({
    page: z.number().int(),
    limit: z.number().int(),
    total: z.number().int(),
    total_pages: z.number().int(),
  })
  .openapi('Pagination');

/** Schema of `resource(ctx, data)` for a presenter's schema. */
export const resourceSchema = <T extends ZodTypeAny>(data: T) => z.object({ data, _links: selfLinks });

/** Schema of `resource(ctx, list)`: a bare (unpaginated) list. */
export const listSchema = <T extends ZodTypeAny>(item: T) => z.object({ data: z.array(item), _links: selfLinks });

/** Schema of a `paginate()` body. */
export const pageSchema = <T extends ZodTypeAny>(item: T) =>
  z.object({
    data: z.array(item),
    pagination,
    _links: pageLinks,
  });

/** The `_links.self` of an answer body, if it has one. */
function selfLink(body: unknown): string | undefined {
  const self = (body as { _links?: { self?: unknown } } | null)?._links?.self;
  return typeof self === 'string' ? self : undefined;
}

/**
 * 201 with a body and a Location header (RFC 9110 §15.3.2): `location`, by default the body's
 * `_links.self`, the path a GET answers with what was created; `null` when the answer names no
 * created resource of its own (a batch of GPS points).
 */
export function created(ctx: Context, body: unknown, location: string | null = selfLink(body) ?? null): void {
  if (location) ctx.set('Location', location);
  ctx.status = 201;
  ctx.body = body;
}

/** 204 with an empty body. */
export function noContent(ctx: Context): void {
  ctx.status = 204;
  ctx.body = null;
}

/**
 * Answers an HTML page (the pages behind email links, Swagger UI): never cached (a URL may carry a
 * one-time token), never framed or sniffed, no referrer, and the page's own Content-Security-Policy.
 */
export function sendHtml(ctx: Context, html: string | Buffer, contentSecurityPolicy: string): void {
  ctx.set('Content-Security-Policy', contentSecurityPolicy);
  ctx.set('Cache-Control', 'no-store');
  ctx.set('Referrer-Policy', 'no-referrer');
  ctx.set('X-Content-Type-Options', 'nosniff');
  ctx.set('X-Frame-Options', 'DENY');
  ctx.type = 'text/html; charset=utf-8';
  ctx.body = html;
}

/**
 * Answers bytes made once with their validator: the ETag (and Cache-Control, when given), then 304
 * when the client's If-None-Match already names them, else 200 with the bytes as `type`.
 */
export function sendValidatedBytes(
  ctx: Context,
  answer: { etag: string; cacheControl?: string; type: string; body: Buffer },
): void {
  ctx.set('ETag', answer.etag);
  if (answer.cacheControl) ctx.set('Cache-Control', answer.cacheControl);
  ctx.status = 200;
  if (ctx.fresh) {
    ctx.status = 304;
    notModifiedHeaders(ctx, answer.body, answer.type);
    return;
  }
  ctx.type = answer.type;
  ctx.body = answer.body;
}

/** `{message}`: an accepted request whose outcome arrives by email, or a plain confirmation. */
export const messageSchema = z.object({ message: z.string() }).openapi('Message');

/** `{success, message}`: a confirmation. */
export const successSchema = z.object({ success: z.boolean(), message: z.string() }).openapi('Success');

/** `{message, expires_at}`: a verification email was sent. */
export const emailSentSchema = z
  .object({ message: z.string(), expires_at: z.string().datetime() })
  .openapi('VerificationEmailSent');

/** JSON answers already serialised, per shared result and URL (see sharedJson). */
const serialised = new WeakMap<object, Map<string, Buffer>>();

/**
 * Answers `build()` as JSON, serialised once per `shared` result and request URL: the callers of
 * one turn that share a result (computeOncePerTurn in shared/rowLoader.ts) and ask the same URL get
 * the same bytes, built by the first. `build` must depend only on `shared` and the URL. The bytes
 * live as long as `shared` does (the turn's callers), never longer.
 */
export function sharedJson(ctx: Context, shared: object, build: () => unknown): void {
  let byUrl = serialised.get(shared);
  if (!byUrl) serialised.set(shared, (byUrl = new Map()));
  const url = canonicalUrl(ctx);
  let json = byUrl.get(url);
  if (!json) {
    json = Buffer.from(JSON.stringify(build()));
    // Shared by one turn's callers, or one flight's: compressed once for them (at the per-request
    // level, the bytes are remade all the time) when it is large enough to be compressed at all
    // (api/compression.ts), as any answer of its size would be.
    byUrl.set(url, json.length >= DYNAMIC_MIN_BYTES ? reusable(json, { shortLived: true }) : json);
  }
  ctx.type = 'application/json';
  ctx.body = json;
}
