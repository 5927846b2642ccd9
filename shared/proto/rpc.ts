import { randomUUID } from 'node:crypto';
import type Redis from 'ioredis';
import type { Config } from '../config';
import { PubSub } from '../events';
import { createRedis, redisKey, RedisKeys } from '../redis';
import { decodeEnvelope, encodeEnvelope, Envelope, PayloadCase } from './index';

/**
 * Request/reply transport of the WebSocket protocol, shared by the realtime process (which holds
 * the sockets) and any other process that needs the chat bot (api, workers):
 *
 * - Requests that need the database (audit 100, chat settings 120) become `realtimeRequests` jobs;
 *   the worker publishes a RpcReplyMessage on PubSub.rpcReply(<realtime instance>).
 * - Requests for the chat bot (chat sync 110, moderation 140) go to a realtime instance that
 *   reports a chat bot connection, as a BotRequestMessage on PubSub.botRequest(<instance>); the
 *   bot's answer (111/141) comes back as a RpcReplyMessage on PubSub.rpcReply(<requester>).
 * Replies are matched by a server-side request id, never the client's own request_id.
 */

/** Wire format of a reply on PubSub.rpcReply(origin). */
export interface RpcReplyMessage {
  requestId: string;
  /** WsEnvelope, base64. */
  envelope: string;
}

/** Wire format of a chat bot request on PubSub.botRequest(instance). */
export interface BotRequestMessage {
  requestId: string;
  /** Instance (or process) id whose rpcReply channel gets the answer. */
  replyTo: string;
  envelope: string;
  timeoutMs: number;
}

/** The response payload answering each request payload. */
const RESPONSE_OF: Partial<Record<PayloadCase, PayloadCase>> = {
  createAuditEvent: 'createAuditEventResponse',
  chatSyncRequest: 'chatSyncResponse',
  chatSettingsRequest: 'chatSettingsResponse',
  moderationRequest: 'moderationResponse',
};

/** A response with success=false in the shape the requester expects. */
export function failureReply(
  request: PayloadCase,
  message: string,
  original?: Record<string, unknown>,
): [PayloadCase, Record<string, unknown>] {
  const response = RESPONSE_OF[request];
  if (!response) return ['error', { message, code: 'bad_request' }];
  const body: Record<string, unknown> = { success: false, error: message };
  if (response === 'moderationResponse' && original)
    Object.assign(body, { guildId: original.guildId ?? '', userId: original.userId ?? '', action: original.action });
  return [response, body];
}

/**
 * Timeouts of spec §8: 30 s for guild syncs and other requests, 60 s for member syncs
 * (CHAT_SYNC_TIMEOUT_SECONDS, CHAT_MEMBER_SYNC_TIMEOUT_SECONDS).
 */
export function requestTimeoutMs(env: Envelope, config?: Pick<Config, 'chat'>): number {
  const sync = env.chatSyncRequest as { scope?: string } | undefined;
  const members = env.payload === 'chatSyncRequest' && sync?.scope === 'CHAT_SYNC_SCOPE_MEMBERS';
  if (members) return config?.chat.memberSyncTimeoutMs ?? 60_000;
  return config?.chat.syncTimeoutMs ?? 30_000;
}

/** What a request the chat bot did not answer in time answers (docs/chat.md). */
const TIMED_OUT = 'request timed out';

/** Repeated fields of a ChatSyncResponse that a bot may split over several frames (`more`). */
const SYNC_LISTS = ['guilds', 'channels', 'roles', 'members'] as const;

/** Whether a reply is a ChatSyncResponse frame with more frames to follow. */
export function isPartialReply(env: Envelope): boolean {
  return env.payload === 'chatSyncResponse' && !!(env.chatSyncResponse as { more?: boolean } | undefined)?.more;
}

/** Collects the frames of a split ChatSyncResponse; `finish` merges them with the last frame. */
export class SyncResponseAssembler {
  private readonly lists: Record<string, unknown[]> = {};

