import 'reflect-metadata';
import type Router from '@koa/router';
import depthLimit from 'graphql-depth-limit';
import { createHash } from 'node:crypto';
import http from 'node:http';
import {
  ASTNode,
  execute,
  FieldNode,
  getLocation,
  GraphQLError,
  GraphQLResolveInfo,
  SourceLocation,
  GraphQLSchema,
  printSchema,
  responsePathAsArray,
  specifiedRules,
  ValidationRule,
} from 'graphql';
import { reusable } from '../compression';
import { checkParsedBody } from '../middleware/body';
import { sendValidatedBytes } from '../responses';
import { createHandler } from 'graphql-http/lib/use/koa';
import { createComplexityRule, fieldExtensionsEstimator, simpleEstimator } from 'graphql-query-complexity';
import { buildSchema, MiddlewareFn, NonEmptyArray } from 'type-graphql';
import { authorizeGraphqlRootField } from '../../shared/policies';
import { badRequest, graphqlCode, toHttpError, validationError } from '../../shared/errors';
import { camel } from '../../shared/presenters/camel';
import { z, zInput } from '../../shared/zod';
import type { AppContext, AppState } from '../routing';
import { clientIp, headerText } from '../params';
import type { ApiServices } from '../services';
import type { GqlContext } from './context';
import { graphiqlRoutes } from './graphiql';
import { compiledExecute } from './compiledExecute';
import { createLoaders } from './loaders';
import { documentGraphqlRoutes } from './openapi';
import { introspectionLimit, wholeTableLimit } from './introspectionLimit';
import { mutationLimit } from './mutationLimit';
import { operationCache } from './operationCache';
import { AuditResolver } from './audit';
import { MeResolver } from './me';
import { WsTicketResolver } from './wsTicket';
import { AccountsResolver } from './accounts';
import { GpsResolver } from './gps';
import { TwoFactorResolver } from './twoFactor';
import { UserResolver } from './users';
import { TripResolver } from './trips';
import { DeviceGeofenceResolver, LocationResolver, TripCatalogResolver } from './catalog';

/**
 * Every resolver class of the schema, one per line (add yours at the end). Resolvers call the same
 * commands as REST and enforce their own access through shared/policies (the endpoint itself
 * allows anonymous callers).
 */
// eslint-disable-next-line @typescript-eslint/no-unsafe-function-type -- type-graphql's own type for resolver classes
export const resolvers: NonEmptyArray<Function> = [
  MeResolver,
  WsTicketResolver,
  AccountsResolver,
  GpsResolver,
  AuditResolver,
  TwoFactorResolver,
  UserResolver,
  TripResolver,
  DeviceGeofenceResolver,
  LocationResolver,
  TripCatalogResolver,
];

/** Deepest selection accepted (introspection fields are not counted). */
export const MAX_QUERY_DEPTH = 10;
/**
 * Highest cost accepted: each field costs 1, a list field its items' cost times its `limit` or
 * `first` (a page of 100 trips with 10 points each costs about 4,300), plus a point per 10 rows its
 * `page` skips, at most 10,000 a field (listCost in ./pagination).
 */
export const MAX_QUERY_COST = 20_000;
/** Most root fields of one mutation operation (aliases included): REST makes one request for each. */
export const MAX_ROOT_MUTATIONS = 5;

/**
 * Root fields pass shared/policies' GraphQL gate first: the system key runs only the operations that
 * name it (spec §5.5 confines it on REST by route; here by field).
 */
const rootFieldGate: MiddlewareFn<GqlContext> = ({ context, info }, next) => {
  const parent = info.parentType.name;
  if (parent !== 'Query' && parent !== 'Mutation' && parent !== 'Subscription') return next();
  return (async () => {
    try {
      authorizeGraphqlRootField(context.principal, info.fieldName);
      return await next();
    } catch (err) {
      throw locatedWithoutStack(err, info);
    }
  })();
};

