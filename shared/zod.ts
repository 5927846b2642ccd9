import { extendZodWithOpenApi, OpenAPIRegistry } from '@asteasolutions/zod-to-openapi';
import { datetimeRegex, z } from 'zod';

// Every schema in the service is built from this `z`, so each can describe itself in OpenAPI.
extendZodWithOpenApi(z);

interface EffectsInternals {
  _def: {
    effect:
      | { type: 'refinement'; refinement: (value: unknown, ctx: z.RefinementCtx) => unknown }
      | { type: 'transform'; transform: (value: unknown, ctx: z.RefinementCtx) => unknown }
      | { type: 'preprocess' };
    schema: { _parseSync(input: z.ParseInput): z.SyncParseReturnType };
  };
  _processInputParams(input: z.ParseInput): { status: z.ParseStatus; ctx: z.ParseContext };
}

/**
 * zod 3's ZodEffects (every `.refine`, `.superRefine` and `.transform`) builds its refinement
 * context on each parse as an object literal with a getter over a fresh closure (`get path() {
 * return ctx.path }`). V8 keeps such an accessor, and through its closure the whole parse (the
 * input and zod's contexts), alive through the next scavenge: every request whose path or query
 * schema had a refinement promoted its parse into the old generation (2.4 MB per scavenge on GET
 * /v1/users/:id, scavenges of 10 ms instead of 2.5; README "Hot paths", "Garbage"). The
 * synchronous refinement and transform paths below are zod's own with the path as a data
 * property (the same array, which a parse never replaces); async parses and preprocessors keep
 * zod's code. Tested by test/shared/zodEffects.test.ts and test/api/drainGarbage.test.ts.
 */
const zodEffectsParse = z.ZodEffects.prototype._parse;
z.ZodEffects.prototype._parse = function parseEffects(this: EffectsInternals, input: z.ParseInput) {
  const effect = this._def.effect;
  if (effect.type === 'preprocess' || input.parent.common.async)
    return zodEffectsParse.call(this as unknown as z.ZodEffects<z.ZodTypeAny>, input);
  const { status, ctx } = this._processInputParams(input);
  const checkCtx: z.RefinementCtx = {
    addIssue: (arg) => {
      z.addIssueToContext(ctx, arg);
      if (arg.fatal) status.abort();
      else status.dirty();
    },
    path: ctx.path,
  };
  const inner = this._def.schema._parseSync({ data: ctx.data, path: ctx.path, parent: ctx });
  if (effect.type === 'refinement') {
    if (inner.status === 'aborted') return z.INVALID;
    if (inner.status === 'dirty') status.dirty();
    if (effect.refinement(inner.value, checkCtx) instanceof Promise)
      throw new Error('Async refinement encountered during synchronous parse operation. Use .parseAsync instead.');
    return { status: status.value, value: inner.value };
  }
  if (!z.isValid(inner)) return z.INVALID;
  const result = effect.transform(inner.value, checkCtx);
  if (result instanceof Promise)
    throw new Error('Asynchronous transform encountered during synchronous parse operation. Use .parseAsync instead.');
  return { status: status.value, value: result };
};

export { z };

/** The OpenAPI registry every route adds itself to (api/routing.ts). */
export const openApiRegistry = new OpenAPIRegistry();

// A NUL character cannot be stored in PostgreSQL text or jsonb (the query fails), and a lone UTF-16
// surrogate has no UTF-8 form (the driver silently stores U+FFFD instead).
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
/** Issues reported per input at most: enough to fix a request, not a megabyte of messages. */
const MAX_TEXT_ISSUES = 20;

/** Why `s` cannot be stored as text (NUL, unpaired surrogate), or null when it can. */
function textProblem(s: string): string | null {
  if (s.includes('\u0000')) return 'must not contain NUL characters';
  if (LONE_SURROGATE.test(s)) return 'must not contain unpaired UTF-16 surrogates';
  return null;
}

interface Walk {
  value: unknown;
  key?: string | number;
  parent?: Walk;
}

function pathOf(w: Walk): Array<string | number> {
  const path: Array<string | number> = [];
  for (let x: Walk | undefined = w; x && x.key !== undefined; x = x.parent) path.unshift(x.key);
  return path;
}

