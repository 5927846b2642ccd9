import { OpenApiGeneratorV31 } from '@asteasolutions/zod-to-openapi';
import type { ZodTypeAny } from 'zod';
import { openApiRegistry, z } from '../shared/zod';
import { isRateLimitExempt } from './middleware/rateLimit';

/**
 * How routes describe themselves in the OpenAPI document: defineRoute (api/routing.ts) and
 * documentRoute (for the few routes registered on the router directly) both end here, so every
 * route gets the same error responses, security requirement and `x-permission`.
 */

/**
 * Every error body of the API (spec §1): `{error, message}`, plus the optional fields the error
 * handler (api/middleware/errors.ts) passes on from an HttpError's `extra` (shared/errors.ts):
 * `details` on validation failures, `error_description` on the OAuth endpoints.
 */
export const errorSchema = z
  .object({
    error: z.string().openapi({
      description: 'The error name (`BadRequest`, `NotFound`, …); on the OAuth endpoints the RFC 6749 error code',
      example: 'BadRequest',
    }),
    message: z.string().openapi({ example: 'name: is required' }),
    details: z
      .array(z.object({ field: z.string(), message: z.string() }))
      .optional()
      .openapi({ description: 'Validation failures (400): one entry per field, as in `message`' }),
    error_description: z
      .string()
      .optional()
      .openapi({ description: 'OAuth endpoints (RFC 6749 §5.2): the reason, as in `message`' }),
  })
  .passthrough()
  .openapi('Error');

export interface ResponseDoc {
  description: string;
  schema?: ZodTypeAny;
  /** The answer's media type (JSON unless given); several when it depends on the resource (static files). */
  contentType?: string | string[];
  /** A media type's own schema, where it differs from `schema` (with several content types). */
  schemaByType?: Record<string, ZodTypeAny>;
  example?: unknown;
}

export interface OperationDoc {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** Koa path, e.g. `/v1/trips/:id`. */
  path: string;
  summary: string;
  description?: string;
  tags: string[];
  /** The access rule in words (appended to the description). */
  access: string;
  /** Bearer credential required (everything but 'public'). */
  secured: boolean;
  /**
   * The security requirement when the route checks credentials of its own (X-ID-App-Key,
   * X-ID-App-Assertion, HTTP Basic client credentials) rather than through its access rule:
   * alternatives, e.g. `[{ idAppKey: [] }, { bearerAuth: [] }]` (`{}`: none needed). Default:
   * bearerAuth when secured, none otherwise.
   */
  security?: Array<Record<string, string[]>>;
  /** The permission the route needs, documented as `x-permission`. */
  permission?: string;
  params?: ZodTypeAny;
  query?: ZodTypeAny;
  body?: ZodTypeAny;
  /** The body's media type when not JSON. */
  bodyContentType?: string;
  bodyExample?: unknown;
  /** The route answers a malformed request as RFC 6749 §5.2 says (400 invalid_request), never 415. */
  oauthErrors?: boolean;
  /** The route validates declared input (params, query or body): it can answer 400. */
  validates: boolean;
  /** The route can deny a credential for lack of a permission or scope (403, besides the standard reasons). */
  forbids: boolean;
  /** The 200 answer carries an ETag, and a GET whose If-None-Match names it gets 304 without a body. */
  conditional?: boolean;
  responses?: Record<number, ResponseDoc>;
  /** Specification extensions (`x-…`) of the operation. */
  extensions?: Record<`x-${string}`, unknown>;
}

/** The security schemes besides bearerAuth, by name (registered with the document). */
export const SECURITY_SCHEMES = {
  idAppKey: {
    type: 'apiKey',
    in: 'header',
    name: 'X-ID-App-Key',
    description: 'The secret of an internal app (spec §5.8)',
  },
  idAppAssertion: {
    type: 'apiKey',
    in: 'header',
    name: 'X-ID-App-Assertion',
    description: 'A signed assertion from the ID app naming the signed-in user (spec §5.8)',
  },
  clientBasic: {
    type: 'http',
    scheme: 'basic',
    description:
      "An OAuth client's credentials (RFC 6749 §2.3.1): client_id and client_secret, each form-urlencoded, joined by a colon",
  },
} as const;

const SCHEME_WORDS: Record<string, string> = {
  bearerAuth: 'a bearer credential',
  idAppKey: 'X-ID-App-Key',
  idAppAssertion: 'X-ID-App-Assertion',
  clientBasic: 'HTTP Basic client credentials',
};