/**
 * A resolver's error located at its field (nodes and response path), as graphql-js's locatedError
 * would make it, but without constructing a GraphQLError: graphql 15's constructor costs about
 * 30 µs (its Object.defineProperties), most of a refused operation. graphql-js keeps an error whose
 * `path` is an array as it is, and formatError answers it like a GraphQLError.
 */
class FieldError extends Error {
  constructor(
    readonly originalError: Error,
    readonly nodes: readonly FieldNode[],
    readonly path: ReadonlyArray<string | number>,
  ) {
    super(originalError.message);
  }
}

function locatedWithoutStack(err: unknown, info: GraphQLResolveInfo): unknown {
  if (!(err instanceof Error) || err instanceof GraphQLError || err instanceof FieldError) return err;
  return withoutStack(() => new FieldError(err, info.fieldNodes, responsePathAsArray(info.path)));
}

/** `make()` with no stack frames captured by the errors it creates (they are answers, never logged). */
function withoutStack<T>(make: () => T): T {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return make();
  } finally {
    Error.stackTraceLimit = limit;
  }
}

const anyInput = zInput(z.unknown());

/** The text rule of REST input (shared/zod zInput) over every field's arguments, inline or from variables. */
const inputGate: MiddlewareFn<GqlContext> = ({ args }, next) => {
  if (Object.keys(args).length === 0) return next(); // most fields: skip the parse
  const r = anyInput.safeParse(args);
  if (!r.success) throw validationError(r.error, 'args');
  return next();
};

/**
 * The global middlewares act on root fields and on fields with arguments only; every @ObjectType
 * says `simpleResolvers: true` so that its plain fields skip them (test/graphql/fieldResolvers.test.ts).
 */
export async function buildGraphqlSchema(): Promise<GraphQLSchema> {
  return buildSchema({ resolvers, validate: false, globalMiddlewares: [rootFieldGate, inputGate] });
}

/** Codes of the errors graphql-js raises itself (no resolver involved). */
function requestErrorCode(message: string): string {
  if (message.startsWith('Syntax Error')) return 'GRAPHQL_PARSE_FAILED';
  if (/exceeds maximum operation depth/.test(message)) return 'QUERY_TOO_DEEP';
  if (/^Variable "\$/.test(message) || /^Argument "/.test(message)) return 'BAD_USER_INPUT';
  return 'GRAPHQL_VALIDATION_FAILED';
}

/** An error as the response carries it: what a GraphQLError serialises to (its toJSON). */
interface AnsweredError {
  message: string;
  locations?: readonly SourceLocation[];
  path?: ReadonlyArray<string | number>;
  extensions: Record<string, unknown>;
}

function locationsOf(nodes: readonly ASTNode[]): SourceLocation[] | undefined {
  const out = nodes.flatMap((n) => (n.loc ? [getLocation(n.loc.source, n.loc.start)] : []));
  return out.length ? out : undefined;
}

/**
 * Every error carries `extensions.code` (UNAUTHENTICATED, FORBIDDEN, BAD_USER_INPUT, NOT_FOUND,
 * RATE_LIMITED, …) and `status`: HttpErrors as thrown, database failures as shared/errors maps them
 * for REST (constraint → 4xx, unreachable → 503), anything else a masked INTERNAL_SERVER_ERROR.
 * GraphQL's error format has no stack, in any environment. The answer is the serialised form
 * itself (a plain object), not a new GraphQLError: graphql-http only stringifies it.
 */
function formatError(e: Readonly<GraphQLError | Error>): GraphQLError | Error {
  return answeredError(e) as unknown as GraphQLError;
}

/** graphql-http's messages for a malformed request, as the rest of the API words them. */
const REQUEST_REFUSALS: Record<string, string> = {
  'JSON body must be an object': 'body: must be a JSON object {query, variables?, operationName?, extensions?}',
  'Missing query': 'query: is required',
  'Invalid query': 'query: must be a string',
  'Invalid variables': 'variables: must be an object (or null)',
  'Invalid operationName': 'operationName: must be a string (or null)',
  'Invalid extensions': 'extensions: must be an object (or null)',
};

