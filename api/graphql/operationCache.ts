import { DocumentNode, GraphQLError, GraphQLSchema, parse, validate, ValidationRule } from 'graphql';
import { LRUCache } from 'lru-cache';

/** Longest query text (characters) whose parse and validation are kept; longer ones are done each time. */
const MAX_CACHED_QUERY = 16 * 1024;

/** What the validation of one operation found: nothing (valid) or its errors. */
type Validation = readonly GraphQLError[];

export interface OperationCache {
  /**
   * The parsed document of `query` and its validation errors for these variables and operation
   * name, computed once and reused while the entry lives; undefined for a query not to be cached
   * (too long) or one that does not parse (the caller's normal path reports the syntax error).
   */
  get(
    query: string,
    variables: Readonly<Record<string, unknown>> | null | undefined,
    operationName: string | null | undefined,
  ): { document: DocumentNode; errors: Validation } | undefined;
}

/**
 * Parse and validation results of GraphQL operations, per process. Clients repeat the same few
 * operations (an app's queries are fixed texts with variables), and parsing and validating one was
 * most of a small query's cost (graphql-js runs every specified rule plus depth and cost over the
 * whole document each time). Documents are kept by query text; validation results by query text,
 * operation name and variables, since the cost rule reads `limit`/`first` from the variables. The
 * schema and rules are fixed for the process, so a result never goes stale; both caches are LRU
 * and bounded in entries and in size.
 */
export function operationCache(
  schema: GraphQLSchema,
  rules: (variables: Record<string, unknown>, operationName: string | undefined) => readonly ValidationRule[],
): OperationCache {
  const documents = new LRUCache<string, DocumentNode>({
    max: 1000,
    maxSize: 8 * 1024 * 1024,
    sizeCalculation: (_d, key) => key.length * 4 + 64,
  });
  const validations = new LRUCache<string, Validation>({
    max: 5000,
    maxSize: 16 * 1024 * 1024,
    sizeCalculation: (_v, key) => key.length + 64,
  });
  return {
    get(query, variables, operationName) {
      if (query.length > MAX_CACHED_QUERY) return undefined;
      let document = documents.get(query);
      if (!document) {
        try {
          document = parse(query);
        } catch {
          return undefined;
        }
        documents.set(query, document);
      }
      const vars = variables ?? {};
      const key = `${operationName ?? ''}\u0000${JSON.stringify(vars)}\u0000${query}`;
      let errors = validations.get(key);
      if (!errors) {
        errors = validate(schema, document, rules(vars, operationName ?? undefined));
        validations.set(key, errors);
      }
      return { document, errors };
    },
  };
}
