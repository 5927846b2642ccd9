import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { Context } from 'koa';
import { reusable } from './compression';
import { sendValidatedBytes } from './responses';

export interface StaticFile {
  body: Buffer;
  etag: string;
}

/**
 * Files of installed packages (Swagger UI, GraphiQL), read once each by absolute path; a handful.
 * Only files that exist stay: a name that could not be read is forgotten once answered, so names
 * made up by a client (the Swagger UI route is public) cannot grow the map.
 */
const files = new Map<string, Promise<StaticFile | null>>();

/** How many files are held (a test's check that misses are not kept). */
export const staticFileCount = () => files.size;

/** The file at `absolutePath`, read once (null when it cannot be read), its bytes compressed once. */
export function staticFile(absolutePath: string): Promise<StaticFile | null> {
  let f = files.get(absolutePath);
  if (!f) {
    f = readFile(absolutePath).then(
      (body) => ({ body: reusable(body), etag: `"${createHash('sha1').update(body).digest('base64url')}"` }),
      () => {
        // Concurrent requests for the name share this answer; the next one reads again.
        files.delete(absolutePath);
        return null;
      },
    );
    files.set(absolutePath, f);
  }
  return f;
}

/** Answers a static file: ETag (304 when the client has it), a day of caching, the bytes. */
export function sendStaticFile(ctx: Context, file: StaticFile, type: string): void {
  sendValidatedBytes(ctx, { etag: file.etag, cacheControl: 'public, max-age=86400', type, body: file.body });
}
