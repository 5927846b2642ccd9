import {
  DocumentNode,
  GraphQLError,
  GraphQLSchema,
  getOperationAST,
  Kind,
  parse,
  specifiedRules,
  validate,
  ValidationRule,
} from 'graphql';
import { LRUCache } from 'lru-cache';
import { documentRefusal, textRefusal } from './documentBudget';

/** What the validation of one operation found: nothing (valid) or its errors. */
type Validation = readonly GraphQLError[];

export interface OperationCache {
  /**
   * The parsed document of `query` and its validation errors for these variables and operation
   * name, computed once and reused while the entry lives; only the error when the document is over
   * the limits of ./documentBudget (checked before parsing and before validating); undefined for
   * one that does not parse (the caller's normal path reports the syntax error). graphql-js's own
   * rules run first; the limit rules (depth, cost, mutations) only on a document they passed.
   */
  get(
    query: string,
    variables: Readonly<Record<string, unknown>> | null | undefined,
    operationName: string | null | undefined,
  ): { document: DocumentNode; errors: Validation } | { document?: undefined; errors: Validation } | undefined;
}

/**
 * Operations of a type the schema has no root for (a subscription: this API has none). graphql-js
 * 15's rules let them pass, and the cost rule crashed on them (a 500).
 */
function unknownRoots(schema: GraphQLSchema, document: DocumentNode): GraphQLError[] {
  const errors: GraphQLError[] = [];
  for (const d of document.definitions) {
    if (d.kind !== Kind.OPERATION_DEFINITION) continue;
    const root =
      d.operation === 'query'
        ? schema.getQueryType()
        : d.operation === 'mutation'
          ? schema.getMutationType()
          : schema.getSubscriptionType();
    if (!root) errors.push(new GraphQLError(`the schema has no ${d.operation} operations`, d));
  }
  return errors;
}

/** graphql-http says only 'Unable to detect operation AST' when it cannot pick the operation. */
function noSuchOperation(operationName: string | null | undefined): GraphQLError {
  const message =
    operationName === ''
      ? 'operationName: must not be empty (leave it out, or name an operation of the document)'
      : operationName
        ? `operationName: the document defines no operation ${operationName.slice(0, 100)}`
        : 'operationName: required when the document defines several operations';
  return new GraphQLError(message, undefined, undefined, undefined, undefined, undefined, {
    code: 'BAD_USER_INPUT',
    status: 400,
  });
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
  limitRules: (variables: Record<string, unknown>, operationName: string | undefined) => readonly ValidationRule[],
): OperationCache {
  const documents = new LRUCache<
    string,
    { document: DocumentNode; refusal?: GraphQLError; invalid?: readonly GraphQLError[] }
  >({
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
      let parsed = documents.get(query);
      if (!parsed) {
        const tooLarge = textRefusal(query);
        if (tooLarge) return { errors: [tooLarge] };
        let document: DocumentNode;
        try {
          document = parse(query);
        } catch {
          return undefined;
        }
        const refusal = documentRefusal(document);
        // graphql-js's rules do not depend on variables: once per document.
        const invalid = refusal
          ? undefined
          : [...validate(schema, document, specifiedRules), ...unknownRoots(schema, document)];
        parsed = { document, refusal, invalid: invalid?.length ? invalid : undefined };
        documents.set(query, parsed);
      }
      if (parsed.refusal) return { errors: [parsed.refusal] };
      const document = parsed.document;
      if (parsed.invalid) return { document, errors: parsed.invalid };
      // The operation to run must be there before the limit rules look for it: the cost rule
      // crashed (a 500) on an operationName that names no operation of an unnamed-only document.
      if (!getOperationAST(document, operationName)) return { errors: [noSuchOperation(operationName)] };
      const vars = variables ?? {};
      const key = `${operationName ?? ''}\u0000${JSON.stringify(vars)}\u0000${query}`;
      let errors = validations.get(key);
      if (!errors) {
        errors = validate(schema, document, limitRules(vars, operationName ?? undefined));
        validations.set(key, errors);
      }
      return { document, errors };
    },
  };
}