/**
 * Reports every string (values and object keys) under `value` that cannot be stored as text, at its
 * path. Iterative, so a hostile body nested a million levels deep cannot overflow the stack.
 */
function refineText(value: unknown, ctx: z.RefinementCtx): void {
  const stack: Walk[] = [{ value }];
  let issues = 0;
  while (stack.length && issues < MAX_TEXT_ISSUES) {
    const w = stack.pop()!;
    const v = w.value;
    if (typeof v === 'string') {
      const problem = textProblem(v);
      if (problem) {
        issues++;
        ctx.addIssue({ code: z.ZodIssueCode.custom, message: problem, path: pathOf(w) });
      }
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], key: i, parent: w });
    } else if (v !== null && typeof v === 'object') {
      const entries = Object.entries(v);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [k, child] = entries[i];
        const problem = textProblem(k);
        if (problem) {
          issues++;
          ctx.addIssue({ code: z.ZodIssueCode.custom, message: `keys ${problem}`, path: pathOf(w) });
        }
        stack.push({ value: child, key: k, parent: w });
      }
    }
  }
}

/**
 * The text rule of every input, in front of its schema: any string anywhere in the value (and any
 * object key) with a NUL character or an unpaired surrogate is a 400 naming its path, before the
 * schema runs. defineRoute applies it to the params, query and body of every REST route, and the
 * GraphQL gate to every field's arguments, so no route or `z.string()` can forget it; other
 * entry points (queue payloads from clients) wrap their schema the same way.
 */
export const zInput = <T extends z.ZodTypeAny>(schema: T) =>
  new TextCheckedInput<T>({
    in: z.unknown().superRefine(refineText),
    out: schema,
    typeName: z.ZodFirstPartyTypeKind.ZodPipeline,
  });

/**
 * zInput for a body whose items the route checks one by one (`bodyText: 'items'`): the text rule on
 * the envelope, every key and value of the top-level object except the contents of its arrays (the
 * items), then the schema. A NUL in a key or an undeclared field beside the items is still a 400.
 */
export const zInputEnvelope = <T extends z.ZodTypeAny>(schema: T) =>
  z
    .unknown()
    .superRefine((value, ctx) => {
      if (value === null || typeof value !== 'object' || Array.isArray(value)) return;
      const envelope = Object.fromEntries(
        Object.entries(value).map(([k, v]) => [k, Array.isArray(v) ? [] : v] as const),
      );
      if (!storableText(envelope)) refineText(envelope, ctx);
    })
    .pipe(schema);

/**
 * True when no string under `value` (values and object keys) breaks the text rule: the same walk
 * as refineText without zod's machinery, iterative for the same reason.
 */
function storableText(value: unknown): boolean {
  if (typeof value === 'string') return textProblem(value) === null;
  if (value === null || typeof value !== 'object') return true;
  const stack: unknown[] = [value];
  while (stack.length) {
    const v = stack.pop();
    if (typeof v === 'string') {
      if (textProblem(v) !== null) return false;
    } else if (Array.isArray(v)) {
      for (const x of v) stack.push(x);
    } else if (v !== null && typeof v === 'object') {
      for (const k of Object.keys(v)) {
        if (textProblem(k) !== null) return false;
        stack.push((v as Record<string, unknown>)[k]);
      }
    }
  }
  return true;
}

/**
 * zInput's schema. Parsing every request's params, query and body through zod's refinement and
 * pipe cost about 1.5 µs each, most of a simple GET's validation; when the text walk finds nothing
 * (the usual case) the value goes straight to the inner schema, whose result is exactly the
 * pipeline's. Only a value that breaks the rule takes the full pipeline, for its issues and paths.
 */
class TextCheckedInput<T extends z.ZodTypeAny> extends z.ZodPipeline<z.ZodEffects<z.ZodUnknown>, T> {
  override safeParse(data: unknown, params?: Partial<z.ParseParams>): z.SafeParseReturnType<unknown, z.output<T>> {
    if (storableText(data)) return this._def.out.safeParse(data, params) as z.SafeParseReturnType<unknown, z.output<T>>;
    return super.safeParse(data, params);
  }
}

