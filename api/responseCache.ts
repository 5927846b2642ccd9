import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { tableVersionTag } from '../shared/caches/tableVersions';
import { reusable } from './compression';
import { sendValidatedBytes } from './responses';
import type { AppContext } from './routing';

interface Entry {
  tag: string;
  /** The body as UTF-8 bytes: a string would be measured and encoded again on every answer. */
  json: Buffer;
  etag: string;
}

/**
 * Serialised answers by request path and query, least recently used out first: up to 4,096 of
 * them and 64 MB of JSON per process (a page of a list is a few KB; a whole reference table can be
 * MBs).
 */
const entries = new LRUCache<string, Entry>({
  max: 4096,
  maxSize: 64 * 1024 * 1024,
  sizeCalculation: (e, key) => e.json.length + key.length + 64,
});
/** One build per path and version at a time: concurrent misses share it. */
const building = new Map<string, Promise<Entry>>();

/**
 * Answers a read whose body depends only on the content of `tables` (and the request's path and
 * query, never on the caller): the serialised body is kept per process and reused while the tables'
 * version tag (one indexed read, bumped by a trigger in every writing transaction) is unchanged, so
 * a repeat costs no query of the rows and no serialisation, and every instance sees a write on its
 * very next request. The ETag is the tag's hash: a client that sends it back gets 304.
 *
 * Access is decided before (the route's `auth:`), so only bodies that are the same for everyone
 * allowed to read them may be cached here.
 */
export async function cachedResponse(ctx: AppContext, tables: readonly string[], build: () => Promise<unknown>) {
  const key = ctx.querystring ? `${ctx.path}?${ctx.querystring}` : ctx.path;
  const tag = await tableVersionTag(ctx.services.db, tables);
  let entry = entries.get(key);
  if (!entry || entry.tag !== tag) {
    const flight = `${key}\n${tag}`;
    let pending = building.get(flight);
    if (!pending) {
      // The tag was read before the rows: a write in between makes the next request rebuild.
      pending = build().then((body) => {
        const json = reusable(Buffer.from(JSON.stringify(body)));
        const made = { tag, json, etag: `W/"${createHash('sha1').update(`${key}\n${tag}`).digest('base64url')}"` };
        const current = entries.get(key);
        if (!current || current.tag !== tag) entries.set(key, made);
        return made;
      });
      building.set(flight, pending);
      void pending.finally(() => building.delete(flight)).catch(() => undefined);
    }
    entry = await pending;
  }
  sendValidatedBytes(ctx, {
    etag: entry.etag,
    cacheControl: 'private, no-cache',
    type: 'application/json',
    body: entry.json,
  });
}
