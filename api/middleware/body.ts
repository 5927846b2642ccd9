import bourne from '@hapi/bourne';
import { isUtf8 } from 'node:buffer';
import querystring from 'node:querystring';
import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import zlib from 'node:zlib';
import type { Context, Middleware, Next } from 'koa';
import { HttpMethodEnum, koaBody } from 'koa-body';
// koa-body's own test of which types it parses, so the 415 below refuses exactly what it would ignore.
import { isJsonBody, isUrlencodedBody } from 'koa-body/lib/utils/body-type-util';
import { HttpError } from '../../shared/errors';
import { checkJsonLimits, jsonValuesOver, MAX_JSON_VALUES } from '../../shared/jsonLimits';
import { isRoutePath } from '../../shared/routePaths';

/** Largest JSON body (the koa-body limit below, in bytes for the fast path). */
const JSON_LIMIT_BYTES = 4 * 1024 * 1024;
/** A strict JSON body is an object or an array (co-body's test, RFC 7159 whitespace first). */
const STRICT_JSON = /^[ \t\n\r]*[[{]/;

/**
 * Routes (`POST /v1/gps/batch`) that validate their body item by item (`bodyText: 'items'`): a number
 * too large in one item is that item's schema's to refuse, so it does not reject the whole batch.
 * Their items have no free-form JSON.
 */
const itemBodies = new Set<string>();

/** Marks a route whose items are validated one by one (registered by defineRoute). */
export function validatesItems(method: string, path: string): void {
  itemBodies.add(`${method.toUpperCase()} ${path}`);
}

/**
 * Refuses a parsed body nested deeper than `MAX_JSON_DEPTH`, or holding a number too large for a
 * double, naming the field (400). Every route's fields are checked by their schemas too; this is
 * for free-form JSON (metadata, setting values), which no schema looks into.
 */
export function checkParsedBody(body: unknown, ctx?: Pick<Context, 'method' | 'path'>): void {
  // Top-level keys get the text rule here too, for the few routes that are not defineRoute's
  // (GraphQL's envelope): defineRoute's zInput covers the rest of every other body.
  if (body !== null && typeof body === 'object' && !Array.isArray(body))
    for (const key in body)
      if (key.includes('\u0000')) throw new HttpError(400, 'BadRequest', 'body: keys must not contain NUL characters');
  checkJsonLimits(body, !(ctx && itemBodies.has(`${ctx.method} ${ctx.path}`)));
}

/** True when every run of percent-escapes in `s` decodes to UTF-8 (a `%` without two hex digits stays text). */
function escapesAreUtf8(s: string): boolean {
  // Escapes of ASCII only (`%20`, `%7B`: an encoded GraphQL query) are UTF-8 as they are.
  if (!/%[89a-fA-F]/.test(s)) return true;
  for (const [run] of s.matchAll(/(?:%[0-9a-fA-F]{2})+/g)) {
    if (!isUtf8(Buffer.from(run.replace(/%/g, ''), 'hex'))) return false;
  }
  return true;
}

/** A 400 naming `field`, in the shape of every other validation 400. */
function fieldRefused(field: string, message: string): never {
  throw new HttpError(400, 'BadRequest', `${field}: ${message}`, { details: [{ field, message }] });
}

const NOT_UTF8_ESCAPES = 'percent-escapes must encode UTF-8';

/**
 * Rules of the URL that hold on every route, before any of them runs: defineRoute's zInput checks
 * its routes' declared parameters, this every parameter of every route (documents, GraphiQL,
 * GraphQL) and the path.
 * - Percent-escapes that are not UTF-8 (`%FF`, an encoded lone surrogate) are a 400 naming the
 *   parameter, or `path`: Node's query parser would turn them into U+FFFD and the router would keep
 *   them as literal text, so a filter or an id would silently change into another.
 * - A NUL in any query parameter is a 400 naming it.
 * Only a URL holding a `%` is looked at.
 */
function refuseBadUrl(ctx: Context): void {
  const path = ctx.path;
  if (path.includes('%') && !escapesAreUtf8(path)) fieldRefused('path', NOT_UTF8_ESCAPES);
  const qs = ctx.querystring;
  if (!qs || !qs.includes('%')) return;
  for (const pair of qs.split('&')) {
    if (!pair.includes('%') || escapesAreUtf8(pair)) continue;
    const eq = pair.indexOf('=');
    const key = eq < 0 ? pair : pair.slice(0, eq);
    fieldRefused(escapesAreUtf8(key) ? querystring.unescape(key).slice(0, 100) : 'query', NOT_UTF8_ESCAPES);
  }
  if (!qs.includes('%00')) return;
  for (const [key, value] of Object.entries(ctx.query)) {
    const values = Array.isArray(value) ? value : [value ?? ''];
    if (key.includes('\u0000') || values.some((v) => v.includes('\u0000')))
      fieldRefused(key.replaceAll('\u0000', '\\0').slice(0, 100), 'must not contain NUL characters');
  }
}

const BODY_TOO_LARGE = 'request body too large (JSON up to 4 MB, forms up to 256 KB)';
const TOO_MANY_VALUES = `body: too many JSON values (at most ${MAX_JSON_VALUES} arrays, objects and items)`;

/** koa-body's and the fast path's failures as the answers of the error handler. */
function refuse(err: Error): never {
  if (err instanceof HttpError) throw err;
  const status = (err as { status?: number }).status;
  if (status === 413) throw new HttpError(413, 'PayloadTooLarge', BODY_TOO_LARGE);
  if (status === 415) throw new HttpError(415, 'UnsupportedMediaType', err.message);
  throw Object.assign(new Error(err.message), {
    status: 400,
    type: 'entity.parse.failed',
    body: (err as { body?: unknown }).body,
  });
}

/**
 * The declared length of a plain JSON body the fast path takes: `application/json` (optionally
 * `; charset=utf-8`), not compressed, with a Content-Length within the limit; otherwise -1 and
 * koa-body decides (other JSON types, forms, chunked or compressed bodies, over the limit, none).
 */
export function plainJsonLength(ctx: Context): number {
  const h = ctx.req.headers;
  const type = h['content-type'];
  if (type === undefined) return -1;
  const t = type.length === 16 ? type.toLowerCase() : type.toLowerCase().replace(/\s+/g, '');
  if (t !== 'application/json' && t !== 'application/json;charset=utf-8') return -1;
  const encoding = h['content-encoding'];
  if (encoding !== undefined && encoding !== '' && encoding.toLowerCase() !== 'identity') return -1;
  const declared = h['content-length'];
  if (declared === undefined || !/^\d{1,8}$/.test(declared)) return -1;
  const length = Number(declared);
  return length > 0 && length <= JSON_LIMIT_BYTES ? length : -1;
}

/**
 * The length of any other JSON body read here rather than by koa-body: one of koa-body's JSON
 * types (application/vnd.api+json…) with a Content-Length (over the limit: 413) or sent in chunks,
 * or a compressed one (Infinity: read up to the limit, counted after decompression). -1 for
 * everything else (forms, an empty body), which koa-body reads.
 */
function otherJsonLength(ctx: Context): number {
  const h = ctx.req.headers;
  if (!isJsonBody(ctx, PARSED_TYPES as unknown as Parameters<typeof isJsonBody>[1])) return -1;
  const declared = h['content-length'];
  if (declared === undefined) return h['transfer-encoding'] !== undefined ? Infinity : -1;
  if (!/^\d{1,15}$/.test(declared) || declared === '0' || /^0+$/.test(declared)) return -1;
  if (contentEncoding(ctx) !== 'identity') return Infinity;
  const length = Number(declared);
  if (length > JSON_LIMIT_BYTES) refuse(Object.assign(new Error('request entity too large'), { status: 413 }));
  return length;
}

/** A request's Content-Encoding, lower case; none or an empty header is `identity`. */
function contentEncoding(ctx: Context): string {
  return ctx.req.headers['content-encoding']?.trim().toLowerCase() || 'identity';
}

/**
 * The body as it was sent, decompressed by its Content-Encoding (gzip, deflate, br; the encodings
 * koa-body's co-body reads), or a 415 naming an encoding it cannot read.
 */
function decodedBody(ctx: Context): Readable {
  const req = ctx.req;
  const encoding = contentEncoding(ctx);
  if (encoding === 'identity') return req;
  if (encoding === 'gzip' || encoding === 'x-gzip' || encoding === 'deflate') return req.pipe(zlib.createUnzip());
  if (encoding === 'br') return req.pipe(zlib.createBrotliDecompress());
  throw new HttpError(
    415,
    'UnsupportedMediaType',
    `Content-Encoding '${encoding.slice(0, 40)}' is not accepted: send the body as it is, or as gzip, deflate or br`,
  );
}

/**
 * Reads and parses a JSON body of `length` bytes (Infinity: until the end, within the limit) as
 * koa-body does (co-body, strict): a leading BOM dropped, an object or array only, prototype
 * poisoning refused (bourne). The bytes must be UTF-8 (RFC 8259): a body that is not is refused,
 * where a decoder would have stored U+FFFD in place of what was sent. A body of more than
 * `MAX_JSON_VALUES` values is a 413 before it is parsed. It skips what koa-body
 * spends on every request to pick a parser and a decoder, which the common case does not need.
 */
function readJson(ctx: Context, length: number): Promise<unknown> {
  const req = ctx.req;
  const source = decodedBody(ctx);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    const done = (err: Error | null, value?: unknown) => {
      source.off('data', onData);
      source.off('end', onEnd);
      req.off('error', onError);
      req.off('aborted', onAborted);
      if (source !== req) {
        source.off('error', onDecodeError);
        // Errors after this one (the rest of a broken stream) are nobody's to hear.
        source.on('error', () => undefined);
        // A decompressor left with unread input would hold it: gone with the answer.
        if (err) source.destroy();
      }
      if (err) reject(err);
      else resolve(value);
    };
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      chunks.push(chunk);
      // Counted as decompressed: a small compressed body may not expand beyond the limit.
      if (received > JSON_LIMIT_BYTES) {
        // The rest of the body is never read: the connection closes after the answer, or the next
        // request on it would be read as this body's bytes.
        req.pause();
        done(new HttpError(413, 'PayloadTooLarge', BODY_TOO_LARGE, undefined, { Connection: 'close' }));
      }
    };
    const onEnd = () => {
      if (length !== Infinity && received !== length)
        return done(new Error('request size did not match content length'));
      // A compressed body of nothing is an empty body, which is `{}` (as koa-body reads one).
      if (received === 0 && source !== req) return done(null, {});
      const bytes = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, received);
      if (!isUtf8(bytes)) return done(new HttpError(400, 'BadRequest', 'body: not valid UTF-8 (send JSON as UTF-8)'));
      let text = bytes.toString('utf8');
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
      try {
        // The text rides along, as co-body's errors carry it: the error handler names what it was.
        if (!STRICT_JSON.test(text))
          throw Object.assign(new SyntaxError('invalid JSON, only supports object and array'), { body: text });
        // Counted before parsing: the parse (and bourne's scan, and checkJsonLimits) cost per value,
        // and what is parsed holds the event loop.
        if (jsonValuesOver(text)) throw new HttpError(413, 'PayloadTooLarge', TOO_MANY_VALUES);
        done(null, bourne.parse(text, { protoAction: 'error' }));
      } catch (err) {
        done(err as Error);
      }
    };
    const onError = (err: Error) => done(err);
    // What the decompressor refuses is the client's: bytes that are not of the encoding they name.
    const onDecodeError = () => {
      // The rest of the body is never read: the connection closes after the answer, or the next
      // request on it would wait behind the unread bytes.
      req.pause();
      done(
        new HttpError(400, 'BadRequest', `body: not valid ${contentEncoding(ctx)} data`, undefined, {
          Connection: 'close',
        }),
      );
    };
    const onAborted = () => done(new Error('request aborted'));
    source.on('data', onData);
    source.on('end', onEnd);
    if (source === req) req.on('error', onError);
    else {
      source.on('error', onDecodeError);
      req.on('error', onError);
    }
    req.on('aborted', onAborted);
  });
}

