import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { KeyedVersionRef, versionTag } from '../shared/caches/tableVersions';
import { reusable } from './compression';
import { coalesced } from '../shared/rowLoader';
import { sendValidatedBytes } from './responses';
import { canonicalUrl } from './canonicalUrl';
import type { AppContext } from './routing';

interface Entry {
  tag: string;
  /** The body as bytes (UTF-8 for JSON and text): a string would be measured and encoded again on every answer. */
  bytes: Buffer;
  etag: string;
  /** The Content-Type the route answered with (JSON unless it set another). */
  type: string;
  /** The route's own headers of CACHED_HEADERS that it set (a download's file name, say). */
  headers: ReadonlyArray<readonly [string, string]>;
  /** When the answer stops being true without any write (epoch ms; Infinity: never). */
  validUntil: number;
}

/**
 * Headers a route may set that a cached copy of its answer is sent with again: a download's
 * Content-Disposition, and X-Total-Count-Estimated on a list whose total is an estimate.
 */
export const CACHED_HEADERS = ['Content-Disposition', 'X-Total-Count-Estimated'] as const;

/** What a route's handler answered on a miss: its body, Content-Type and the CACHED_HEADERS it set. */
export interface BuiltAnswer {
  body: unknown;
  type?: string;
  headers?: Partial<Record<(typeof CACHED_HEADERS)[number], string>>;
  /** Until when the answer holds without a write (see `answerValidUntil`); none: while the versions hold. */
  validUntil?: number;
}

/**
 * Says that the answer a cached route is building holds only until `ms` (epoch ms) even if nothing
 * is written, because it says something about time: whether a member's timeout is still running,
 * say. The cached copy is rebuilt from then on. The earliest of several calls counts.
 */
export function answerValidUntil(ctx: AppContext, ms: number): void {
  ctx.state.answerValidUntil = Math.min(ctx.state.answerValidUntil ?? Infinity, ms);
}

const current = (e: Entry, tag: string) => e.tag === tag && Date.now() < e.validUntil;

/** A built answer as bytes: strings and buffers as they are (with their type), anything else as JSON. */
function answerBytes(answer: BuiltAnswer): { bytes: Buffer; type: string } {
  const { body, type } = answer;
  if (typeof body === 'string') return { bytes: Buffer.from(body), type: type || 'text/plain; charset=utf-8' };
  if (Buffer.isBuffer(body)) return { bytes: body, type: type || 'application/octet-stream' };
  return { bytes: Buffer.from(JSON.stringify(body)), type: 'application/json' };
}

/**
 * Serialised answers by request URL (the documented spelling, api/canonicalUrl.ts), least recently used out first: up to 4,096 of
 * them and 64 MB of JSON per process (a page of a list is a few KB; a whole reference table can be
 * MBs).
 */
const entries = new LRUCache<string, Entry>({
  max: 4096,
  maxSize: 64 * 1024 * 1024,
  sizeCalculation: (e, key) => e.bytes.length + key.length + 64,
});
/**
 * Builds per cache key, one at a time (`coalesced`): requests that miss while a build runs share
 * the next one, which starts when the running one ends and reads the tag anew. While a table keeps
 * changing (gps_points under live tracking), every request sees a new tag; they still cost at most
 * one running build and one waiting per URL, not a build each.
 */
const builds = coalesced<Entry>();
/**
 * The build running for a key and the tag it read before its rows: a request that read the same
 * tag shares it (no write committed between the two reads, so its rows are as new as the request
 * needs) instead of waiting for the next one.
 */
const running = new Map<string, { tag: string; entry: Promise<Entry> }>();
/**
 * Answers a read whose body depends only on the content of `sources`, the request's path and
 * declared query, and on the caller at most through `variant` (a value decided by a policy: answers are
 * kept per variant, so callers with equal variants share one and no other caller is ever sent it).
 * The serialised body is kept per process and reused while the sources' version tag is unchanged
 * (and, for an answer about time, until `answerValidUntil`), so a repeat costs no query of the
 * rows and no serialisation, and every instance sees a write on its very next request. A source
 * is a table (its version row, bumped by a trigger in every writing transaction) or a keyed
 * version (one parent's version, e.g. a trip's track, the key taken from the validated path
 * `params`); all are read in the turn's batches. The ETag is the tag's hash: a client that sends
 * it back gets 304.
 *
 * Access is decided before (the route's `auth:`), so only bodies that are the same for everyone
 * allowed to read them (with the same variant) may be cached here.
 */
export async function cachedResponse(
  ctx: AppContext,
  sources: ReadonlyArray<string | KeyedVersionRef>,
  params: Record<string, unknown>,
  build: () => Promise<BuiltAnswer>,
  variant?: string,
) {
  // The documented spelling: `/V1/ROLES/?_=1` is `/v1/roles`, one entry, not one per spelling.
  const url = canonicalUrl(ctx);
  // A path never holds a newline: the variant cannot be confused with part of a URL.
  const key = variant === undefined ? url : `${variant}\n${url}`;
  const db = ctx.services.db;
  const tag = await versionTag(db, sources, params);
  // A build starts after every request that joins it has read its tag (`coalesced`) and reads the
  // tag again before its rows: its answer is at least as new as any of theirs, kept under the
  // newest tag, and a write between the tag and the rows makes the next request rebuild.
  const make = async (): Promise<Entry> => {
    const builtTag = await versionTag(db, sources, params);
    const made = build().then((answer): Entry => {
      const { bytes, type } = answerBytes(answer);
      const validUntil = answer.validUntil ?? Infinity;
      const e: Entry = {
        tag: builtTag,
        bytes: reusable(bytes),
        // An answer about time gets an ETag of its own for each period it holds.
        etag: `W/"${createHash('sha1')
          .update(`${key}\n${builtTag}${validUntil < Infinity ? `\n${validUntil}` : ''}`)
          .digest('base64url')}"`,
        type,
        headers: Object.entries(answer.headers ?? {}).filter((h): h is [string, string] => !!h[1]),
        validUntil,
      };
      // Builds of one key run one after another: the last one made is the newest.
      entries.set(key, e);
      return e;
    });
    const flight = { tag: builtTag, entry: made };
    running.set(key, flight);
    return made.finally(() => {
      if (running.get(key) === flight) running.delete(key);
    });
  };
  let entry = entries.get(key);
  if (!entry || !current(entry, tag)) {
    const sharing = running.get(key);
    entry = await (sharing?.tag === tag ? sharing.entry : builds(db, key, make));
    // An answer about time that ran out before this request got it (rare): built again.
    if (Date.now() >= entry.validUntil) entry = await builds(db, key, make);
  }
  for (const [name, value] of entry.headers) ctx.set(name, value);
  sendValidatedBytes(ctx, {
    etag: entry.etag,
    cacheControl: 'private, no-cache',
    type: entry.type,
    body: entry.bytes,
  });
}
