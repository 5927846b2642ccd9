import { ApiClient, ApiResult, AUTH_REQUIRED, CallOptions, fillPath } from './http';
import { OPERATIONS, Operations } from './operations';

export type { Operations, Schemas } from './operations';

/** Options of a typed call: its auth choice (required), and the operation's params, query and body. */
export type OperationOptions<K extends keyof Operations> = Omit<CallOptions, 'body' | 'query'> & {
  params?: Operations[K]['params'];
  query?: Operations[K]['query'];
  body?: Operations[K]['body'];
};

/** The answer the client gives itself when a call states no credential (nothing is sent). */
export interface AuthRequiredBody {
  error: typeof AUTH_REQUIRED;
  message: string;
}

/**
 * The result of a typed call, discriminated by `ok`: a 2xx answer (`ok: true`) has the body the
 * document gives the operation's 2xx statuses; any other (`ok: false`) the body of its error
 * statuses (`Schemas['Error']`, GraphQL's result on /v1/gql; none on a 304), or the client's own
 * AUTH_REQUIRED answer.
 */
export type TypedResult<K extends keyof Operations> =
  | (ApiResult<Operations[K]['response']> & { ok: true })
  | (ApiResult<Operations[K]['error'] | AuthRequiredBody> & { ok: false });

/**
 * Typed calls by operation id (`get_v1_trips_id`): parameters, body, the 2xx body and the error
 * body are typed from shared/client/operations.ts, generated from the OpenAPI document (itself
 * generated from the routes' zod schemas), and a test fails when that file is stale, so the types
 * cannot drift. Check `ok` (or the status) before reading the body as the success type.
 */
export class TypedApiClient extends ApiClient {
  /**
   * One call, as `request`: never throws. Every HTTP status resolves; a call that cannot be made
   * rejects, as a network failure does: a path parameter missing (nothing is sent).
   */
  async call<K extends keyof Operations>(op: K, o: OperationOptions<K>): Promise<TypedResult<K>> {
    const [method, path] = OPERATIONS[op];
    // Inside the async function, so a missing parameter is a rejection rather than a synchronous throw.
    const filled = fillPath(path, o.params as Record<string, string> | undefined);
    return (await this.request(method.toUpperCase(), filled, {
      ...o,
      query: o.query as CallOptions['query'],
    })) as TypedResult<K>;
  }
}
