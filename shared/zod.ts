import { extendZodWithOpenApi, OpenAPIRegistry } from '@asteasolutions/zod-to-openapi';
import { z } from 'zod';

// Every schema in the service is built from this `z`, so each can describe itself in OpenAPI.
extendZodWithOpenApi(z);

export { z };

/** The OpenAPI registry every route adds itself to (api/routing.ts). */
export const openApiRegistry = new OpenAPIRegistry();

/** A UUID path or body field; malformed values are a 400 naming the field. */
export const zUuid = () => z.string().uuid({ message: 'must be a UUID' });

/** Boolean in a query string: only `true`/`false`/`1`/`0`. */
export const zQueryBool = () =>
  z
    .enum(['true', 'false', '1', '0'], { errorMap: () => ({ message: 'must be true or false' }) })
    .transform((v) => v === 'true' || v === '1');

/** Integer in a query string with bounds. */
export const zQueryInt = (min: number, max: number) =>
  z.coerce.number({ invalid_type_error: 'must be an integer' }).int('must be an integer').min(min).max(max);

/** A finite number (JSON has no NaN/Infinity, but strings coerced elsewhere might). */
export const zFinite = () => z.number({ invalid_type_error: 'must be a number' }).finite();

/** Refines an object schema so that at least one field is present (PATCH bodies). */
export function atLeastOne<T extends z.ZodRawShape>(schema: z.ZodObject<T>) {
  return schema.refine((v) => Object.values(v).some((x) => x !== undefined), {
    message: `at least one of ${Object.keys(schema.shape).join(', ')} is required`,
  });
}
