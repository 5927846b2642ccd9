import { z } from '../../shared/zod';
import { DEVELOPMENT_ONLY, documentRoute } from '../openapiSpec';

/** An error as api/graphql/index.ts answers it (GraphQL's format; `extensions` on every one, docs/graphql.md). */
const gqlError = z
  .object({
    message: z.string(),
    locations: z
      .array(z.object({ line: z.number().int(), column: z.number().int() }))
      .optional()
      .openapi({ description: 'Where in the query text the error is (validation and field errors)' }),
    path: z
      .array(z.union([z.string(), z.number().int()]))
      .optional()
      .openapi({ description: 'The response field that failed (field errors)' }),
    extensions: z
      .object({
        code: z.string().openapi({ description: 'UNAUTHENTICATED, FORBIDDEN, BAD_USER_INPUT, NOT_FOUND, …' }),
        status: z.number().int().openapi({ description: 'The HTTP status REST would answer' }),
      })
      .passthrough()
      .openapi({ description: 'Some codes add fields: `details` on bad input, `cost` and `maximumCost`, …' }),
  })
  .passthrough();
const gqlResult = z
  .object({
    data: z.record(z.unknown()).nullable().optional(),
    errors: z.array(gqlError).optional(),
  })
  .openapi('GraphQLResult');
const gqlRequest = z.object({
  query: z.string(),
  variables: z.record(z.unknown()).optional(),
  operationName: z.string().optional(),
});

/** The GraphQL endpoints in the OpenAPI document (they are mounted on the router directly). */
export function documentGraphqlRoutes(production: boolean): void {
  const description =
    'GraphQL over HTTP; anyone may call it; each root field checks its own access (see GET /v1/schema).';
  documentRoute({
    method: 'post',
    path: '/v1/gql',
    summary: 'GraphQL query or mutation',
    description,
    tags: ['graphql'],
    auth: 'public',
    body: gqlRequest,
    responses: {
      200: { description: 'GraphQL result', schema: gqlResult },
      400: { description: 'Not a GraphQL request (GraphQL over HTTP errors, not {error, message})', schema: gqlResult },
    },
    extensions: { 'x-protocol': 'graphql' },
  });
  documentRoute({
    method: 'get',
    path: '/v1/gql',
    summary: 'GraphQL query over GET',
    description,
    tags: ['graphql'],
    auth: 'public',
    query: gqlRequest.extend({ variables: z.string().optional() }),
    responses: {
      200: { description: 'GraphQL result', schema: gqlResult },
      400: { description: 'Not a GraphQL request (GraphQL over HTTP errors, not {error, message})', schema: gqlResult },
    },
    extensions: { 'x-protocol': 'graphql' },
  });
  documentRoute({
    method: 'get',
    path: '/v1/schema',
    summary: 'The GraphQL schema (SDL)',
    tags: ['graphql'],
    auth: 'public',
    responses: { 200: { description: 'SDL text', schema: z.string(), contentType: 'text/plain' } },
    conditional: true,
  });
  if (!production)
    documentRoute({
      method: 'get',
      path: '/v1/graphiql',
      summary: 'GraphiQL (not in production)',
      tags: ['graphql'],
      auth: 'public',
      responses: { 200: { description: 'HTML page', schema: z.string(), contentType: 'text/html' } },
      extensions: DEVELOPMENT_ONLY,
    });
  if (!production) {
    documentRoute({
      method: 'get',
      path: '/v1/graphiql/init.js',
      summary: "GraphiQL's start-up script (not in production)",
      tags: ['graphql'],
      auth: 'public',
      responses: { 200: { description: 'Script', schema: z.string(), contentType: 'application/javascript' } },
      extensions: DEVELOPMENT_ONLY,
    });
    documentRoute({
      method: 'get',
      path: '/v1/graphiql/:file',
      summary: "GraphiQL's files, from the installed graphiql, react and react-dom packages (not in production)",
      tags: ['graphql'],
      auth: 'public',
      params: z.object({ file: z.string() }),
      responses: {
        200: {
          description: 'Script or stylesheet, by the file name',
          schema: z.string(),
          contentType: ['application/javascript', 'text/css'],
        },
        404: { description: 'No such file' },
      },
      conditional: true,
      extensions: DEVELOPMENT_ONLY,
    });
  }
}
