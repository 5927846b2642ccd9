import type { Context } from 'koa';

/**
 * The documented spelling of a request's URL: the route's pattern with the request's path values,
 * and only the query parameters the route declares, in the order it declares them. The router
 * serves `/V1/ROLES/`, `/v1/roles?_=123` and `/v1/roles` alike; links in answers (`_links.self`,
 * a page's links) and the response cache use this form, so a spelling or a cache-buster neither
 * echoes back nor makes a cached answer miss (and rebuild a whole list) for every request.
 */
export interface UrlForm {
  /** The pattern's segments: literal text, or the name of a path parameter. */
  segments: ReadonlyArray<string | { param: string }>;
  /** The pattern itself when it has no parameters. */
  literal?: string;
  queryKeys: readonly string[];
}

/** The form of a route's URLs: its path pattern (`/v1/users/:id`) and declared query keys. */
export function urlForm(pattern: string, queryKeys: readonly string[]): UrlForm {
  const segments = pattern.split('/').map((s) => (s.startsWith(':') ? { param: s.slice(1) } : s));
  return {
    segments,
    literal: segments.every((s) => typeof s === 'string') ? pattern : undefined,
    queryKeys,
  };
}

/** What a route's chain knows of the request's URL (set by defineRoute before its handler runs). */
export interface RequestUrl {
  form: UrlForm;
  /** The validated path parameters. */
  params: Record<string, unknown>;
  /** The canonical URL, once made. */
  text?: string;
}

/**
 * Characters a path segment may hold unescaped (RFC 3986 pchar) that encodeURIComponent escapes:
 * `/v1/users/email/a@b.c` stays as it is written.
 */
const PCHAR_ESCAPES = /%(?:24|26|2B|2C|3B|3D|3A|40)/g;

function pathSegment(value: string): string {
  return encodeURIComponent(value).replace(PCHAR_ESCAPES, decodeURIComponent);
}

/**
 * A path value as the answer names it: the validated value when it only differs in case (a UUID
 * is lower-cased), otherwise the value as sent (`me` stays `me`).
 */
function paramText(raw: string | undefined, validated: unknown): string {
  if (typeof validated === 'string' && (raw === undefined || validated.toLowerCase() === raw.toLowerCase()))
    return validated;
  return raw ?? String(validated ?? '');
}

/** The request's path in the documented spelling (the raw path outside defineRoute's routes). */
export function canonicalPath(ctx: Context): string {
  const url = (ctx.state as { url?: RequestUrl }).url;
  if (!url) return ctx.path;
  const { form, params } = url;
  if (form.literal !== undefined) return form.literal;
  const raw = (ctx as { params?: Record<string, string> }).params ?? {};
  return form.segments
    .map((s) => (typeof s === 'string' ? s : pathSegment(paramText(raw[s.param], params[s.param]))))
    .join('/');
}

/** The request's declared query parameters, as `a=1&b=2` in the route's order ('' for none). */
export function canonicalQuery(ctx: Context): string {
  const url = (ctx.state as { url?: RequestUrl }).url;
  if (!url) return ctx.querystring;
  if (!ctx.querystring || url.form.queryKeys.length === 0) return '';
  const query = ctx.query;
  const parts: string[] = [];
  for (const key of url.form.queryKeys) {
    const value = query[key];
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value])
      parts.push(`${encodeURIComponent(key)}=${encodeURIComponent(v)}`);
  }
  return parts.join('&');
}

/** The request's URL in the documented spelling: `canonicalPath` and `canonicalQuery`. */
export function canonicalUrl(ctx: Context): string {
  const url = (ctx.state as { url?: RequestUrl }).url;
  if (url?.text !== undefined) return url.text;
  const query = canonicalQuery(ctx);
  const text = query ? `${canonicalPath(ctx)}?${query}` : canonicalPath(ctx);
  if (url) url.text = text;
  return text;
}
