import Router from '@koa/router';
import { HttpError } from '../shared/errors';

type Layer = Router.Layer;

const ANY = '\u0000any';

/** The context fields @koa/router's dispatch reads and writes (not all are in its typings). */
interface DispatchContext {
  path: string;
  method: string;
  newRouterPath?: string;
  matched?: Layer[];
  router?: unknown;
  captures?: string[];
  params?: Record<string, string>;
  request: { params?: Record<string, string> };
  routerPath?: string | RegExp;
  routerName?: string | null;
  _matchedRoute?: string | RegExp;
  _matchedRouteName?: string;
}

/** Layer methods with the arities @koa/router's own dispatch uses. */
interface DispatchLayer {
  path: string | RegExp;
  name: string | null;
  stack: Array<(ctx: unknown, next: () => Promise<unknown>) => unknown>;
  captures(path: string, captures?: string[]): string[];
  params(path: string, captures: string[], params?: Record<string, string>): Record<string, string>;
}

/** The index key of a path: its first two segments, lower-cased ('/v1/users/7' → 'v1/users'). */
function keyOfPath(path: string): string {
  if (path.charCodeAt(0) !== 47 /* '/' */) {
    const segs = path.split('/', 3);
    return `${segs[1] ?? ''}/${segs[2] ?? ''}`.toLowerCase();
  }
  // The usual case, without split's array: the text between the first three slashes.
  const a = path.indexOf('/', 1);
  if (a === -1) return `${path.slice(1)}/`.toLowerCase();
  const b = path.indexOf('/', a + 1);
  return (b === -1 ? path.slice(1) : path.slice(1, b)).toLowerCase();
}

/** A layer's key, or ANY when its first two segments are not literal (params, patterns, middleware). */
function keyOfLayer(layer: Layer): string {
  if (typeof layer.path !== 'string' || layer.methods.length === 0) return ANY;
  const segs = layer.path.split('/', 3);
  if (segs.slice(1).some((s) => /[:*?()[\]{}+]/.test(s))) return ANY;
  return keyOfPath(layer.path);
}

/**
 * A layer's path as segments (literals lower-cased, null for a `:param`), when every segment is a
 * plain literal or a plain named parameter; undefined for anything else (patterns, modifiers,
 * regular expressions), which is then always tested with its regular expression.
 */
function segmentsOfLayer(layer: Layer): Array<string | null> | undefined {
  if (typeof layer.path !== 'string' || layer.methods.length === 0 || layer.path.charCodeAt(0) !== 47) return undefined;
  const segs = layer.path.slice(1).split('/');
  const out: Array<string | null> = [];
  for (const seg of segs) {
    if (/^:[A-Za-z_][A-Za-z0-9_]*$/.test(seg)) out.push(null);
    else if (/^[A-Za-z0-9._~-]+$/.test(seg)) out.push(seg.toLowerCase());
    else return undefined;
  }
  return out;
}

/**
 * Whether a layer with these segments can match the path whose segments start at `starts` (the
 * index after each `/`; one more entry, the path's length + 1, closes the last): a necessary
 * condition only (the layer's regular expression decides), and cheap, so a request tests the
 * regular expressions of the few layers whose literal segments fit, not of every route under its
 * prefix. path-to-regexp (non-strict, case-insensitive) takes one optional trailing `/`, `#` or
 * `?` and needs each segment non-empty without `/`; literals are lower-case ASCII, so comparing
 * with ASCII letters folded to lower case is exactly its case-insensitive match.
 */
function mayMatch(segs: ReadonlyArray<string | null>, path: string, starts: readonly number[]): boolean {
  for (let i = 0; i < segs.length; i++) {
    const lit = segs[i];
    if (lit === null) continue;
    const start = starts[i];
    if (starts[i + 1] - 1 - start !== lit.length) return false;
    for (let j = 0; j < lit.length; j++) {
      let c = path.charCodeAt(start + j);
      if (c >= 65 && c <= 90) c += 32;
      if (c !== lit.charCodeAt(j)) return false;
    }
  }
  return true;
}

/** The path without the one trailing `/`, `#` or `?` path-to-regexp accepts after a route. */
function withoutTrailingDelimiter(path: string): string {
  const last = path.charCodeAt(path.length - 1);
  return path.length > 1 && (last === 47 || last === 35 || last === 63) ? path.slice(0, -1) : path;
}