/**
 * A security requirement (alternatives of schemes) in words, for the access line of the
 * description. An empty alternative (`{}`) is a route anyone may call: the schemes are then
 * checked when sent.
 */
export function describeSecurity(security: Array<Record<string, string[]>>): string {
  const named = security.filter((req) => Object.keys(req).length > 0);
  const alternatives = named.map((req) =>
    Object.keys(req)
      .map((name) => SCHEME_WORDS[name] ?? name)
      .join(' with '),
  );
  if (named.length < security.length)
    return `Access: public; ${alternatives.join(' or ')} checked by the route itself when sent.`;
  return `Access: ${alternatives.join(' or ')}, checked by the route itself (none: 401).`;
}

/** Methods whose requests go through the body parser (api/middleware/body.ts), declared body or not. */
const BODY_METHODS = new Set(['post', 'put', 'patch', 'delete']);

const STANDARD_ERRORS: Record<number, string> = {
  304: 'Not Modified: the ETag sent in If-None-Match is current; no body',
  400: 'Invalid input: the message names the field, and `details` lists every field that failed validation. Also malformed JSON, and text with NUL characters or unpaired surrogates in any parameter',
  401: 'Missing, malformed, unknown, expired or revoked credentials; a public route answers 401 too when a bad credential is sent',
  403: 'The account of the credential is banned, or it is the system key on a route the system key may not call',
  404: 'Not found',
  413: 'Request body too large (JSON up to 4 MB and 50,000 values, forms up to 256 KB)',
  415: 'Request body neither JSON nor a form (application/x-www-form-urlencoded), or in a charset the service does not accept',
  429: 'Rate limited; Retry-After says when to try again',
  500: 'An unexpected server fault (logged; the message reveals nothing internal)',
  503: 'A dependency (the database, or Redis where the route needs it) is unavailable; Retry-After says when to try again',
};

/**
 * The statuses a route can answer besides its declared ones: what the middleware in front of
 * every route (api/app.ts) answers, and what its definition implies.
 * - 400: its input is validated (defineRoute checks the text of every parameter, declared or
 *   not), or its method carries a body (malformed JSON);
 * - 401 and 403 on every route: authentication refuses a bad credential, a banned account's
 *   credential and the system key outside its allowlist before any route runs (spec §5.5);
 * - 404 with path parameters; 413 and 415 for methods with a body (the body parser; an OAuth
 *   endpoint answers 400 where others answer 415);
 * - 429 unless the path is exempt from rate limiting; 500 (an unexpected fault) and 503 everywhere
 *   (a credential is resolved from the database);
 * - 304 when the answer is conditional (an ETag).
 */
function standardStatuses(op: OperationDoc): number[] {
  const body = BODY_METHODS.has(op.method);
  const out: number[] = [];
  if (op.conditional) out.push(304);
  if (op.validates || body) out.push(400);
  out.push(401, 403);
  if (/:[A-Za-z0-9_]+/.test(op.path)) out.push(404);
  if (body) out.push(413);
  if (body && !op.oauthErrors) out.push(415);
  if (!isRateLimitExempt(op.path)) out.push(429);
  out.push(500, 503);
  return out;
}

export const toOpenApiPath = (path: string) => path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

type ResponseObject = { description: string; headers?: Record<string, unknown>; content?: Record<string, unknown> };
type ResponseRef = { $ref: string };

const integerHeader = (description: string) => ({ description, schema: { type: 'integer' } });
const RATE_LIMIT_HEADERS = {
  'Retry-After': integerHeader('Seconds to wait before trying again'),
  'X-RateLimit-Limit': integerHeader(
    "Requests allowed per window by the limit that applies: the caller's tier, or the route's own limit when fewer requests remain under it",
  ),
  'X-RateLimit-Remaining': integerHeader('Requests left in the current window'),
  // Spec §8: a Unix timestamp, not a delay (api/middleware/rateLimit.ts, tooManyRequests in shared/errors.ts).
  'X-RateLimit-Reset': integerHeader('When the current window ends, as a Unix timestamp (seconds since the epoch)'),
};
const ETAG_HEADER = {
  ETag: { description: 'The version of the answer, for If-None-Match', schema: { type: 'string' } },
};

