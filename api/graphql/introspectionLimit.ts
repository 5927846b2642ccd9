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
  return (context) => {
    const fragments = new Map<string, FragmentDefinitionNode>();
    for (const d of context.getDocument().definitions)
      if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
    const collect = (set: SelectionSetNode, keys: { schema: Set<string>; type: Set<string> }, seen: Set<string>) => {
      for (const s of set.selections) {
        if (s.kind === Kind.FIELD) {
          const name = s.name.value;
          if (name === '__schema') keys.schema.add(s.alias?.value ?? name);
          else if (name === '__type') keys.type.add(s.alias?.value ?? name);
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
        const keys = { schema: new Set<string>(), type: new Set<string>() };
        collect(node.selectionSet, keys, new Set());
        if (keys.schema.size <= MAX_INTROSPECTION.schema && keys.type.size <= MAX_INTROSPECTION.type) return;
        context.reportError(
          new GraphQLError(
            `an operation asks for at most ${MAX_INTROSPECTION.schema} __schema and ${MAX_INTROSPECTION.type} __type; ` +
              `this one asks for ${keys.schema.size} and ${keys.type.size}`,
            node,
            undefined,
            undefined,
            undefined,
            undefined,
            { code: 'QUERY_TOO_COMPLEX', status: 400 },
          ),
        );
      },
    };
  };
}
