import compressible from 'compressible';
import type { Context } from 'koa';
import { promisify } from 'node:util';
import zlib from 'node:zlib';

/**
 * Response compression (`Content-Encoding: br` or `gzip`, whichever the client prefers among those
 * it accepts; `identity` otherwise), for bodies of at least MIN_BYTES.
 *
 * Two kinds of body, two costs:
 * - **Bytes made once and answered many times** (a cached list, the OpenAPI document, a static
 *   file: anything passed through `reusable()`) are compressed once per encoding, off the event
 *   loop; every later answer sends the compressed bytes as they are, for the cost of a WeakMap
 *   lookup. The compressed forms live exactly as long as the bytes do.
 * - **Bodies made for one request** (a page of rows, a GPX track) are compressed per request, at
 *   the fastest level, and only from DYNAMIC_MIN_BYTES up: below that, compressing costs the api
 *   more CPU than the bytes it saves cost anyone.
 *
 * Streams, types that do not compress (a ZIP export, images: `compressible`, from mime-db) and
 * bodies that already carry a Content-Encoding pass as they are. A compressible answer says
 * `Vary: Accept-Encoding`, compressed or not. A strong ETag becomes weak on a compressed answer
 * (the bytes differ, the content does not), so the client's If-None-Match still matches the
 * handler's ETag (`ctx.fresh` compares weakly) and gets 304.
 */
export const MIN_BYTES = 1024;
export const DYNAMIC_MIN_BYTES = 16 * 1024;

type Encoding = 'br' | 'gzip';

const brotli = promisify(zlib.brotliCompress);
const gzip = promisify(zlib.gzip);

/**
 * Levels. Bytes made once: brotli 4 and gzip 5; on lists of 10,000 rows (1.9–5 MB of JSON) brotli
 * 4 was as small as 9 (within 1%) in a fifth to a seventh of the time. Per request: brotli 1 and
 * gzip 1, the fastest of each; on a 40 KB GPX track brotli 1 took 57 µs where brotli 4 took 332
 * and gzip 5 149, for a body 8% larger than brotli 4's (2.9 against 2.7 KB of 40).
 */
function compress(bytes: Buffer, encoding: Encoding, once: boolean): Promise<Buffer> {
  compressions++;
  if (encoding === 'br')
    return brotli(bytes, {
      params: {
        [zlib.constants.BROTLI_PARAM_QUALITY]: once ? 4 : 1,
        [zlib.constants.BROTLI_PARAM_SIZE_HINT]: bytes.length,
        [zlib.constants.BROTLI_PARAM_MODE]: zlib.constants.BROTLI_MODE_TEXT,
      },
    });
  return gzip(bytes, { level: once ? 5 : 1 });
}

let compressions = 0;
/** How many bodies this process has compressed (a test's check that bytes made once are compressed once). */
export const compressionCount = () => compressions;

/** Compressed forms of bytes made once, per encoding, made on first use; `once`: the level. */
interface Forms {
  once: boolean;
  br?: Promise<Buffer>;
  gzip?: Promise<Buffer>;
}
const compressedForms = new WeakMap<Buffer, Forms>();

/**
 * Marks `bytes` as made once and answered many times: their compressed forms are then made once
 * too. Returns `bytes`. Bytes kept in a cache while they are current get the once-made level;
 * `shortLived` bytes, remade all the time (one flight of a whole-table read, shared by the requests
 * that waited for it), get the per-request level: a flight of 4.6 MB of JSON is compressed in a
 * fifth of the time, and the next flight starts that much sooner.
 */
export function reusable(bytes: Buffer, opts: { shortLived?: boolean } = {}): Buffer {
  if (bytes.length >= MIN_BYTES && !compressedForms.has(bytes)) compressedForms.set(bytes, { once: !opts.shortLived });
  return bytes;
}

function compressedForm(bytes: Buffer, forms: Forms, encoding: Encoding) {
  let form = forms[encoding];
  if (!form) {
    form = compress(bytes, encoding, forms.once);
    forms[encoding] = form;
    // A failure is answered uncompressed (below) and tried again by the next request.
    form.catch(() => {
      if (forms[encoding] === form) delete forms[encoding];
    });
  }
  return form;
}

/** Whether answers of this Content-Type are worth compressing, by type (a handful per process). */
const compressibleTypes = new Map<string, boolean>();
function compressibleType(contentType: string): boolean {
  let yes = compressibleTypes.get(contentType);
  if (yes === undefined) {
    yes = Boolean(contentType) && compressible(contentType) === true;
    if (compressibleTypes.size < 256) compressibleTypes.set(contentType, yes);
  }
  return yes;
}

/**
 * Accept-Encoding values read before, and what they prefer: a client sends the same value with
 * every request, and a process sees a handful of them (browsers, apps, curl). Bounded: a client
 * inventing values gets them parsed each time once the map is full.
 */
const preferred = new Map<string, Encoding | undefined>();
const PREFERRED_VALUES = 256;