const SAFE: Record<string, true> = { GET: true, HEAD: true, OPTIONS: true };

/**
 * The layers whose path followed by `/:param` is the path of layers taking writes, with those
 * writes (the layers of /v1/users/me/sessions, with DELETE of /v1/users/me/sessions/:token).
 */
function itemParentsOf(stack: Layer[]): Map<Layer, Set<string>> {
  const item = /^(.*)\/:[A-Za-z_][A-Za-z0-9_]*$/;
  const writesOfItems = new Map<string, Set<string>>();
  for (const layer of stack) {
    const m = typeof layer.path === 'string' ? item.exec(layer.path) : null;
    if (!m) continue;
    const key = m[1].toLowerCase();
    const set = writesOfItems.get(key) ?? new Set<string>();
    for (const method of layer.methods) if (!SAFE[method]) set.add(method);
    writesOfItems.set(key, set);
  }
  const parents = new Map<Layer, Set<string>>();
  for (const layer of stack) {
    const writes = typeof layer.path === 'string' ? writesOfItems.get(layer.path.toLowerCase()) : undefined;
    if (writes?.size) parents.set(layer, writes);
  }
  return parents;
}

/** A layer and its segments (segmentsOfLayer; undefined: always tested with its regular expression). */
interface Entry {
  layer: Layer;
  segs: Array<string | null> | undefined;
}

/**
 * The layers of one index key, in registration order, per segment count of the request path:
 * those whose segment count is that count, and every layer without segments. `other` (the latter
 * only) serves counts no simple layer has.
 */
interface Bucket {
  byCount: Map<number, Entry[]>;
  other: Entry[];
}

/** Below this many candidates their regular expressions are cheaper to test than to narrow down. */
const NARROW_FROM = 8;

function bucketOf(entries: Entry[]): Bucket {
  const byCount = new Map<number, Entry[]>();
  for (const n of new Set(entries.flatMap((e) => (e.segs ? [e.segs.length] : []))))
    byCount.set(
      n,
      entries.filter((e) => !e.segs || e.segs.length === n),
    );
  return { byCount, other: entries.filter((e) => !e.segs) };
}

/**
 * @koa/router tests every route's regular expression on every request; with a few hundred routes
 * that was about half the cost of a simple GET. This router narrows the candidates first by the
 * path's first two segments, then by segment count and literal segments (mayMatch), then matches
 * exactly as @koa/router does, in registration order, so behaviour (case-insensitivity, trailing
 * slashes, several layers per path) is unchanged.
 */
export class IndexedRouter<StateT = unknown, ContextT = unknown> extends Router<StateT, ContextT> {
  private index?: { size: number; byKey: Map<string, Bucket>; any: Bucket; itemParents: Map<Layer, Set<string>> };

  private buildIndex(): NonNullable<IndexedRouter['index']> {
    const keys = this.stack.map(keyOfLayer);
    const entries = this.stack.map((layer) => ({ layer, segs: segmentsOfLayer(layer) }));
    const byKey = new Map<string, Bucket>();
    for (const k of new Set(keys)) {
      if (k !== ANY) byKey.set(k, bucketOf(entries.filter((_, i) => keys[i] === k || keys[i] === ANY)));
    }
    return {
      size: this.stack.length,
      byKey,
      any: bucketOf(entries.filter((_, i) => keys[i] === ANY)),
      itemParents: itemParentsOf(this.stack),
    };
  }

  override match(path: string, method: string): Router.RoutesMatch {
    if (!this.index || this.index.size !== this.stack.length) this.index = this.buildIndex();
    const trimmed = withoutTrailingDelimiter(path);
    const bucket = this.index.byKey.get(keyOfPath(trimmed)) ?? this.index.any;
    // Where each segment starts (after each '/'), and the end of the last one.
    const starts: number[] = [];
    for (let i = 0; i < trimmed.length; i++) if (trimmed.charCodeAt(i) === 47) starts.push(i + 1);
    starts.push(trimmed.length + 1);
    const entries = bucket.byCount.get(starts.length - 1) ?? bucket.other;
    const narrow = entries.length >= NARROW_FROM;
    const matched: Router.RoutesMatch = { path: [], pathAndMethod: [], route: false };
    for (const { layer, segs } of entries) {
      if (narrow && segs && !mayMatch(segs, trimmed, starts)) continue;
      if (layer.match(path)) {
        matched.path.push(layer);
        if (layer.methods.length === 0 || layer.methods.includes(method)) {
          matched.pathAndMethod.push(layer);
          if (layer.methods.length > 0) matched.route = true;
        }
      }
    }
    return matched;
  }

