import test from 'ava';
import { buildSchema, GraphQLError, specifiedRules, ValidationRule } from 'graphql';
import { operationCache } from '../../api/graphql/operationCache';

const schema = buildSchema('type Query { items(limit: Int!): [Int!]! hello: String }');

/** Rules that count their runs and refuse a `limit` variable over 10 (like the cost rule, variables matter). */
function countingRules() {
  let runs = 0;
  const rules = (variables: Record<string, unknown>): readonly ValidationRule[] => {
    runs++;
    const limitRule: ValidationRule = (ctx) => ({
      Document() {
        if (typeof variables.limit === 'number' && variables.limit > 10)
          ctx.reportError(new GraphQLError(`limit ${variables.limit} too high`));
      },
    });
    return [...specifiedRules, limitRule];
  };
  return { rules, runs: () => runs };
}

test('a repeated operation is parsed and validated once; other variables are validated again', (t) => {
  const { rules, runs } = countingRules();
  const cache = operationCache(schema, rules);
  const q = 'query($limit: Int!) { items(limit: $limit) }';
  const a = cache.get(q, { limit: 5 }, undefined)!;
  const b = cache.get(q, { limit: 5 }, undefined)!;
  t.deepEqual(a.errors, []);
  t.is(a.document, b.document, 'one parse for one text');
  t.is(runs(), 1, 'one validation for one text, name and variables');
  const big = cache.get(q, { limit: 50 }, undefined)!;
  t.is(big.document, a.document);
  t.deepEqual(
    big.errors.map((e) => e.message),
    ['limit 50 too high'],
  );
  t.is(runs(), 2);
  // The refusal is kept too, and a valid variant still passes.
  t.is(cache.get(q, { limit: 50 }, undefined)!.errors.length, 1);
  t.deepEqual(cache.get(q, { limit: 5 }, undefined)!.errors, []);
  t.is(runs(), 2);
  // The operation name is part of the key.
  const two = 'query A($limit: Int!) { items(limit: $limit) } query B($limit: Int!) { items(limit: $limit) }';
  cache.get(two, { limit: 5 }, 'A');
  t.is(runs(), 3);
  cache.get(two, { limit: 5 }, 'B');
  t.is(runs(), 4);
  cache.get(two, { limit: 5 }, 'A');
  t.is(runs(), 4);
  // A name that names no operation is refused before the limit rules run (the cost rule crashed on it).
  t.regex(cache.get(q, { limit: 5 }, 'Other')!.errors[0].message, /defines no operation Other/);
  t.is(runs(), 4);
});

test('validation errors of the schema come back on every call; unparseable texts are not cached; huge ones refused', (t) => {
  const { rules } = countingRules();
  const cache = operationCache(schema, rules);
  const unknownField = cache.get('{ nope }', undefined, undefined)!;
  t.regex(unknownField.errors[0].message, /Cannot query field "nope"/);
  t.regex(cache.get('{ nope }', null, null)!.errors[0].message, /Cannot query field "nope"/);
  t.is(cache.get('{ hello', undefined, undefined), undefined);
  // Over the length limit: refused before parsing, and neither parsed nor validated.
  const huge = cache.get(`{ hello ${' '.repeat(20_000)}}`, undefined, undefined)!;
  t.is(huge.document, undefined);
  t.is(huge.errors[0].extensions.code, 'QUERY_TOO_LARGE');
});