function answeredError(e: Readonly<GraphQLError | Error>): AnsweredError {
  if (e instanceof FieldError) return answerFor(e.originalError, locationsOf(e.nodes), e.path);
  // A compiled operation (./compiledExecute) wraps what a resolver threw, a FieldError included.
  if (e instanceof GraphQLError && e.originalError instanceof FieldError) return answeredError(e.originalError);
  if (!(e instanceof GraphQLError)) {
    // graphql-http's own refusals of a malformed request (answered 400), named by their field as
    // every other bad input is.
    return {
      message: REQUEST_REFUSALS[e.message] ?? e.message,
      extensions: { code: 'BAD_USER_INPUT', status: 400 },
    };
  }
  if (e.originalError) return answerFor(e.originalError, e.locations, e.path);
  return {
    // The depth limit names the operation; an unnamed one is named as such, not as ''.
    message: e.message.replace(/^'' exceeds maximum operation depth/, 'the operation exceeds maximum operation depth'),
    locations: e.locations,
    path: e.path,
    // A request-level error (parse, validation, limits) is what REST answers 400 for.
    extensions: e.extensions?.code
      ? { status: 400, ...e.extensions }
      : { ...e.extensions, code: requestErrorCode(e.message), status: 400 },
  };
}

/** `user_id: unknown user; event_type: …` → `userId: unknown user; eventType: …` (field names only). */
const camelFields = (message: string) =>
  message.replace(
    /(^|; )([a-z][a-z0-9]*(?:_[a-z0-9]+)+)(?=[.:[])/g,
    (_m, lead: string, name: string) => lead + camel(name),
  );

/** A field's failure: an HttpError (or a database error REST would map) as it is, anything else masked. */
function answerFor(
  original: Error,
  locations: readonly SourceLocation[] | undefined,
  path: ReadonlyArray<string | number> | undefined,
): AnsweredError {
  if (original instanceof GraphQLError) return { ...answeredError(original), locations, path };
  const http = toHttpError(original);
  if (http) {
    // The commands behind REST and GraphQL name fields as REST does (user_id); here they are
    // arguments (userId).
    const extra = http.extra as { details?: Array<{ field?: unknown }> } | undefined;
    const details = Array.isArray(extra?.details)
      ? extra.details.map((d) => (typeof d.field === 'string' ? { ...d, field: camel(d.field) } : d))
      : undefined;
    return {
      message: http.status === 400 ? camelFields(http.message) : http.message,
      locations,
      path,
      extensions: {
        code: graphqlCode(http.status),
        status: http.status,
        ...(http.extra ?? {}),
        ...(details ? { details } : {}),
      },
    };
  }
  return {
    message: 'an unexpected error occurred',
    locations,
    path,
    extensions: { code: 'INTERNAL_SERVER_ERROR', status: 500 },
  };
}

/** Whether graphql-http's answer (JSON text, or none) carries GraphQL errors. */
function hasGraphqlErrors(body: unknown): boolean {
  if (typeof body === 'string') return body.includes('"errors"');
  return typeof body === 'object' && body !== null && 'errors' in body;
}

/** A GET parameter that must be a JSON object (or null): `variables`, `extensions`. */
/** A query parameter's JSON object (or null), or undefined when it is not one. */
function jsonObjectText(v: string | string[]): Record<string, unknown> | null | undefined {
  if (typeof v !== 'string') return undefined;
  try {
    const x: unknown = JSON.parse(v);
    return x === null || (typeof x === 'object' && !Array.isArray(x))
      ? (x as Record<string, unknown> | null)
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The Content-Type of an executed operation's answer: the first type of the request's Accept that
 * graphql-http accepts, as its handler negotiated it before running the operation (a request with
 * no acceptable type was refused with 406 then).
 */
export function answerMediaType(headers: unknown): string {
  const accept = (headers as { accept?: string }).accept || '*/*';
  for (const entry of accept.replace(/\s/g, '').toLowerCase().split(',')) {
    const [type, ...params] = entry.split(';');
    const charset = params.find((p) => p.includes('charset=')) || 'charset=utf-8';
    if (type === 'application/graphql-response+json' && charset === 'charset=utf-8')
      return 'application/graphql-response+json; charset=utf-8';
    if (
      (type === 'application/json' || type === 'application/*' || type === '*/*') &&
      (charset === 'charset=utf-8' || charset === 'charset=utf8')
    )
      return 'application/json; charset=utf-8';
  }
  return 'application/json; charset=utf-8';
}

/** POST/GET /v1/gql, the SDL at /v1/schema and, outside production, GraphiQL at /v1/graphiql. */
export function graphqlRoutes(
  router: Router<AppState, { services: ApiServices }>,
  schema: GraphQLSchema,
  production: boolean,
): void {
  // Depth, cost and the number of mutations are checked after graphql-js's own rules have passed
  // (operationCache): they assume a valid document (a fragment cycle sent the depth rule round it
  // at every alias, minutes of the event loop; an unknown fragment or a subscription crashed them,
  // a 500), and nothing runs before all of them pass. Batching (an array of operations) is refused
  // by graphql-http itself.
  const limitRules = (variables: Record<string, unknown>, operationName: string | undefined): ValidationRule[] => [
    mutationLimit(MAX_ROOT_MUTATIONS),
    introspectionLimit(),
    wholeTableLimit(),
    depthLimit(MAX_QUERY_DEPTH),
    createComplexityRule({
      maximumComplexity: MAX_QUERY_COST,
      variables,
      operationName,
      estimators: [fieldExtensionsEstimator(), simpleEstimator({ defaultComplexity: 1 })],
      createError: (max, actual) =>
        new GraphQLError(
          `query cost ${actual} exceeds the maximum of ${max}`,
          undefined,
          undefined,
          undefined,
          undefined,
          undefined,
          {
            code: 'QUERY_TOO_COMPLEX',
            cost: actual,
            maximumCost: max,
          },
        ),
    }),
  ];
  const operations = operationCache(schema, limitRules);
  const contextOf = (req: { raw: unknown }) => (req.raw as { gqlContext: GqlContext }).gqlContext;
  const handler = createHandler<GqlContext>({
    schema,
    formatError,
    context: contextOf,
    // graphql-http calls it with one ExecutionArgs object, never graphql-js's positional form.
    execute: compiledExecute as unknown as typeof execute,
    // A repeated operation skips parsing and validation (operationCache), and a document over the
    // limits of ./documentBudget is refused before either; one that does not parse takes
    // graphql-http's own path, which reports the syntax error.
    onSubscribe: (req, params) => {
      if (typeof params.query !== 'string') return undefined;
      const op = operations.get(params.query, params.variables, params.operationName);
      if (!op) return undefined;
      if (op.errors.length || !op.document) return op.errors;
      return {
        schema,
        document: op.document,
        operationName: params.operationName,
        variableValues: params.variables,
        contextValue: contextOf(req),
      };
    },
    // Only for a document onSubscribe did not take (one that does not parse, which never gets
    // here): the same rules, in case that ever changes.
    validationRules: (_req, args) => [
      ...specifiedRules,
      ...limitRules(args.variableValues ?? {}, args.operationName ?? undefined),
    ],
    // The executed operation's answer, serialised here: graphql-http's own JSON.stringify passes a
    // replacer function (for Error instances, which formatError already turned into plain objects
    // and which `data` never holds), and a replacer takes V8 off its fast serialiser, a call per
    // value: it doubled the cost of stringifying a page of trips with their points.
    onOperation: (req, _args, result) => {
      if (!('data' in result) && !('errors' in result)) return undefined; // a stream: graphql-http refuses it
      // Errors first, as graphql-js orders them (a compiled operation's result has data first).
      const { errors, ...rest } = result;
      const answer = errors ? { errors: errors.map(answeredError), ...rest } : result;
      return [
        JSON.stringify(answer),
        { status: 200, statusText: 'OK', headers: { 'content-type': answerMediaType(req.headers) } },
      ];
    },
  });
  const gql: Router.Middleware<AppState, { services: ApiServices }> = async (ctx) => {
    (ctx.req as unknown as { gqlContext: GqlContext }).gqlContext = {
      principal: ctx.state.principal,
      services: ctx.services,
      // A relaying system key's forwarded client address, as REST records it (requestAttribution).
      ip: clientIp(ctx as unknown as AppContext) ?? ctx.ip,
      userAgent: headerText(ctx as never, 'user-agent'),
      header: (name: string) => ctx.get(name) || null,
      loaders: createLoaders(ctx.services.db),
    };
    // graphql-http says 'Unparsable URL' for GET variables that are not JSON: named here instead.
    // One operation per request: graphql-http would answer a batch as a body without a query.
    if (ctx.method === 'POST' && Array.isArray((ctx.request as { body?: unknown }).body))
      throw badRequest('body: batches (a JSON array of operations) are not supported; send one operation per request');
    if (ctx.method !== 'POST') {
      // A parameter in an array form (`query[]=…`, as qs writes arrays) is named as such, not missing.
      for (const key of Object.keys(ctx.query)) {
        const base = /^(query|operationName|variables|extensions)\[/.exec(key)?.[1];
        if (base) throw badRequest(`${base}: takes one value, without brackets (${base}=…)`);
      }
      // A repeated parameter (two queries, two sets of variables) is refused as REST refuses it:
      // graphql-http would run the first and quietly drop the other.
      for (const name of ['query', 'operationName', 'variables', 'extensions'])
        if (Array.isArray(ctx.query[name])) throw badRequest(`${name}: given more than once`);
      for (const name of ['variables', 'extensions']) {
        const v = ctx.query[name];
        if (v === undefined) continue;
        const parsed = jsonObjectText(v);
        if (parsed === undefined) throw badRequest(`${name}: must be a JSON object`);
        // The body rule of a POST (nesting, numbers beyond a double), named the same way.
        checkParsedBody({ [name]: parsed });
      }
    }
    // HEAD answers as GET does (Koa sends no body), as on every other GET route.
    const head = ctx.method === 'HEAD';
    if (head) ctx.method = 'GET';
    try {
      await handler(ctx as never, async () => undefined);
    } finally {
      if (head) ctx.method = 'HEAD';
    }
    // graphql-http answers some refusals itself with no body (415, 406) or no error code (a mutation
    // over GET): given a message and a code like every other error.
    if (ctx.status === 405 || (ctx.status >= 400 && !hasGraphqlErrors(ctx.body))) {
      const message =
        ctx.status === 405
          ? 'mutations are sent with POST, not GET'
          : ctx.status === 415
            ? `Content-Type ${ctx.get('content-type') ? `'${ctx.get('content-type').slice(0, 100)}'` : '(none)'} is not accepted: send application/json (UTF-8)`
            : ctx.status === 406
              ? `Accept '${ctx.get('accept').slice(0, 100)}': answers are application/graphql-response+json or application/json`
              : (http.STATUS_CODES[ctx.status] ?? 'request refused');
      ctx.body = { errors: [{ message, extensions: { code: graphqlCode(ctx.status), status: ctx.status } }] };
    }
  };
  documentGraphqlRoutes(production);
  router.post('/v1/gql', gql);
  router.get('/v1/gql', gql);
  // Kept as UTF-8 bytes, like the OpenAPI document: a large text is not measured and encoded per
  // answer; compressed once per encoding (reusable), with an ETag for 304s.
  const sdl = reusable(Buffer.from(printSchema(schema)));
  const sdlEtag = `"${createHash('sha1').update(sdl).digest('base64url')}"`;
  router.get('/v1/schema', (ctx) => {
    sendValidatedBytes(ctx, { etag: sdlEtag, type: 'text/plain; charset=utf-8', body: sdl });
  });
  if (!production) graphiqlRoutes(router);
}