const PARSED_TYPES = { json: true, urlencoded: true } as const;

/** Requests sent with `Expect: 100-continue` whose 100 Continue is sent here, when the body is read. */
const awaitingContinue = new WeakSet<IncomingMessage>();

/**
 * Marks a request whose `Expect: 100-continue` the server left unanswered (its 'checkContinue'
 * event): the 100 Continue goes out when the body parser starts reading, so a request refused
 * before that (credentials, rate limit, an unparsed type) gets its final answer instead, and the
 * client never sends the body.
 */
export function deferContinue(req: IncomingMessage): void {
  awaitingContinue.add(req);
}

/** Asks the client for its body, if it waits to be asked (`deferContinue`). */
function askForBody(ctx: Context): void {
  if (awaitingContinue.delete(ctx.req) && !ctx.res.headersSent) ctx.res.writeContinue();
}

const FORM_NOT_UTF8 = 'body: a form field is not valid UTF-8 (send forms as UTF-8, percent-escapes included)';

/**
 * Decodes one key or value of a form body (qs's decoder). co-body reads a form as latin1 here
 * (`encoding` below), one character per byte sent, so that bytes which are not UTF-8 are refused
 * rather than stored as U+FFFD; so are percent-escapes that do not decode to UTF-8 (`%E9`), which
 * qs would keep as the literal text `%E9`. A `%` not followed by two hex digits stays as it is,
 * as qs leaves it.
 */
