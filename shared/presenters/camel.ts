/** `speed_kmh` → `speedKmh`, at the type level. */
export type CamelCase<S extends string> = S extends `${infer H}_${infer T}` ? `${H}${Capitalize<CamelCase<T>>}` : S;

/** An object with its snake_case keys in camelCase (values untouched, nested objects included as they are). */
export type CamelKeys<T> = { [K in keyof T as K extends string ? CamelCase<K> : K]: T[K] };

/**
 * Converted names by snake_case name. Presenters have a fixed set of keys, so the regular
 * expression runs once per name, not once per key of every object of every list: it was a sixth of
 * a GraphQL page's CPU. Bounded all the same.
 */
const names = new Map<string, string>();
const MAX_NAMES = 2048;

/** One snake_case name in camelCase (`user_id` → `userId`). */
export function camel(key: string): string {
  let name = names.get(key);
  if (name === undefined) {
    name = key.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
    if (names.size < MAX_NAMES) names.set(key, name);
  }
  return name;
}

/**
 * A REST presenter's output with camelCase keys: GraphQL types show the same data as REST
 * (spec §4.16) without a second presenter per resource that could drift from the first.
 */
export function camelKeys<T extends object>(o: T): CamelKeys<T> {
  const out: Record<string, unknown> = {};
  const source = o as Record<string, unknown>;
  for (const k of Object.keys(source)) out[camel(k)] = source[k];
  return out as CamelKeys<T>;
}