/**
 * The operation's responses: declared ones (errors get the Error schema) plus the standard
 * statuses. A GraphQL operation (`x-protocol: graphql`) answers every error in GraphQL's format
 * (api/middleware/errors.ts), so its errors get the schema of its 200 answer.
 */
function responsesOf(op: OperationDoc): Record<string, ResponseObject | ResponseRef> {
  const graphql = op.extensions?.['x-protocol'] === 'graphql';
  const errorBody = (graphql ? op.responses?.[200]?.schema : undefined) ?? errorSchema;
  const out: Record<string, ResponseObject> = {};
  const shared: Record<string, ResponseRef> = {};
  for (const [status, r] of Object.entries(op.responses ?? { 200: { description: 'OK' } })) {
    const isError = Number(status) >= 400;
    const schema = r.schema ?? (isError ? errorBody : undefined);
    const types = Array.isArray(r.contentType) ? r.contentType : [r.contentType ?? 'application/json'];
    out[status] = {
      description: r.description,
      ...(schema
        ? {
            content: Object.fromEntries(
              types.map((type) => [
                type,
                {
                  schema: r.schemaByType?.[type] ?? schema,
                  ...(r.example !== undefined ? { example: r.example } : {}),
                },
              ]),
            ),
          }
        : {}),
    };
  }
  for (const status of standardStatuses(op)) {
    if (out[status]) continue;
    // Stated once in components/responses and referred to: the same ten answers on 200 operations
    // doubled the document. GraphQL's errors have a body of their own.
    if (!graphql) {
      shared[status] = { $ref: `#/components/responses/${standardResponseName(status, op.forbids)}` };
      continue;
    }
    const description =
      status === 403 && op.forbids
        ? `The credential lacks the permission or scope. Also: ${STANDARD_ERRORS[403].replace(/^T/, 't')}`
        : STANDARD_ERRORS[status];
    out[status] =
      status === 304 ? { description } : { description, content: { 'application/json': { schema: errorBody } } };
  }
  if (out[429]) out[429].headers = { ...out[429].headers, ...RATE_LIMIT_HEADERS };
  if (out[503]) out[503].headers = { ...out[503].headers, 'Retry-After': RATE_LIMIT_HEADERS['Retry-After'] };
  if (op.conditional) {
    for (const status of ['200', '304'])
      if (out[status]) out[status].headers = { ...out[status].headers, ...ETAG_HEADER };
  }
  return Object.fromEntries(
    Object.entries({ ...out, ...shared }).sort(([a], [b]) => Number(a) - Number(b) || a.localeCompare(b)),
  );
}

const STANDARD_NAMES: Record<number, string> = {
  304: 'NotModified',
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  413: 'PayloadTooLarge',
  415: 'UnsupportedMediaType',
  429: 'TooManyRequests',
  500: 'InternalServerError',
  503: 'ServiceUnavailable',
};

/** The name in components/responses of a standard answer (403 of a route that checks a permission: its own). */
function standardResponseName(status: number, forbids?: boolean): string {
  return status === 403 && forbids ? 'ForbiddenPermission' : STANDARD_NAMES[status];
}

/** The standard answers (components/responses), each with its headers: Retry-After, the X-RateLimit set, ETag. */
function standardResponses(): Record<string, ResponseObject> {
  const body = { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } };
  const out: Record<string, ResponseObject> = {};
  for (const [code, description] of Object.entries(STANDARD_ERRORS)) {
    const status = Number(code);
    out[standardResponseName(status)] =
      status === 304 ? { description, headers: { ...ETAG_HEADER } } : { description, content: body };
  }
  out[standardResponseName(403, true)] = {
    description: `The credential lacks the permission or scope. Also: ${STANDARD_ERRORS[403].replace(/^T/, 't')}`,
    content: body,
  };
  out[standardResponseName(429)].headers = { ...RATE_LIMIT_HEADERS };
  out[standardResponseName(503)].headers = { 'Retry-After': RATE_LIMIT_HEADERS['Retry-After'] };
  return out;
}

/**
 * A copy of the document with every operation's response references (components/responses)
 * replaced by what they name: for readers that look at an operation's answers one by one (the
 * client generator, the tests' response checker).
 */
