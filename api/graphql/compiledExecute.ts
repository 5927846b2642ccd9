import { DocumentNode, execute, ExecutionArgs, ExecutionResult, GraphQLSchema } from 'graphql';
import { compileQuery, CompiledQuery, isCompiledQuery } from 'graphql-jit';

/**
 * Executes an operation as compiled JavaScript (graphql-jit) once its document has been executed
 * before, else with graphql-js.
 *
 * graphql-js walks the document for every object of a result: for each field it looks the field up,
 * builds its resolve info and an arguments object (also for a field without arguments), and checks
 * every value for a promise. A page of 100 trips with 20 points each is about 25,000 fields, and that
 * walk was a fifth of the request's CPU. graphql-jit compiles an operation once into a function that
 * does only what the document asks for, with the same resolvers, middlewares, errors and answer.
 *
 * Documents come from the operation cache (./operationCache), which keeps one parsed document per
 * text, so a compiled operation is kept per document (and operation name) and lives as long as the
 * document does. Compiling costs a few milliseconds, so a document is compiled on its second
 * execution: operations a client sends once (or a stream of distinct ones) never pay it. What the
 * compiler refuses runs on graphql-js, as does everything while compiling fails.
 */
const RUNS_BEFORE_COMPILING = 1;

/** Per document, per operation name ('' for none): runs so far, or the compiled operation (false: not compilable). */
const compiled = new WeakMap<DocumentNode, Map<string, number | CompiledQuery | false>>();

function compiledFor(schema: GraphQLSchema, document: DocumentNode, operationName: string | undefined) {
  let byName = compiled.get(document);
  if (!byName) compiled.set(document, (byName = new Map()));
  const name = operationName ?? '';
  const seen = byName.get(name) ?? 0;
  if (typeof seen !== 'number') return seen;
  if (seen < RUNS_BEFORE_COMPILING) {
    byName.set(name, seen + 1);
    return undefined;
  }
  let op: CompiledQuery | false = false;
  try {
    const result = compileQuery(schema, document, operationName, { disablingCapturingStackErrors: true });
    if (isCompiledQuery(result)) op = result;
  } catch {
    // Not compilable: graphql-js runs it, as it always could.
  }
  byName.set(name, op);
  return op;
}

let runs = 0;
/** How many operations this process has run compiled (for tests). */
export const compiledRuns = (): number => runs;

/** graphql-http's `execute`: see above. */
export function compiledExecute(args: ExecutionArgs): ExecutionResult | Promise<ExecutionResult> {
  const op = compiledFor(args.schema, args.document, args.operationName ?? undefined);
  if (!op) return execute(args);
  runs++;
  return op.query(args.rootValue, args.contextValue, args.variableValues);
}