  add(body: Record<string, unknown>): void {
    for (const k of SYNC_LISTS) {
      const items = body[k];
      if (Array.isArray(items) && items.length) {
        const into = (this.lists[k] ??= []);
        for (const item of items) into.push(item);
      }
    }
  }

  finish(last: Record<string, unknown>): Record<string, unknown> {
    this.add(last);
    const out: Record<string, unknown> = { ...last };
    delete out.more;
    for (const k of SYNC_LISTS) if (this.lists[k]) out[k] = this.lists[k];
    return out;
  }
}

const SNOWFLAKE = /^\d{1,25}$/;

/**
 * Checks a chat bot request before it is relayed, so the bot only sees well-formed requests.
 * Returns the problem (naming the field) or null.
 */
export function botRequestProblem(env: Envelope): string | null {
  if (env.payload === 'chatSyncRequest') {
    const r = (env.chatSyncRequest ?? {}) as { guildId?: string; scope?: string };
    if (r.guildId && !SNOWFLAKE.test(r.guildId)) return 'guild_id: must be a snowflake (digits)';
    if (r.scope === 'CHAT_SYNC_SCOPE_MEMBERS' && !r.guildId) return 'guild_id: required for a member sync';
    return null;
  }
  if (env.payload === 'moderationRequest') {
    const r = (env.moderationRequest ?? {}) as {
      guildId?: string;
      userId?: string;
      action?: string;
      durationSeconds?: number;
      deleteMessageSeconds?: number;
    };
    if (!r.guildId || !SNOWFLAKE.test(r.guildId)) return 'guild_id: required snowflake (digits)';
    if (!r.userId || !SNOWFLAKE.test(r.userId)) return 'user_id: required snowflake (digits)';
    if (!r.action || r.action === 'MODERATION_ACTION_UNSPECIFIED') return 'action: required';
    if (
      r.action === 'MODERATION_TIMEOUT' &&
      !(Number.isInteger(r.durationSeconds) && r.durationSeconds! >= 1 && r.durationSeconds! <= 2_419_200)
    ) {
      return 'duration_seconds: required for a timeout, 1 to 2419200';
    }
    if (r.deleteMessageSeconds !== undefined && !(r.deleteMessageSeconds >= 0 && r.deleteMessageSeconds <= 604_800))
      return 'delete_message_seconds: 0 to 604800';
    return null;
  }
  return null;
}

/** Picks a live realtime instance reporting a chat bot connection, from the stats hash. */
export async function pickChatBotInstance(
  redis: Redis,
  config: Pick<Config, 'redisPrefix'>,
  freshMs = 15_000,
): Promise<string | null> {
  const all = await redis.hgetall(redisKey(config, RedisKeys.wsStats));
  const candidates = Object.entries(all)
    .map(([id, raw]) => {
      try {
        return { id, ...(JSON.parse(raw) as { chatBots?: number; at: number }) };
      } catch {
        return null;
      }
    })
    .filter(
      (r): r is { id: string; chatBots?: number; at: number } =>
        !!r && (r.chatBots ?? 0) > 0 && Date.now() - r.at <= freshMs,
    );
  if (!candidates.length) return null;
  return candidates[Math.floor(Math.random() * candidates.length)].id;
}

type BotRequest =
  | {
      payload: 'chatSyncRequest';
      body: { guildId?: string; scope?: 'CHAT_SYNC_SCOPE_GUILDS' | 'CHAT_SYNC_SCOPE_MEMBERS' };
    }
  | {
      payload: 'moderationRequest';
      body: {
        guildId: string;
        userId: string;
        action: string;
        durationSeconds?: number;
        reason?: string;
        deleteMessageSeconds?: number;
        actorId: string;
      };
    };