export function withResponsesInline<D extends Record<string, unknown>>(doc: D): D {
  const named = ((doc.components as { responses?: Record<string, unknown> } | undefined)?.responses ?? {}) as Record<
    string,
    unknown
  >;
  const paths: Record<string, Record<string, unknown>> = {};
  for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, { responses?: object }>>)) {
    paths[path] = {};
    for (const [method, op] of Object.entries(ops)) {
      const responses = Object.fromEntries(
        Object.entries((op.responses ?? {}) as Record<string, { $ref?: string }>).map(([status, r]) => [
          status,
          r.$ref ? named[r.$ref.replace('#/components/responses/', '')] : r,
        ]),
      );
      paths[path][method] = op.responses ? { ...op, responses } : op;
    }
  }
  return { ...doc, paths };
}

/**
 * The fields of a body refined by `atLeastOne` (shared/zod.ts): `{}` fails it with "at least one
 * of …". zod-to-openapi does not render refinements, so the document states the rule itself.
 */
function atLeastOneFields(schema: ZodTypeAny): string[] | undefined {
  if (!(schema instanceof z.ZodEffects) || schema._def.effect.type !== 'refinement') return undefined;
  const inner = schema.innerType() as ZodTypeAny;
  if (!(inner instanceof z.ZodObject) || !inner.safeParse({}).success) return undefined;
  const result = schema.safeParse({});
  if (result.success || !result.error.issues.some((i) => !i.path.length && /^at least one of /.test(i.message)))
    return undefined;
  return Object.keys(inner.shape as z.ZodRawShape);
}

/** The schema under optional/nullable/default wrappers and refinements. */
function unwrapped(schema: ZodTypeAny): ZodTypeAny {
  let s = schema;
  for (;;) {
    if (s instanceof z.ZodOptional || s instanceof z.ZodNullable) s = s.unwrap() as ZodTypeAny;
    else if (s instanceof z.ZodDefault) s = s.removeDefault() as ZodTypeAny;
    else if (s instanceof z.ZodEffects && s._def.effect.type !== 'preprocess') s = s.innerType() as ZodTypeAny;
    else return s;
  }
}

/** A value a form field (always text) can be. */
function textField(schema: ZodTypeAny): boolean {
  const s = unwrapped(schema);
  if (s instanceof z.ZodString || s instanceof z.ZodEnum) return true;
  if (s instanceof z.ZodLiteral) return typeof s.value === 'string';
  if (s instanceof z.ZodUnion) return (s.options as ZodTypeAny[]).every(textField);
  return false;
}

/**
 * Whether the body parser's form bodies (application/x-www-form-urlencoded, api/middleware/body.ts)
 * can pass this body schema: an object whose every field is text, since a form's values are.
 */
export function formExpressible(schema: ZodTypeAny): boolean {
  const s = unwrapped(schema);
  return s instanceof z.ZodObject && Object.values(s.shape as z.ZodRawShape).every((f) => textField(f as ZodTypeAny));
}

/** The request body as the document shows it: JSON (and a form when its fields are all text). */
function requestBodyOf(op: OperationDoc): Record<string, unknown> | undefined {
  if (!op.body || op.body instanceof z.ZodUnknown) return undefined;
  let schema = op.body;
  const atLeastOne = atLeastOneFields(schema);
  if (atLeastOne)
    schema = schema.openapi({
      minProperties: 1,
      anyOf: atLeastOne.map((field) => ({ required: [field] })),
      description: [schema._def.openapi?.metadata?.description, `At least one of ${atLeastOne.join(', ')}.`]
        .filter(Boolean)
        .join(' '),
    });
  const example = op.bodyExample !== undefined ? { example: op.bodyExample } : {};
  const types = op.bodyContentType
    ? [op.bodyContentType]
    : formExpressible(schema)
      ? ['application/json', 'application/x-www-form-urlencoded']
      : ['application/json'];
  return { content: Object.fromEntries(types.map((type) => [type, { schema, ...example }])) };
}

/** Adds one operation to the OpenAPI registry. */
export function registerOperation(op: OperationDoc): void {
  const body = requestBodyOf(op);
  openApiRegistry.registerPath({
    method: op.method,
    path: toOpenApiPath(op.path),
    operationId: operationId(op.method, op.path),
    summary: op.summary,
    description: [op.description, op.access].filter(Boolean).join('\n\n'),
    tags: op.tags,
    security: op.security ?? (op.secured ? [{ bearerAuth: [] }] : []),
    ...(op.permission ? { 'x-permission': op.permission } : {}),
    ...op.extensions,
    request: {
      ...(op.params ? { params: op.params as z.ZodObject<z.ZodRawShape> } : {}),
      ...(op.query ? { query: op.query as z.ZodObject<z.ZodRawShape> } : {}),
      ...(body ? { body: body as never } : {}),
    },
    responses: responsesOf(op) as never,
  });
}

