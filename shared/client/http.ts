/**
 * The first-party REST client (spec §5.6), for Node and browsers (only `fetch`, `URL` and
 * `Headers`). It is fail-closed: every call states who it acts as, one of a user access token,
 * the system key or an explicit anonymous flag. A call stating none (or an empty token) is not
 * sent; it answers 401 with code AUTH_REQUIRED. A missing user token never falls back to the
 * system key: the client holds no default credential at all.
 */

/** Who a call acts as. Exactly one; there is no default. */
export type CallAuth = { userToken: string } | { systemKey: string } | { anonymous: true };

export interface CallOptions {
  auth: CallAuth;
  /** JSON body (sent as application/json). */
  body?: unknown;
  /** A body sent as is (content type application/json unless a header says otherwise). */
  rawBody?: string;
  query?: Record<string, string | number | boolean | undefined>;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

export interface ApiResult<T = unknown> {
  status: number;
  ok: boolean;
  /**
   * The parsed JSON body, or the text when it is not JSON; the bytes (a Uint8Array) when the
   * answer is binary (application/zip, image/png…: see `isTextContentType`).
   */
  body: T;
  /** The body as text ('' for a binary answer, whose bytes are in `body`). */
  text: string;
  headers: Headers;
  /** Set on 401 AUTH_REQUIRED answered by the client itself: nothing was sent. */
  notSent?: true;
  /** Seconds from Retry-After, on 429 (and 503) answers. */
  retryAfter?: number;
}

export interface ClientOptions {
  baseUrl: string;
  fetch?: typeof fetch;
}

export const AUTH_REQUIRED = 'AUTH_REQUIRED';

/** The Authorization header of a call, or null when the call states no usable credential. */
export function authorizationOf(auth: CallAuth | undefined): { header?: string } | null {
  if (!auth || typeof auth !== 'object') return null;
  const kinds = ['userToken', 'systemKey', 'anonymous'].filter((k) => k in auth);
  if (kinds.length !== 1) return null;
  if ('anonymous' in auth) return auth.anonymous === true ? {} : null;
  const token = 'userToken' in auth ? auth.userToken : auth.systemKey;
  if (typeof token !== 'string' || !token.trim()) return null;
  return { header: `Bearer ${token}` };
}

function authRequired(): ApiResult<{ error: string; message: string }> {
  const body = {
    error: AUTH_REQUIRED,
    message: 'the call states no credential: pass a user token, the system key or { anonymous: true }',
  };
  return { status: 401, ok: false, body, text: JSON.stringify(body), headers: new Headers(), notSent: true };
}

/**
 * Whether an answer of this Content-Type is text (read as text, JSON parsed): none given, text/*,
 * JSON and XML types (`+json`, `+xml` included), JavaScript and forms. Anything else (ZIP, PDF,
 * images, octet streams) is binary and read as bytes: decoding it as UTF-8 would corrupt it.
 */
export function isTextContentType(contentType: string | null | undefined): boolean {
  const type = (contentType ?? '').split(';')[0].trim().toLowerCase();
  if (!type) return true;
  if (type.startsWith('text/')) return true;
  return /^application\/(json|xml|javascript|ecmascript|x-www-form-urlencoded|graphql)$|[+/](json|xml)$/.test(type);
}

/** Fills a Koa-style path (`/v1/trips/:id`) from params, each value URL-encoded. */
export function fillPath(path: string, params: Record<string, string> = {}): string {
  return path.replace(/:([A-Za-z0-9_]+)/g, (_, name: string) => {
    const v = params[name];
    if (v === undefined) throw new Error(`path parameter ${name} missing for ${path}`);
    return encodeURIComponent(v);
  });
}

export class ApiClient {
  private readonly fetchFn: typeof fetch;
  constructor(private readonly options: ClientOptions) {
    this.fetchFn = options.fetch ?? ((...a) => fetch(...a));
  }

  /** One call. Never throws for an HTTP status; network failures reject. */
  async request<T = unknown>(method: string, path: string, o: CallOptions): Promise<ApiResult<T>> {
    const auth = authorizationOf(o?.auth);
    if (!auth) return authRequired() as ApiResult<T>;
    const headers: Record<string, string> = { ...(o.headers ?? {}) };
    // A header passed by hand cannot smuggle a credential past the stated choice.
    for (const k of Object.keys(headers)) if (k.toLowerCase() === 'authorization') delete headers[k];
    if (auth.header) headers.authorization = auth.header;
    let body: string | undefined = o.rawBody;
    const hasType = Object.keys(headers).some((k) => k.toLowerCase() === 'content-type');
    if (o.body !== undefined) {
      body = JSON.stringify(o.body);
      if (!hasType) headers['content-type'] = 'application/json';
    } else if (body !== undefined && !hasType) headers['content-type'] = 'application/json';
    let url = this.options.baseUrl.replace(/\/$/, '') + path;
    if (o.query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(o.query)) if (v !== undefined) q.set(k, String(v));
      const s = q.toString();
      if (s) url += (url.includes('?') ? '&' : '?') + s;
    }
    const res = await this.fetchFn(url, { method, headers, body, signal: o.signal });
    let text = '';
    let parsed: unknown;
    if (isTextContentType(res.headers.get('content-type'))) {
      text = await res.text();
      parsed = text;
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {
        /* not JSON: the text */
      }
    } else parsed = new Uint8Array(await res.arrayBuffer());
    const result: ApiResult<T> = { status: res.status, ok: res.ok, body: parsed as T, text, headers: res.headers };
    const retry = res.headers.get('retry-after');
    if (retry !== null && (res.status === 429 || res.status === 503)) {
      const seconds = /^\d+$/.test(retry) ? Number(retry) : Math.max(0, (Date.parse(retry) - Date.now()) / 1000);
      if (Number.isFinite(seconds)) result.retryAfter = seconds;
    }
    return result;
  }
}