/** The preferred encoding among br and gzip that the Accept-Encoding header allows, if any. */
export function preferredEncoding(header: string | undefined): Encoding | undefined {
  if (!header) return undefined;
  if (preferred.has(header)) return preferred.get(header);
  const encoding = readAcceptEncoding(header);
  if (preferred.size < PREFERRED_VALUES && header.length <= 256) preferred.set(header, encoding);
  return encoding;
}

function readAcceptEncoding(header: string): Encoding | undefined {
  let best: Encoding | undefined;
  let bestQ = 0;
  let star: number | undefined;
  const given = new Set<string>();
  for (const part of header.split(',')) {
    const [name, ...params] = part.trim().toLowerCase().split(';');
    let q = 1;
    for (const p of params) {
      const m = /^\s*q\s*=\s*([0-9.]+)\s*$/.exec(p);
      if (m) q = Number(m[1]);
    }
    if (!Number.isFinite(q)) continue;
    if (name === '*') star = q;
    if (name !== 'br' && name !== 'gzip') continue;
    given.add(name);
    // Equal preference: br (smaller) first.
    if (q > bestQ || (q === bestQ && q > 0 && name === 'br')) {
      best = name;
      bestQ = q;
    }
  }
  // `*` stands for every coding not named.
  if (star && star > bestQ) for (const name of ['br', 'gzip'] as const) if (!given.has(name)) return name;
  return bestQ > 0 ? best : undefined;
}

/**
 * On a 304 in place of `bytes` (answered as `type`): the `Vary` and ETag form the 200 would have
 * carried, so a cache revalidating a compressed answer (weak ETag) sees the same validator and
 * knows the answer varies (RFC 9110 §15.4.5: a 304 carries what the 200 would have in those).
 */
export function notModifiedHeaders(ctx: Context, bytes: Buffer, type: string): void {
  const once = compressedForms.has(bytes);
  if (bytes.length < (once ? MIN_BYTES : DYNAMIC_MIN_BYTES) || !compressibleType(type)) return;
  ctx.vary('Accept-Encoding');
  if (!preferredEncoding(ctx.get('Accept-Encoding')) || (!once && ctx.method === 'HEAD')) return;
  const etag = ctx.res.getHeader('ETag');
  if (typeof etag === 'string' && etag && !etag.startsWith('W/')) ctx.set('ETag', `W/${etag}`);
}

/**
 * Compresses the answer in `ctx` if it should be (see above): called by the error handler
 * (api/middleware/errors.ts) once the route has answered, so that it adds no middleware layer, no
 * promise and no await to the answers it leaves alone (most of them); it returns a promise only
 * when it compresses. A body that cannot be serialised throws here, inside the error handler, and
 * is answered as the error it is. A response below MIN_BYTES costs a length check.
 */
export function compressAnswer(ctx: Context): Promise<void> | undefined {
  const body: unknown = ctx.body;
  if (body == null || ctx.status === 204 || ctx.status === 304) return;
  let bytes: Buffer;
  let once = false;
  if (Buffer.isBuffer(body)) {
    if (body.length < MIN_BYTES) return;
    bytes = body;
    once = compressedForms.has(body);
    if (!once && body.length < DYNAMIC_MIN_BYTES) return;
  } else if (typeof body === 'string') {
    // Most strings are short; only a long one can reach the threshold (UTF-8: at most 3 bytes a unit).
    if (body.length * 3 < DYNAMIC_MIN_BYTES) return;
    bytes = Buffer.from(body);
    if (bytes.length < DYNAMIC_MIN_BYTES) return;
  } else if (typeof body === 'object' && typeof (body as { pipe?: unknown }).pipe !== 'function') {
    // A JSON body: serialised here rather than by Koa (the same one JSON.stringify).
    const json = JSON.stringify(body);
    if (json.length * 3 < DYNAMIC_MIN_BYTES) {
      ctx.body = json;
      return;
    }
    bytes = Buffer.from(json);
    ctx.body = bytes;
    if (bytes.length < DYNAMIC_MIN_BYTES) return;
  } else return;
  // Off the Node response: Koa's ctx.response.get copies every header into a new object first.
  if (ctx.res.hasHeader('Content-Encoding') || !compressibleType(String(ctx.res.getHeader('Content-Type') ?? '')))
    return;
  ctx.vary('Accept-Encoding');
  const encoding = preferredEncoding(ctx.get('Accept-Encoding'));
  if (!encoding || (!once && ctx.method === 'HEAD')) return;
  const compressing = once
    ? compressedForm(bytes, compressedForms.get(bytes)!, encoding)
    : compress(bytes, encoding, false);
  return compressing.then(
    (compressed) => {
      const etag = ctx.res.getHeader('ETag');
      if (typeof etag === 'string' && etag && !etag.startsWith('W/')) ctx.set('ETag', `W/${etag}`);
      ctx.set('Content-Encoding', encoding);
      ctx.body = compressed;
    },
    () => undefined, // answered uncompressed
  );
}
