import type Redis from 'ioredis';
import type { Config } from '../../shared/config';
import { PubSub } from '../../shared/events';
import { redisKey, WAIT_FOR_REDIS } from '../../shared/redis';

/**
 * Options of a test's own subscriber connection (`new Redis(url, SUBSCRIBER)`), as shared/redis.ts
 * makes the service's: without client info, a SUBSCRIBE sent while connecting cannot overtake the
 * ready check's INFO, which Redis refuses on a subscribed connection (redis/ioredis#2037); the
 * connection then errors and reconnects, and the test misses the pushes it waits for.
 */
export const SUBSCRIBER = { disableClientInfo: true } as const;

export interface PushListener {
  messages: Array<Record<string, any>>;
  /** Resolves with the first message matching `pred` (already received or arriving within `ms`). */
  waitFor(pred: (m: Record<string, any>) => boolean, ms?: number): Promise<Record<string, any>>;
  close(): void;
}

/** Listens on the Redis pub/sub channel behind WebSocket channel `wsChannel` (what realtime fans out). */
export async function listenPushes(
  redis: Redis,
  config: Pick<Config, 'redisPrefix'>,
  wsChannel: string,
): Promise<PushListener> {
  const sub = redis.duplicate(WAIT_FOR_REDIS);
  const channel = redisKey(config, PubSub.ws(wsChannel));
  const messages: Array<Record<string, any>> = [];
  const waiters: Array<() => void> = [];
  sub.on('message', (ch, raw) => {
    if (ch !== channel) return;
    messages.push(JSON.parse(raw));
    waiters.splice(0).forEach((w) => w());
  });
  await sub.subscribe(channel);
  return {
    messages,
    async waitFor(pred, ms = 2000) {
      const deadline = Date.now() + ms;
      for (;;) {
        const found = messages.find(pred);
        if (found) return found;
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`no matching push on ${wsChannel}; got ${JSON.stringify(messages)}`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          waiters.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
    },
    close() {
      sub.disconnect();
    },
  };
}

/** Records the credential invalidations published on the stack's Redis prefix (AuthInvalidation messages). */
export async function listenInvalidations(
  redis: Redis,
  config: Pick<Config, 'redisPrefix'>,
): Promise<{ messages: Array<Record<string, any>>; close(): void }> {
  const sub = redis.duplicate(WAIT_FOR_REDIS);
  const channel = redisKey(config, PubSub.authInvalidate);
  const messages: Array<Record<string, any>> = [];
  sub.on('message', (ch, raw) => {
    if (ch === channel) messages.push(JSON.parse(raw));
  });
  await sub.subscribe(channel);
  return { messages, close: () => sub.disconnect() };
}