function formDecoder(token: string): string {
  const bytes = Buffer.from(token.replace(/\+/g, ' '), 'latin1');
  if (!isUtf8(bytes)) throw new HttpError(400, 'BadRequest', FORM_NOT_UTF8);
  const text = bytes.toString('utf8');
  if (!text.includes('%')) return text;
  return text.replace(/(?:%[0-9a-fA-F]{2})+/g, (run) => {
    const decoded = Buffer.from(run.replace(/%/g, ''), 'hex');
    if (!isUtf8(decoded)) throw new HttpError(400, 'BadRequest', FORM_NOT_UTF8);
    return decoded.toString('utf8');
  });
}

/** The charset parameter of a Content-Type (quoted or not). */
const CHARSET = /;\s*charset\s*=\s*"?([^";\s]*)/i;

/**
 * A body koa-body would not parse (text/plain, XML, multipart, none named) is refused with 415: it
 * was ignored, and the route then refused its missing fields, which sent the client looking in the
 * wrong place (fetch sends a string body as text/plain unless told otherwise).
 */
function refuseUnparsedType(ctx: Context): void {
  const h = ctx.req.headers;
  const declared = h['content-length'];
  const hasBody = h['transfer-encoding'] !== undefined || (declared !== undefined && declared !== '0');
  if (!hasBody) return;
  const charset = CHARSET.exec(h['content-type'] ?? '')?.[1];
  if (charset !== undefined && !/^utf-?8$/i.test(charset))
    throw new HttpError(
      415,
      'UnsupportedMediaType',
      `Content-Type charset '${charset.slice(0, 40)}' is not accepted: send the body as UTF-8`,
    );
  const options = PARSED_TYPES as unknown as Parameters<typeof isJsonBody>[1];
  if (isJsonBody(ctx, options) || isUrlencodedBody(ctx, options)) return;
  // GraphQL takes JSON only (graphql-http refuses forms). Elsewhere the route is not known yet: a
  // form suits only routes whose fields are all text (the others answer it with their own 415).
  const accepted = isRoutePath(ctx.path, '/v1/gql')
    ? 'application/json (UTF-8)'
    : 'application/json (a route whose fields are all text also takes a form, application/x-www-form-urlencoded)';
  throw new HttpError(
    415,
    'UnsupportedMediaType',
    `Content-Type ${h['content-type'] ? `'${h['content-type'].slice(0, 100)}'` : '(none)'} is not accepted: send the body as ${accepted}`,
  );
}

