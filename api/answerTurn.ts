/**
 * The end of the current event-loop turn, shared by every request that asks in it: one
 * `setImmediate` per turn, however many requests wait for it.
 *
 * The error handler (api/middleware/errors.ts) waits for it before Koa writes a small answer, so
 * the small answers a turn finished are written together, after the turn has read every request that
 * arrived with them, instead of one write between two reads. An answer built from a batched read
 * was already written that way (the batch ends in one callback); one built without waiting (a
 * cached body, a static document, a policy refusal) was not, and on a loaded 2-core machine each
 * of those lone writes woke the client's process in the middle of the api's turn: GET
 * /v1/asyncapi.json went from 13,500 to 26,100 req/s and GET /v1/gql from 8,700 to 17,300 with half
 * the CPU per answer, reads by key and writes unchanged (README "Hot paths"). The cost is at most
 * the rest of the turn's work before an answer leaves; an idle api pays one immediate callback.
 */
/**
 * Answers from this size up (as sent: compressed if they are) are written at once. Their cost is
 * their bytes, not a wake-up: held to the end of the turn, the whole lists of 10,000 rows (hundreds
 * of KB each) lost a fifth of their throughput (GET /v1/api-keys 7,200 → 5,400 req/s).
 */
export const END_OF_TURN_MAX_BYTES = 64 * 1024;

/**
 * Whether an answer with this body waits for the end of the turn: no body, a small string or
 * buffer, or an error's object (a route's JSON is a string or buffer by now: compressAnswer); never
 * a stream.
 */
export function leavesAtEndOfTurn(body: unknown): boolean {
  if (body == null) return true;
  if (typeof body === 'string' || Buffer.isBuffer(body)) return body.length < END_OF_TURN_MAX_BYTES;
  return typeof body === 'object' && typeof (body as { pipe?: unknown }).pipe !== 'function';
}

let turn: Promise<void> | undefined;

export function endOfTurn(): Promise<void> {
  turn ??= new Promise<void>((resolve) =>
    setImmediate(() => {
      turn = undefined;
      resolve();
    }),
  );
  return turn;
}