/**
 * Asks the connected chat bot something from any process (api, workers): POST /v1/chat/sync and
 * /v1/chat/guilds/{id}/members/sync use `call({payload: 'chatSyncRequest', …}, 30_000 | 60_000)`.
 * The request goes to a realtime instance that reports a chat bot (stats hash), which hands it to
 * the bot; the bot's answer (ChatSyncResponse 111 / ModerationResponse 141) comes back on this
 * client's own PubSub.rpcReply channel. Resolves with the decoded response payload; a timeout or
 * a missing bot resolves with success=false and an error, like the bot's own failures. Once
 * `waitsEnd` is aborted (ServiceContext.endWaits: the api's drain, shortly before its deadline),
 * every call resolves as its timeout would, at once, so that the request is answered, not cut.
 */
export class ChatBotClient {
  readonly id = `proc-${randomUUID()}`;
  private subscriber?: Redis;
  private ready?: Promise<void>;
  private readonly pending = new Map<string, (env: Envelope) => void>();

  constructor(
    private readonly redis: Redis,
    private readonly config: Config,
    private readonly waitsEnd?: AbortSignal,
  ) {}

  private start(): Promise<void> {
    if (!this.ready) {
      const sub = createRedis(this.config);
      this.subscriber = sub;
      sub.on('error', () => undefined);
      const channel = redisKey(this.config, PubSub.rpcReply(this.id));
      sub.on('message', (ch, raw) => {
        if (ch !== channel) return;
        try {
          const msg = JSON.parse(raw) as RpcReplyMessage;
          this.pending.get(msg.requestId)?.(decodeEnvelope(Buffer.from(msg.envelope, 'base64')));
        } catch {
          /* malformed replies are ignored; the caller times out */
        }
      });
      this.ready = sub.subscribe(channel).then(() => undefined);
    }
    return this.ready;
  }

  /** Sends one request to a chat bot and waits for its response payload (camelCase fields). */
  async call(req: BotRequest, timeoutMs: number): Promise<Record<string, unknown>> {
    await this.start();
    const unwrap = (env: Envelope) => (env.payload ? ((env[env.payload] ?? {}) as Record<string, unknown>) : {});
    const fail = (message: string) => failureReply(req.payload, message, req.body)[1];
    const problem = botRequestProblem({ type: '', payload: req.payload, [req.payload]: req.body });
    if (problem) return fail(problem);
    const target = await pickChatBotInstance(this.redis, this.config);
    if (!target) return fail('no chat bot is connected');
    // Nobody would wait for the answer.
    if (this.waitsEnd?.aborted) return fail(TIMED_OUT);
    const requestId = randomUUID();
    const parts = new SyncResponseAssembler();
    return new Promise((resolve) => {
      const settle = (answer: Record<string, unknown>) => {
        clearTimeout(timer);
        this.waitsEnd?.removeEventListener('abort', stopWaiting);
        this.pending.delete(requestId);
        resolve(answer);
      };
      const timer = setTimeout(() => settle(fail(TIMED_OUT)), timeoutMs);
      const stopWaiting = () => settle(fail(TIMED_OUT));
      this.waitsEnd?.addEventListener('abort', stopWaiting, { once: true });
      this.pending.set(requestId, (env) => {
        // A split answer: keep collecting until the last frame.
        if (isPartialReply(env)) return parts.add(unwrap(env));
        settle(env.payload === 'chatSyncResponse' ? parts.finish(unwrap(env)) : unwrap(env));
      });
      const msg: BotRequestMessage = {
        requestId,
        replyTo: this.id,
        envelope: Buffer.from(encodeEnvelope(req.payload, req.body as Record<string, unknown>)).toString('base64'),
        timeoutMs,
      };
      this.redis
        .publish(redisKey(this.config, PubSub.botRequest(target)), JSON.stringify(msg))
        .catch(() => settle(fail('service unavailable, try again')));
    });
  }

  async close(): Promise<void> {
    this.subscriber?.disconnect();
  }
}
