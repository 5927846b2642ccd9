/** `speed_kmh` → `speedKmh`, at the type level. */
export type CamelCase<S extends string> = S extends `${infer H}_${infer T}` ? `${H}${Capitalize<CamelCase<T>>}` : S;

/** An object with its snake_case keys in camelCase (values untouched, nested objects included as they are). */
export type CamelKeys<T> = { [K in keyof T as K extends string ? CamelCase<K> : K]: T[K] };

const camel = (key: string) => key.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());

/**
 * A REST presenter's output with camelCase keys: GraphQL types show the same data as REST
 * (spec §4.16) without a second presenter per resource that could drift from the first.
 */
export function camelKeys<T extends object>(o: T): CamelKeys<T> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) out[camel(k)] = v;
  return out as CamelKeys<T>;
}