  /**
   * Whether a write to a path ending in `/` is one to an item with an empty id: DELETE
   * /v1/users/me/sessions/ is DELETE /v1/users/me/sessions/:token without its token, and must not
   * reach DELETE /v1/users/me/sessions (every other session ends), as path-to-regexp's optional
   * trailing slash would have it. A write the path's item routes do not take (POST /v1/devices/,
   * where no POST /v1/devices/:id exists) is not one.
   */
  private emptyItem(path: string, method: string): boolean {
    const layers = this.match(path.slice(0, -1), method).pathAndMethod;
    const itemParents = this.index!.itemParents;
    return layers.some((layer) => itemParents.get(layer)?.has(method));
  }

  /**
   * @koa/router's dispatch, minus its per-request `reduce` + `compose` when every matching route
   * has one handler (every route defineRoute() registers), also when several match the path
   * (/v1/users/me and /v1/users/:id): params are set exactly as its own param layer sets them
   * and each handler's next is the next route, the last one's the outer `next`. Any other case
   * (router middleware, host, routerPath or exclusive options) takes @koa/router's own dispatch.
   */
  override middleware(): Router.Middleware<StateT, ContextT> {
    const general = super.middleware();
    if (this.opts.host || this.opts.routerPath) return general;
    const dispatch: Router.Middleware<StateT, ContextT> = (ctx, next) => {
      const c = ctx as unknown as DispatchContext;
      if (c.newRouterPath || c.matched) return general(ctx, next);
      const path = c.path;
      // Unmatched: 404.
      if (
        path.length > 1 &&
        path.charCodeAt(path.length - 1) === 47 &&
        !SAFE[c.method] &&
        this.emptyItem(path, c.method)
      )
        return next();
      const matched = this.match(path, c.method);
      const layers = matched.pathAndMethod as unknown as DispatchLayer[];
      if (!matched.route || this.opts.exclusive) return general(ctx, next);
      for (const layer of layers) if (layer.stack.length !== 1) return general(ctx, next);
      c.matched = matched.path;
      c.router = this;
      // The layers in order, each after its params are set, as @koa/router's composed chain runs
      // them: a handler that calls next() reaches the next matching route (/v1/users/me before
      // /v1/users/:id), the last one the outer next.
      const run = (i: number): unknown => {
        if (i === layers.length) return next();
        const layer = layers[i];
        c.captures = layer.captures(path, c.captures);
        c.params = c.request.params = layer.params(path, c.captures, c.params);
        c.routerPath = layer.path;
        c.routerName = layer.name;
        c._matchedRoute = layer.path;
        if (layer.name) c._matchedRouteName = layer.name;
        return layer.stack[0](ctx, i + 1 === layers.length ? next : () => Promise.resolve(run(i + 1)));
      };
      return run(0);
    };
    (dispatch as unknown as { router: Router }).router = this as unknown as Router;
    return dispatch;
  }

  override routes(): Router.Middleware<StateT, ContextT> {
    return this.middleware();
  }

  /**
   * After routing, for a path some route has but not with this method: OPTIONS answers the Allow
   * list, any other method (PUT on a read-only path, TRACE, PROPFIND…) is a 405 whose Allow header
   * lists the path's methods. Paths no route has stay 404. (@koa/router's own version answers 501
   * to methods it does not implement, and loses Allow when it throws.)
   */
  override allowedMethods(): Router.Middleware<StateT, ContextT> {
    return async (ctx, next) => {
      await next();
      const matched = (ctx as unknown as DispatchContext).matched;
      if (ctx.status !== 404 || ctx.body !== undefined || !matched?.length) return;
      const allowed = [...new Set(matched.flatMap((layer) => layer.methods))];
      if (!allowed.length) return;
      const allow = allowed.join(', ');
      if (ctx.method === 'OPTIONS') {
        ctx.status = 200;
        ctx.body = '';
        ctx.set('Allow', allow);
        return;
      }
      throw new HttpError(
        405,
        'MethodNotAllowed',
        `method ${ctx.method} not allowed on ${ctx.path}; allowed: ${allow}`,
        undefined,
        { Allow: allow },
      );
    };
  }
}
