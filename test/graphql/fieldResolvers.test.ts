import 'reflect-metadata';
import test from 'ava';
import { GraphQLObjectType, GraphQLSchema } from 'graphql';
import { getMetadataStorage } from 'type-graphql/dist/metadata/getMetadataStorage';
import { buildGraphqlSchema } from '../../api/graphql/index';

const ROOTS = new Set(['Query', 'Mutation', 'Subscription']);

/** Every field of the schema's object types, root types aside, as `Type.field`, with its resolver if any. */
function objectFields(schema: GraphQLSchema): Array<{ name: string; resolved: boolean }> {
  const out: Array<{ name: string; resolved: boolean }> = [];
  for (const type of Object.values(schema.getTypeMap())) {
    if (!(type instanceof GraphQLObjectType) || type.name.startsWith('__') || ROOTS.has(type.name)) continue;
    for (const field of Object.values(type.getFields()))
      out.push({ name: `${type.name}.${field.name}`, resolved: typeof field.resolve === 'function' });
  }
  return out;
}

// The global middlewares (root-field gate, argument gate) act on root fields and on fields with
// arguments only, yet type-graphql wraps every other field in them too unless its object type says
// `simpleResolvers: true`: each scalar of each object of a list then goes through an async
// middleware chain. A page of 100 trips cost 5 times the CPU with it (README "Hot paths").
test('object types resolve their plain fields by property, without the middleware chain', async (t) => {
  const schema = await buildGraphqlSchema();
  const storage = getMetadataStorage();
  const typeName = new Map(storage.objectTypes.map((o) => [o.target, o.name]));
  const fieldResolvers = new Set(
    storage.fieldResolvers.map((f) => `${typeName.get(f.getObjectType!() as never)}.${f.schemaName}`),
  );
  const fields = objectFields(schema);
  t.true(fields.length > 100, `only ${fields.length} object fields found`);
  const wrapped = fields.filter((f) => f.resolved).map((f) => f.name);
  // What still resolves through type-graphql are exactly the @FieldResolver methods.
  t.deepEqual(
    wrapped.filter((name) => !fieldResolvers.has(name)),
    [],
    'add `simpleResolvers: true` to these fields’ @ObjectType',
  );
  t.true(wrapped.length >= 3, 'the field resolvers (a trip’s points and history, a location’s contacts) are kept');
  // A simple field runs no middleware and no auth check of its own: none may declare one, or it
  // would be skipped without a word (guard a field with a @FieldResolver instead).
  const guarded = storage.fields
    .filter((f) => typeName.has(f.target as never) && ((f.middlewares?.length ?? 0) > 0 || (f.roles?.length ?? 0) > 0))
    .map((f) => `${typeName.get(f.target as never)}.${f.schemaName}`);
  t.deepEqual(guarded, [], 'object type fields with @UseMiddleware or @Authorized');
});