/**
 * JSON and form bodies for the methods that carry one; a malformed body is a 400
 * (entity.parse.failed, answered by the error handler), one over the limit (4 MB, or for JSON
 * `MAX_JSON_VALUES` values) a 413, an unsupported
 * charset (anything but UTF-8) a 415. GET, HEAD and OPTIONS skip the parser entirely: they are
 * most requests and carry no body. A JSON body, compressed or not, is read here directly
 * (`readJson`), its bytes checked to be UTF-8; forms go through koa-body, byte for byte, and are
 * refused unless UTF-8 as well (`formDecoder`). Either way a body nested deeper
 * than `MAX_JSON_DEPTH` or holding a number beyond a double's range is a 400 naming the field, and a body of a type neither parses a 415.
 */
export function bodyParser(): Middleware {
  const parse = koaBody({
    jsonLimit: JSON_LIMIT_BYTES,
    formLimit: '256kb',
    // Only forms and empty bodies reach koa-body (every JSON body with bytes is read by `readJson`):
    // a form is read byte for byte, and `formDecoder` takes it as UTF-8 or refuses it.
    encoding: 'latin1',
    queryString: { allowDots: true, decoder: formDecoder },
    text: false,
    multipart: false,
    jsonStrict: true,
    parsedMethods: [HttpMethodEnum.POST, HttpMethodEnum.PUT, HttpMethodEnum.PATCH, HttpMethodEnum.DELETE],
    onError: (err) => refuse(err),
  });
  const fast = (ctx: Context, next: Next, length: number) => {
    askForBody(ctx);
    return readJson(ctx, length).then(
      (body) => {
        checkParsedBody(body, ctx);
        ctx.request.body = body;
        return next();
      },
      (err: Error) => refuse(err),
    );
  };
  return (ctx, next) => {
    const m = ctx.method;
    refuseBadUrl(ctx);
    if (m === 'GET' || m === 'HEAD' || m === 'OPTIONS') return next();
    const length = m === 'POST' || m === 'PUT' || m === 'PATCH' || m === 'DELETE' ? plainJsonLength(ctx) : -1;
    if (length > 0) return fast(ctx, next, length);
    refuseUnparsedType(ctx);
    if (m === 'POST' || m === 'PUT' || m === 'PATCH' || m === 'DELETE') {
      const other = otherJsonLength(ctx);
      if (other > 0) return fast(ctx, next, other);
    }
    askForBody(ctx);
    return parse(ctx, () => {
      checkParsedBody(ctx.request.body, ctx);
      return next();
    });
  };
}
