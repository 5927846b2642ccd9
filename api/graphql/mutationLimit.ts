import { FragmentDefinitionNode, GraphQLError, Kind, SelectionSetNode, ValidationRule } from 'graphql';

/**
 * At most `max` root fields in a mutation operation, aliases and fragments included. Each root field
 * of a mutation is a state change that REST makes one request for; the rate limiter counts requests,
 * so without this one request of 15 KB ran 550 two-factor setups (each a new secret, a QR code and
 * a row write) in series. Runs after graphql-js's rules have passed: no fragment cycle can be met.
 */
export function mutationLimit(max: number): ValidationRule {
  return (context) => {
    const fragments = new Map<string, FragmentDefinitionNode>();
    for (const d of context.getDocument().definitions)
      if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
    const rootFields = (set: SelectionSetNode): number => {
      let n = 0;
      for (const s of set.selections) {
        if (s.kind === Kind.FIELD) n += s.name.value === '__typename' ? 0 : 1;
        else if (s.kind === Kind.INLINE_FRAGMENT) n += rootFields(s.selectionSet);
        else {
          const f = fragments.get(s.name.value);
          if (f) n += rootFields(f.selectionSet);
        }
      }
      return n;
    };
    return {
      OperationDefinition(node) {
        if (node.operation !== 'mutation') return;
        const n = rootFields(node.selectionSet);
        if (n > max)
          context.reportError(
            new GraphQLError(
              `a mutation operation runs at most ${max} root fields; this one runs ${n}`,
              node,
              undefined,
              undefined,
              undefined,
              undefined,
              { code: 'QUERY_TOO_COMPLEX', status: 400, mutations: n, maximumMutations: max },
            ),
          );
      },
    };
  };
}
