import { OpenApiGeneratorV31 } from '@asteasolutions/zod-to-openapi';
import type { ZodTypeAny } from 'zod';
import { openApiRegistry, z } from '../shared/zod';

/**
 * How routes describe themselves in the OpenAPI document: defineRoute (api/routing.ts) and
 * documentRoute (for the few routes registered on the router directly) both end here, so every
 * route gets the same error responses, security requirement and `x-permission`.
 */

/** Every error body of the API (spec §1): `{error, message}`. */
export const errorSchema = z
  .object({
    error: z.string().openapi({ example: 'VALIDATION_ERROR' }),
    message: z.string().openapi({ example: 'body.name: Required' }),
  })
  .passthrough()
  .openapi('Error');

export interface ResponseDoc {
  description: string;
  schema?: ZodTypeAny;
  contentType?: string;
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
  /** The permission the route needs, documented as `x-permission`. */
  permission?: string;
  params?: ZodTypeAny;
  query?: ZodTypeAny;
  body?: ZodTypeAny;
  /** The body's media type when not JSON. */
  bodyContentType?: string;
  bodyExample?: unknown;
  /** The route validates declared input (params, query or body): it can answer 400. */
  validates: boolean;
  /** The route can deny a credential for lack of a permission: 403. */
  forbids: boolean;
  responses?: Record<number, ResponseDoc>;
  /** Specification extensions (`x-…`) of the operation. */
  extensions?: Record<`x-${string}`, unknown>;
}

const STANDARD_ERRORS: Record<number, string> = {
  400: 'Invalid input; the message names the field',
  401: 'Missing or invalid credentials (code AUTH_REQUIRED when none was sent)',
  403: 'The credential lacks the permission',
  404: 'Not found',
  429: 'Rate limited; Retry-After says when to try again',
};

/** The error statuses a route can answer by its definition alone. */
function standardStatuses(op: OperationDoc): number[] {
  const out = [429];
  if (op.validates) out.push(400);
  if (op.secured) out.push(401);
  if (op.forbids) out.push(403);
  if (/:[A-Za-z0-9_]+/.test(op.path)) out.push(404);
  return out;
}

export const toOpenApiPath = (path: string) => path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

type ResponseObject = { description: string; headers?: unknown; content?: Record<string, unknown> };

/** The operation's responses: declared ones (errors get the Error schema) plus the standard errors. */
function responsesOf(op: OperationDoc): Record<string, ResponseObject> {
  const out: Record<string, ResponseObject> = {};
  for (const [status, r] of Object.entries(op.responses ?? { 200: { description: 'OK' } })) {
    const isError = Number(status) >= 400;
    const schema = r.schema ?? (isError ? errorSchema : undefined);
    out[status] = {
      description: r.description,
      ...(schema
        ? {
            content: {
              [r.contentType ?? 'application/json']: {
                schema,
                ...(r.example !== undefined ? { example: r.example } : {}),
              },
            },
          }
        : {}),
    };
  }
  for (const status of standardStatuses(op)) {
    if (out[status]) continue;
    out[status] = { description: STANDARD_ERRORS[status], content: { 'application/json': { schema: errorSchema } } };
  }
  if (out[429]) out[429].headers = { 'Retry-After': { description: 'Seconds to wait', schema: { type: 'integer' } } };
  return out;
}

/** Adds one operation to the OpenAPI registry. */
export function registerOperation(op: OperationDoc): void {
  const isUnknown = (s?: ZodTypeAny) => !s || s instanceof z.ZodUnknown;
  openApiRegistry.registerPath({
    method: op.method,
    path: toOpenApiPath(op.path),
    operationId: operationId(op.method, op.path),
    summary: op.summary,
    description: [op.description, op.access].filter(Boolean).join('\n\n'),
    tags: op.tags,
    security: op.secured ? [{ bearerAuth: [] }] : [],
    ...(op.permission ? { 'x-permission': op.permission } : {}),
    ...op.extensions,
    request: {
      ...(op.params ? { params: op.params as z.ZodObject<z.ZodRawShape> } : {}),
      ...(op.query ? { query: op.query as z.ZodObject<z.ZodRawShape> } : {}),
      ...(!isUnknown(op.body)
        ? {
            body: {
              content: {
                [op.bodyContentType ?? 'application/json']: {
                  schema: op.body as ZodTypeAny,
                  ...(op.bodyExample !== undefined ? { example: op.bodyExample } : {}),
                },
              },
            },
          }
        : {}),
    },
    responses: responsesOf(op) as never,
  });
}

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
  extensions?: Record<`x-${string}`, unknown>;
}): void {
  const permission = typeof doc.auth === 'object' ? doc.auth.permission : undefined;
  registerOperation({
    ...doc,
    access: permission ? `Requires \`${permission}\`.` : `Access: ${doc.auth as string}.`,
    secured: doc.auth !== 'public',
    permission,
    validates: Boolean(doc.params || doc.query || doc.body),
    forbids: Boolean(permission),
  });
}

let built: Record<string, unknown> | undefined;

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
    built = new OpenApiGeneratorV31(openApiRegistry.definitions).generateDocument({
      openapi: '3.1.0',
      info: {
        title: 'Service API',
        version,
        description:
          'Accounts, access control, tracking and real-time API. Errors are {error, message}. ' +
          'The WebSocket API (/v1/ws) is described by the AsyncAPI document at /v1/asyncapi.json.',
      },
      servers: [{ url: '/' }],
    }) as unknown as Record<string, unknown>;
  }
  return built;
}
