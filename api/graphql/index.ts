import 'reflect-metadata';
import type Router from '@koa/router';
import { GraphQLError, GraphQLSchema, printSchema } from 'graphql';
import { createHandler } from 'graphql-http/lib/use/koa';
import { buildSchema, MiddlewareFn, NonEmptyArray } from 'type-graphql';
import { authorizeGraphqlRootField } from '../../shared/policies';
import { toHttpError, validationError } from '../../shared/errors';
import { z, zInput } from '../../shared/zod';
import type { AppState } from '../routing';
import type { ApiServices } from '../services';
import type { GqlContext } from './context';
import { documentGraphqlRoutes } from './openapi';
import { AuditResolver } from './audit';
import { MeResolver } from './me';
import { WsTicketResolver } from './wsTicket';
import { AccountsResolver } from './accounts';
import { GpsResolver } from './gps';
import { TwoFactorResolver } from './twoFactor';

/**
 * Every resolver class of the schema. Resolvers call the same commands as REST and enforce their
 * own access through shared/policies (the endpoint itself allows anonymous callers).
 */
// eslint-disable-next-line @typescript-eslint/no-unsafe-function-type -- type-graphql's own type for resolver classes
export const resolvers: NonEmptyArray<Function> = [
  MeResolver,
  WsTicketResolver,
  AccountsResolver,
  GpsResolver,
  AuditResolver,
  TwoFactorResolver,
];

/**
 * Root fields pass shared/policies' GraphQL gate first: the system key runs only the operations that
 * name it (spec §5.5 confines it on REST by route; here by field).
 */
const rootFieldGate: MiddlewareFn<GqlContext> = ({ context, info }, next) => {
  const parent = info.parentType.name;
  if (parent === 'Query' || parent === 'Mutation' || parent === 'Subscription')
    authorizeGraphqlRootField(context.principal, info.fieldName);
  return next();
};

const anyInput = zInput(z.unknown());

/** The text rule of REST input (shared/zod zInput) over every field's arguments, inline or from variables. */
const inputGate: MiddlewareFn<GqlContext> = ({ args }, next) => {
  if (Object.keys(args).length === 0) return next(); // most fields: skip the parse
  const r = anyInput.safeParse(args);
  if (!r.success) throw validationError(r.error, 'args');
  return next();
};

export async function buildGraphqlSchema(): Promise<GraphQLSchema> {
  return buildSchema({ resolvers, validate: false, globalMiddlewares: [rootFieldGate, inputGate] });
}

/**
 * Resolver errors keep their status and name in `extensions`: HttpErrors as thrown, database
 * failures as shared/errors maps them for REST (constraint → 4xx, unreachable → 503).
 */
function formatError(e: Readonly<GraphQLError | Error>): GraphQLError | Error {
  if (!(e instanceof GraphQLError)) return e as Error;
  const err = e;
  const orig = err.originalError && toHttpError(err.originalError);
  if (orig) {
    return new GraphQLError(orig.message, err.nodes, err.source, err.positions, err.path, orig, {
      code: orig.error,
      status: orig.status,
    });
  }
  if (err.originalError && !(err.originalError instanceof GraphQLError)) {
    return new GraphQLError('an unexpected error occurred', err.nodes, err.source, err.positions, err.path, undefined, {
      code: 'InternalServerError',
      status: 500,
    });
  }
  return err;
}

const GRAPHIQL_HTML = `<!doctype html><html><head><meta charset="utf-8"><title>GraphiQL</title>
<link rel="stylesheet" href="https://unpkg.com/graphiql@3/graphiql.min.css"></head>
<body style="margin:0"><div id="g" style="height:100vh"></div>
<script crossorigin src="https://unpkg.com/react@18/umd/react.production.min.js"></script>
<script crossorigin src="https://unpkg.com/react-dom@18/umd/react-dom.production.min.js"></script>
<script crossorigin src="https://unpkg.com/graphiql@3/graphiql.min.js"></script>
<script>ReactDOM.createRoot(document.getElementById('g')).render(React.createElement(GraphiQL,{fetcher:GraphiQL.createFetcher({url:'/v1/gql'})}));</script>
</body></html>`;

/** POST/GET /v1/gql, the SDL at /v1/schema and, outside production, GraphiQL at /v1/graphiql. */
export function graphqlRoutes(
  router: Router<AppState, { services: ApiServices }>,
  schema: GraphQLSchema,
  production: boolean,
): void {
  const handler = createHandler<GqlContext>({
    schema,
    formatError,
    context: (req) => (req.raw as unknown as { gqlContext: GqlContext }).gqlContext,
  });
  const gql: Router.Middleware<AppState, { services: ApiServices }> = async (ctx) => {
    (ctx.req as unknown as { gqlContext: GqlContext }).gqlContext = {
      principal: ctx.state.principal,
      services: ctx.services,
      ip: ctx.ip,
      userAgent: ctx.get('user-agent') || null,
      header: (name: string) => ctx.get(name) || null,
    };
    await handler(ctx as never, async () => undefined);
  };
  documentGraphqlRoutes(production);
  router.post('/v1/gql', gql);
  router.get('/v1/gql', gql);
  const sdl = printSchema(schema);
  router.get('/v1/schema', (ctx) => {
    ctx.type = 'text/plain';
    ctx.body = sdl;
  });
  if (!production) {
    router.get('/v1/graphiql', (ctx) => {
      ctx.type = 'text/html';
      ctx.body = GRAPHIQL_HTML;
    });
  }
}