/** The length of `s` in code points (an emoji is one, not the two UTF-16 units of `s.length`). */
export function codePoints(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length - 1; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n--;
        i++;
      }
    }
  }
  return n;
}

/** The length bounds of a text field (zChars). */
export interface CharBounds {
  max: number;
  /** At least this many characters; 1 is "must not be empty" (or `minMessage`). */
  min?: number;
  minMessage?: string;
  /** Whitespace around the value is dropped before the bounds are checked (zod's trim). */
  trim?: boolean;
}

/**
 * The one way to declare a text field with a length bound (request bodies, queries, params,
 * GraphQL and queue inputs; lint forbids zod's own string `.min()`/`.max()`/`.length()`).
 * Characters are counted as code points, as PostgreSQL counts them for varchar(n) and as JSON
 * Schema's maxLength/minLength count them in the OpenAPI document; zod's own bounds count UTF-16
 * units, which refused emoji-heavy text at half its published limit. The bounds apply to what
 * `base` produces: after its trim and after any normalising transform (Unicode NFC can make a name
 * longer), so no value within them can be too long for its column. `base` carries everything
 * else (its type message, a pattern, a format); the messages of the bounds are the same
 * everywhere: "must be at most N characters", "must be at least N characters", "must not be empty".
 */
export function zChars<T extends z.ZodType<string, z.ZodTypeDef, unknown> = z.ZodString>(
  bounds: CharBounds,
  base?: T,
): z.ZodEffects<T, string, z.input<T>> {
  const { max, min = 0 } = bounds;
  let inner = (base ?? z.string()) as T;
  if (bounds.trim) {
    if (!(inner instanceof z.ZodString)) throw new Error('zChars: trim needs a string base (trim in the base instead)');
    inner = inner.trim() as unknown as T;
  }
  const minMessage = bounds.minMessage ?? (min === 1 ? 'must not be empty' : `must be at least ${min} characters`);
  const limits: { maxLength: number; minLength?: number } = { maxLength: max };
  if (min > 0) limits.minLength = min;
  return inner
    .superRefine((v: string, ctx) => {
      // s.length counts each code point once or twice: most values need no counting.
      if (v.length <= max && v.length >= 2 * min) return;
      const n = codePoints(v);
      if (n > max)
        ctx.addIssue({
          code: z.ZodIssueCode.too_big,
          type: 'string',
          maximum: max,
          inclusive: true,
          message: `must be at most ${max} characters`,
        });
      else if (n < min)
        ctx.addIssue({
          code: z.ZodIssueCode.too_small,
          type: 'string',
          minimum: min,
          inclusive: true,
          message: minMessage,
        });
    })
    .openapi(limits);
}

/**
 * An absolute http(s) URL with a host, as clients later follow it (avatars, app links): other
 * schemes (`javascript:`, `data:`, `ftp:`) and text that only parses after trimming are a 400.
 */
