/**
 * Path comparisons as the api's router makes them (@koa/router, neither `sensitive` nor `strict`):
 * without regard to case, and with one optional trailing `/`. Every rule keyed by a path (a rate
 * limit, an exemption, the system key's allowlist, GraphQL's error format, the WebSocket endpoint)
 * compares this way, or a spelling the router serves (`/V1/GPS/`) would escape it.
 */

/** Whether `path` is the literal route path `route` (lower case) as the router matches it. */
export function isRoutePath(path: string, route: string): boolean {
  const extra = path.length - route.length;
  if (extra !== 0 && !(extra === 1 && path.endsWith('/'))) return false;
  const head = extra ? path.slice(0, route.length) : path;
  return head === route || head.toLowerCase() === route;
}

/** Whether `path` is `prefix` (lower case) or a path below it, whole segments, as the router matches. */
export function isUnderRoutePath(path: string, prefix: string): boolean {
  if (path.length > prefix.length + 1 && path.charCodeAt(prefix.length) === 47 /* / */) {
    const head = path.slice(0, prefix.length);
    return head === prefix || head.toLowerCase() === prefix;
  }
  return isRoutePath(path, prefix);
}