/**
 * The extension of an operation that exists only outside production (GraphiQL): the first-party
 * client (scripts/clientTypes.ts) describes the production API and leaves it out.
 */
export const DEVELOPMENT_ONLY = { 'x-development-only': true } as const;

/** A stable operation id from method and path: `get_v1_trips_id`. */
export function operationId(method: string, path: string): string {
  return `${method.toLowerCase()}${path.replace(/[^A-Za-z0-9]+/g, '_').replace(/_+$/, '')}`;
}

/** Documents a route registered on the router directly (not through defineRoute). */
export function documentRoute(doc: {
  method: OperationDoc['method'];
  path: string;
  summary: string;
  tags: string[];
  /** 'public' or a bearer credential of any kind ('authenticated'), or one with a permission. */
  auth: 'public' | 'authenticated' | { permission: string };
  description?: string;
  params?: ZodTypeAny;
  query?: ZodTypeAny;
  body?: ZodTypeAny;
  responses: Record<number, ResponseDoc>;
  /** The 200 answer carries an ETag; If-None-Match gets 304. */
  conditional?: boolean;
  extensions?: Record<`x-${string}`, unknown>;
}): void {
  const permission = typeof doc.auth === 'object' ? doc.auth.permission : undefined;
  registerOperation({
    ...doc,
    access: permission ? `Requires \`${permission}\`.` : `Access: ${doc.auth as string}.`,
    secured: doc.auth !== 'public',
    permission,
    // The body middleware refuses a NUL in any query parameter, declared or not: any route can answer 400.
    validates: true,
    forbids: Boolean(permission),
  });
}

let built: Record<string, unknown> | undefined;

/** What holds for every operation and is not per operation in OpenAPI. */
const INFO_DESCRIPTION = [
  'Accounts, access control, tracking and real-time API. The WebSocket API (/v1/ws) is described by the AsyncAPI document at /v1/asyncapi.json.',
  'Errors are `{error, message}` (component `Error`; validation failures add `details`), in GraphQL format on /v1/gql. ' +
    'Besides the statuses each operation lists, any path the router does not know answers 404, and a known path called with ' +
    'another method answers 405 with an `Allow` header.',
  'Every answer of a rate-limited operation (those documenting 429) carries X-RateLimit-Limit, X-RateLimit-Remaining and ' +
    'X-RateLimit-Reset, refusals of its body included (400 for malformed JSON or a NUL character, 413, 415): a request is ' +
    'counted before its body is read. A request refused before routing (a malformed request line or head: 400, 414, 431, ' +
    '501, 505) carries none. The system key is not rate limited.',
  'A 201 carries a Location header, the `_links.self` of the new resource (not POST /v1/gps/batch, which creates no ' +
    'resource of its own, nor POST /v1/sessions, whose path holds the session token).',
  'Request bodies are JSON; an operation whose body fields are all text also takes application/x-www-form-urlencoded ' +
    '(the document lists it there); any other answers a form with 415.',
  'Not described here: the queue dashboard (Bull Board) under /v1/admin/queues, an operator UI for browsers opened with ' +
    'POST /v1/admin/queues/session, whose pages and internal JSON API are not a public interface.',
].join('\n\n');

/**
 * The OpenAPI 3.1 document of every route registered in this process, built once (the route
 * table does not change while the process runs).
 */
export function openApiDocument(version: string): Record<string, unknown> {
  if (!built) {
    openApiRegistry.registerComponent('securitySchemes', 'bearerAuth', {
      type: 'http',
      scheme: 'bearer',
      description: 'Session token, OAuth access token, API key or system key',
    });
    for (const [name, scheme] of Object.entries(SECURITY_SCHEMES))
      openApiRegistry.registerComponent('securitySchemes', name, scheme);
    for (const [name, response] of Object.entries(standardResponses()))
      openApiRegistry.registerComponent('responses', name, response as never);
    built = new OpenApiGeneratorV31(openApiRegistry.definitions).generateDocument({
      openapi: '3.1.0',
      info: {
        title: 'Service API',
        version,
        description: INFO_DESCRIPTION,
      },
      servers: [{ url: '/' }],
    }) as unknown as Record<string, unknown>;
  }
  return built;
}