export const zHttpUrl = (max = 2048) =>
  zChars({ max }, z.string().url({ message: 'must be a URL' })).refine((v) => {
    if (!URL.canParse(v)) return true; // refinements run even when .url() failed; that issue is enough
    const u = new URL(v);
    if (!/^https?:\/\//i.test(v)) return false;
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.hostname !== '';
  }, 'must be an http or https URL');

// The one UUID pattern (the lint rule that forbids copies points here).
// eslint-disable-next-line no-restricted-syntax
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Is `v` a UUID (any case)? The one test outside zod schemas: ids in paths, tickets, CLI arguments. */
export const isUuid = (v: unknown): v is string => typeof v === 'string' && UUID.test(v);

/**
 * An ISO 8601 date-time with `Z` or an offset. zod's own check takes any two-digit offset
 * (`+25:00`, `-99:99`), which no Date can hold: such a value reached the database as an invalid
 * date and came back as a 400 that named no field. The value must also be a real instant.
 */
export const zDateTime = (message = 'must be an ISO 8601 date-time') =>
  z
    .string()
    .datetime({ offset: true, message })
    // Only for a value the format check passed: one problem per field, not two.
    .refine((v) => !isIsoDateTime(v) || !Number.isNaN(Date.parse(v)), message)
    .refine((v) => !isIsoDateTime(v) || !(Date.parse(v) > LAST_INSTANT), LAST_INSTANT_MESSAGE);

/**
 * zod's own `.datetime({ offset: true })` pattern, made once: zod builds it anew (`new RegExp`) on
 * every check, a few microseconds each. The check in a schema stays zod's (it documents the field
 * as `format: date-time`); the refinements above test this copy.
 */
const ISO_DATE_TIME = datetimeRegex({ precision: null, offset: true, local: false });
/** Whether `v` passes zod's `.datetime({ offset: true })`. */
export const isIsoDateTime = (v: string): boolean => ISO_DATE_TIME.test(v);

/**
 * The last instant a timestamp may name: 9999-12-31T23:59:59.999Z. Past it (`9999-12-31T23:59-12:00`
 * is in year 10000) a date prints as `+010000-…`, which is no RFC 3339 text and which no date-time
 * field would take back.
 */
export const LAST_INSTANT = Date.UTC(9999, 11, 31, 23, 59, 59, 999);
export const LAST_INSTANT_MESSAGE = 'must not be later than 9999-12-31T23:59:59.999Z';

/** Days of each month in a common year. */
const MONTH_DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/** The number `length` ASCII digits of `v` spell from `at`, or -1 when one of them is no digit. */
function digitsAt(v: string, at: number, length: number): number {
  let n = 0;
  for (let i = at; i < at + length; i++) {
    const c = v.charCodeAt(i) - 48;
    if (!(c >= 0 && c <= 9)) return -1;
    n = n * 10 + c;
  }
  return n;
}

/**
 * Whether the calendar day a `YYYY-MM-DD…` text starts with exists (the proleptic Gregorian
 * calendar, as Date has it: Date itself rolls 2026-02-30 over to 2 March). Counted, not parsed:
 * building a Date and printing it back cost about 2 µs a value, and a member sync checks two
 * dates of each of 100,000 members.
 */
export function calendarDayExists(v: string): boolean {
  if (v.charCodeAt(4) !== 45 || v.charCodeAt(7) !== 45) return false; // '-'
  const year = digitsAt(v, 0, 4);
  const month = digitsAt(v, 5, 2);
  const day = digitsAt(v, 8, 2);
  if (year < 0 || month < 1 || month > 12 || day < 1) return false;
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  return day <= (month === 2 && leap ? 29 : MONTH_DAYS[month - 1]);
}

const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?$/i;

/**
 * The instant an ISO 8601 date-time names, or null when it is none: date and time required, an
 * offset optional (without one the value is UTC, never the server's own time zone), the calendar
 * day must exist and the year be at most 9999.
 */
export function parseIsoInstant(v: string): Date | null {
  if (!ISO_INSTANT.test(v) || !calendarDayExists(v)) return null;
  const at = new Date(/(z|[+-]\d{2}:?\d{2})$/i.test(v) ? v : `${v}Z`);
  const ms = at.getTime();
  return Number.isNaN(ms) || ms > LAST_INSTANT ? null : at;
}

/**
 * A UUID path or body field; malformed values are a 400 naming the field. Lower-cased: PostgreSQL
 * compares uuids regardless of case, but everything keyed by id in the service does not (cached
 * credentials, invalidations, `user:<id>` channels, self checks), and a ban sent with an
 * upper-case id (as Swift and .NET write them) left the banned user's cached session working.
 */
export const zUuid = () =>
  z
    .string()
    .uuid({ message: 'must be a UUID' })
    .transform((v) => v.toLowerCase());

/** Boolean in a query string: only `true`/`false`/`1`/`0`. */
export const zQueryBool = () =>
  z
    .enum(['true', 'false', '1', '0'], { errorMap: () => ({ message: 'must be true or false' }) })
    .transform((v) => v === 'true' || v === '1');

/**
 * A number in a query string, written as `pattern` says; anything else is left as it is for the
 * number schema to refuse. Not z.coerce: Number() also reads `0x10`, `0b11`, `1e1`, ` 5 ` and the
 * empty string (as 0), none of which is a number a client means to send.
 */
const queryNumber = <T extends z.ZodTypeAny>(pattern: RegExp, schema: T) =>
  z.preprocess((v) => (typeof v === 'string' && pattern.test(v) ? Number(v) : v), schema);
const INTEGER_TEXT = /^-?[0-9]+$/;
const DECIMAL_TEXT = /^-?([0-9]+(\.[0-9]*)?|\.[0-9]+)$/;

/** An integer in a query string (decimal digits, an optional minus); `refine` adds bounds. */
export const zQueryInteger = <T extends z.ZodTypeAny = z.ZodNumber>(refine?: (n: z.ZodNumber) => T) => {
  // Within ±(2^53 - 1): a larger value would not survive as a number, nor fit a bigint column.
  const n = z
    .number({ invalid_type_error: 'must be an integer' })
    .int('must be an integer')
    .safe(`must be at most ${Number.MAX_SAFE_INTEGER} in size`);
  return queryNumber(INTEGER_TEXT, refine ? refine(n) : n);
};

/** Integer in a query string with bounds. */
export const zQueryInt = (min: number, max: number) => zQueryInteger((n) => n.min(min).max(max));

/** A decimal number in a query string (`12`, `-0.5`, `.5`; no exponent); `refine` adds bounds. */
export const zQueryDecimal = <T extends z.ZodTypeAny>(refine: (n: z.ZodNumber) => T) =>
  queryNumber(DECIMAL_TEXT, refine(z.number({ invalid_type_error: 'must be a number' }).finite('must be a number')));

/**
 * A finite number. JSON has no NaN/Infinity, but JSON.parse reads `1e400` as Infinity: the body
 * parser refuses it, except in the items of a batch validated item by item (bodyText 'items').
 */
export const zFinite = () =>
  z.number({ invalid_type_error: 'must be a number' }).finite('number too large (beyond ±1.8e308)');

/**
 * `schema` with its value at most `maxBytes` as serialised JSON (UTF-8): free-form JSON that is read
 * whole wherever it goes (settings by every client that lists them, a geofence's metadata in every
 * event push and list page) may not be a document store. A larger value is a 400 naming the field;
 * an absent one is left to `schema`.
 */
export const zJsonAtMost = <T extends z.ZodTypeAny>(
  schema: T,
  maxBytes: number,
): z.ZodEffects<T, z.output<T>, z.input<T>> =>
  schema.refine(
    (v) => v === undefined || Buffer.byteLength(JSON.stringify(v)) <= maxBytes,
    `must be at most ${maxBytes / 1024} KiB as JSON`,
  );

/** Whether a PATCH body names no field: the spec's "all optional" bodies answer the resource unchanged. */
export const emptyPatch = (body: Record<string, unknown>): boolean => Object.values(body).every((v) => v === undefined);

/** Refines an object schema so that at least one field is present (PATCH bodies whose spec row says "at least one"). */
export function atLeastOne<T extends z.ZodRawShape>(schema: z.ZodObject<T>) {
  return schema.refine((v) => Object.values(v).some((x) => x !== undefined), {
    message: `at least one of ${Object.keys(schema.shape).join(', ')} is required`,
  });
}

/** A permission string as a scope: `resource:action`, either side may be the wildcard `*`. */
export const zScope = () => z.string().regex(/^([a-z][a-z0-9_]*|\*):([a-z][a-z0-9_.]*|\*)$/, 'must be resource:action');

/**
 * An input array of at most `max` items (and at least `min`), checked by length before any item.
 * zod's own `.max()` still parses every item of an oversized array and reports each bad one: a
 * 4 MB body of a million bad scopes answered 97 MB of messages and held the event loop for seconds.
 * Here an oversized array is one issue, zod's usual "at most" message, and no item is looked at.
 */
export function zList<T extends z.ZodTypeAny>(
  item: T,
  bounds: { max: number; min?: number; minMessage?: string },
  params?: z.RawCreateParams,
) {
  let array = z.array(item, params).max(bounds.max);
  if (bounds.min !== undefined) array = array.min(bounds.min, bounds.minMessage);
  return z.preprocess((v, ctx) => {
    if (!Array.isArray(v) || v.length <= bounds.max) return v;
    ctx.addIssue({
      code: z.ZodIssueCode.too_big,
      type: 'array',
      maximum: bounds.max,
      inclusive: true,
      exact: false,
      fatal: true,
    });
    return z.NEVER;
  }, array);
}
