import { FieldNode, FragmentDefinitionNode, GraphQLError, Kind, SelectionSetNode, ValidationRule } from 'graphql';

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
  return responseKeyLimit(
    { __schema: MAX_INTROSPECTION.schema, __type: MAX_INTROSPECTION.type },
    (counts) =>
      `an operation asks for at most ${MAX_INTROSPECTION.schema} __schema and ${MAX_INTROSPECTION.type} __type; ` +
      `this one asks for ${counts.get('__schema') ?? 0} and ${counts.get('__type') ?? 0}`,
  );
}

/**
 * Fields that answer a whole table or subtree, unbounded by any argument, so the cost rule prices
 * each at its child fields once, whatever the table holds:
 * - the root fields `roles`, `tripTemplates`, `tripCategories` (every row) and `tripCategory(id)`
 *   (a category with its whole subtree: a top-level one can be most of the table). Thirty aliases
 *   of `tripTemplates` over 20,000 rows (1.6 KB of query) answered 90 MB after 5 s of the event loop;
 * - `TripCategory.children` at any depth: 30 aliases of `children` under one allowed
 *   `tripCategory` over 20,000 child categories (2.8 KB of query) answered 168 MB after 12 s.
 * Each may appear under one response key per selection set (the root's: once per operation).
 * Nesting `children` inside `children` stays allowed: each level answers other categories, so the
 * whole answer is at most the tree, once.
 */
export const WHOLE_TABLE_FIELDS = ['roles', 'tripTemplates', 'tripCategories', 'tripCategory', 'children'] as const;
/** Of WHOLE_TABLE_FIELDS, those limited below the root too (the others are root fields: `me { roles }` is not a table). */
const AT_ANY_DEPTH: ReadonlySet<string> = new Set(['children']);

export function wholeTableLimit(): ValidationRule {
  return responseKeyLimit(
    Object.fromEntries(WHOLE_TABLE_FIELDS.map((f) => [f, 1])),
    (counts) =>
      `a selection asks for each of ${WHOLE_TABLE_FIELDS.join(', ')} at most once (they answer a whole table or subtree); ` +
      `this one asks for ${[...counts].map(([f, n]) => `${f} ${n} times`).join(', ')}`,
    AT_ANY_DEPTH,
  );
}

/**
 * Refuses a query operation in which one selection set (fragments and inline fragments merged into
 * it, as execution merges them) asks for one of the `limits` fields under more response keys
 * (aliases) than its limit, at the root or at any depth: the fields a response key selects are
 * merged and walked the same way. Runs after graphql-js's rules: no fragment cycle can be met, and
 * the document budget has bounded the expanded size.
 */
function responseKeyLimit(
  limits: Record<string, number>,
  message: (counts: ReadonlyMap<string, number>) => string,
  /** The fields limited below the root as well (by default the limits apply to the root selection only). */
  nested: ReadonlySet<string> = new Set(),
): ValidationRule {
  return (context) => {
    const fragments = new Map<string, FragmentDefinitionNode>();
    for (const d of context.getDocument().definitions)
      if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
    /** The fields of `sets` merged by response key, fragments expanded. */
    const collect = (sets: readonly SelectionSetNode[]) => {
      const byKey = new Map<string, FieldNode[]>();
      const add = (set: SelectionSetNode, seen: Set<string>) => {
        for (const s of set.selections) {
          if (s.kind === Kind.FIELD) {
            const key = s.alias?.value ?? s.name.value;
            const fields = byKey.get(key);
            if (fields) fields.push(s);
            else byKey.set(key, [s]);
          } else if (s.kind === Kind.INLINE_FRAGMENT) add(s.selectionSet, seen);
          else if (!seen.has(s.name.value)) {
            seen.add(s.name.value);
            const f = fragments.get(s.name.value);
            if (f) add(f.selectionSet, seen);
          }
        }
      };
      for (const set of sets) add(set, new Set());
      return byKey;
    };
    /** The first over-limit count of a selection, or undefined when every level is within its limits. */
    const check = (sets: readonly SelectionSetNode[], root: boolean): Map<string, number> | undefined => {
      const byKey = collect(sets);
      const counts = new Map<string, number>();
      for (const fields of byKey.values()) {
        const name = fields[0].name.value;
        if (name in limits && (root || nested.has(name))) counts.set(name, (counts.get(name) ?? 0) + 1);
      }
      if ([...counts].some(([f, n]) => n > limits[f])) return counts;
      if (nested.size === 0) return undefined;
      for (const fields of byKey.values()) {
        const subsets = fields.flatMap((f) => (f.selectionSet ? [f.selectionSet] : []));
        if (subsets.length) {
          const over = check(subsets, false);
          if (over) return over;
        }
      }
      return undefined;
    };
    return {
      OperationDefinition(node) {
        if (node.operation !== 'query') return;
        const counts = check([node.selectionSet], true);
        if (!counts) return;
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
