import { ApiClient, ApiResult, CallOptions, fillPath } from './http';
import { OPERATIONS, Operations } from './operations';

export type { Operations, Schemas } from './operations';

/** Options of a typed call: its auth choice (required), and the operation's params, query and body. */
export type OperationOptions<K extends keyof Operations> = Omit<CallOptions, 'body' | 'query'> & {
  params?: Operations[K]['params'];
  query?: Operations[K]['query'];
  body?: Operations[K]['body'];
};

/**
 * Typed calls by operation id (`get_v1_trips_id`): parameters, body and the 2xx body are typed
 * from shared/client/operations.ts, generated from the OpenAPI document (itself generated from the
 * routes' zod schemas), and a test fails when that file is stale, so the types cannot drift.
 */
export class TypedApiClient extends ApiClient {
  call<K extends keyof Operations>(op: K, o: OperationOptions<K>): Promise<ApiResult<Operations[K]['response']>> {
    const [method, path] = OPERATIONS[op];
    return this.request<Operations[K]['response']>(
      method.toUpperCase(),
      fillPath(path, o.params as Record<string, string> | undefined),
      { ...o, query: o.query as CallOptions['query'] },
    );
  }
}
