import { FragmentDefinitionNode, GraphQLError, Kind, SelectionSetNode, ValidationRule } from 'graphql';

/** At most this many `__schema` and `__type` results per operation (distinct response keys). */
export const MAX_INTROSPECTION = { schema: 1, type: 20 } as const;

/**
 * Bounds introspection per operation: at most MAX_INTROSPECTION.schema `__schema` and
 * MAX_INTROSPECTION.type `__type` root fields, aliases and fragments included. The cost rule cannot
 * price them (they are meta fields, outside the root type's fields, so it counted them as free),
 * and one anonymous request of 15 KB aliasing `__schema{types{fields{type{fields{…}}}}}` 280 times
 * answered 3.4 MB after 2 s of the event loop. graphql-js's MaxIntrospectionDepthRule bounds the
 * nesting inside one; this bounds how many. GraphiQL's and codegen tools' introspection query
 * asks for one `__schema`. Runs after graphql-js's rules: no fragment cycle can be met.
 */
export function introspectionLimit(): ValidationRule {
  return rootFieldLimit(
    { __schema: MAX_INTROSPECTION.schema, __type: MAX_INTROSPECTION.type },
    (counts) =>
      `an operation asks for at most ${MAX_INTROSPECTION.schema} __schema and ${MAX_INTROSPECTION.type} __type; ` +
      `this one asks for ${counts.get('__schema') ?? 0} and ${counts.get('__type') ?? 0}`,
  );
}

/**
 * Root query fields that answer a whole table (every role, every trip template, the whole category
 * tree): no argument bounds them, so the cost rule prices each at its child fields once, whatever
 * the table holds. Thirty aliases of `tripTemplates` over 20,000 rows (1.6 KB of query) answered
 * 90 MB after 5 s of the event loop. `tripCategory(id)` answers a category with its whole subtree: a
 * top-level one can be most of the table. Each may appear once per operation.
 */
export const WHOLE_TABLE_FIELDS = ['roles', 'tripTemplates', 'tripCategories', 'tripCategory'] as const;

export function wholeTableLimit(): ValidationRule {
  return rootFieldLimit(
    Object.fromEntries(WHOLE_TABLE_FIELDS.map((f) => [f, 1])),
    (counts) =>
      `an operation asks for each of ${WHOLE_TABLE_FIELDS.join(', ')} at most once (they answer a whole table); ` +
      `this one asks for ${[...counts].map(([f, n]) => `${f} ${n} times`).join(', ')}`,
  );
}

/**
 * Refuses a query operation whose root selection (fragments and inline fragments included) asks for
 * one of the `limits` fields under more response keys (aliases) than its limit. Runs after
 * graphql-js's rules: no fragment cycle can be met.
 */
function rootFieldLimit(
  limits: Record<string, number>,
  message: (counts: ReadonlyMap<string, number>) => string,
): ValidationRule {
  return (context) => {
    const fragments = new Map<string, FragmentDefinitionNode>();
    for (const d of context.getDocument().definitions)
      if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
    const collect = (set: SelectionSetNode, keys: Map<string, Set<string>>, seen: Set<string>) => {
      for (const s of set.selections) {
        if (s.kind === Kind.FIELD) {
          const name = s.name.value;
          if (name in limits) {
            let names = keys.get(name);
            if (!names) keys.set(name, (names = new Set()));
            names.add(s.alias?.value ?? name);
          }
        } else if (s.kind === Kind.INLINE_FRAGMENT) collect(s.selectionSet, keys, seen);
        else if (!seen.has(s.name.value)) {
          seen.add(s.name.value);
          const f = fragments.get(s.name.value);
          if (f) collect(f.selectionSet, keys, seen);
        }
      }
    };
    return {
      OperationDefinition(node) {
        if (node.operation !== 'query') return;
        const keys = new Map<string, Set<string>>();
        collect(node.selectionSet, keys, new Set());
        const counts = new Map([...keys].map(([f, names]) => [f, names.size]));
        if ([...counts].every(([f, n]) => n <= limits[f])) return;
        context.reportError(
          new GraphQLError(message(counts), node, undefined, undefined, undefined, undefined, {
            code: 'QUERY_TOO_COMPLEX',
            status: 400,
          }),
        );
      },
    };
  };
}
