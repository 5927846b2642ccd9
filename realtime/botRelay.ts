import { randomUUID } from 'node:crypto';
import type Redis from 'ioredis';
import type { Config } from '../shared/config';
import { PubSub } from '../shared/events';
import { decodeEnvelope, encodeEnvelope, Envelope } from '../shared/proto';
import { createRedis, redisKey } from '../shared/redis';
import { botRequestProblem, BotRequestMessage, failureReply, pickChatBotInstance, RpcReplyMessage } from './rpc';

type BotRequest =
  | { payload: 'chatSyncRequest'; body: { guildId?: string; scope?: 'CHAT_SYNC_SCOPE_GUILDS' | 'CHAT_SYNC_SCOPE_MEMBERS' } }
  | {
      payload: 'moderationRequest';
      body: { guildId: string; userId: string; action: string; durationSeconds?: number; reason?: string; deleteMessageSeconds?: number; actorId: string };
    };

/**
 * Asks the connected chat bot something from any process (api, workers): POST /v1/chat/sync and
 * /v1/chat/guilds/{id}/members/sync use `call({payload: 'chatSyncRequest', …}, 30_000 | 60_000)`.
 * The request goes to a realtime instance that reports a chat bot (stats hash), which hands it to
 * the bot; the bot's answer (ChatSyncResponse 111 / ModerationResponse 141) comes back on this
 * client's own PubSub.rpcReply channel. Resolves with the decoded response payload; a timeout or
 * a missing bot resolves with success=false and an error, like the bot's own failures.
 */
export class ChatBotClient {
  readonly id = `proc-${randomUUID()}`;
  private subscriber?: Redis;
  private ready?: Promise<void>;
  private readonly pending = new Map<string, (env: Envelope) => void>();

  constructor(
    private readonly redis: Redis,
    private readonly config: Config,
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
    const requestId = randomUUID();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.pending.delete(requestId);
        resolve(fail('request timed out'));
      }, timeoutMs);
      this.pending.set(requestId, (env) => {
        clearTimeout(timer);
        this.pending.delete(requestId);
        resolve(unwrap(env));
      });
      const msg: BotRequestMessage = {
        requestId,
        replyTo: this.id,
        envelope: Buffer.from(encodeEnvelope(req.payload, req.body as Record<string, unknown>)).toString('base64'),
        timeoutMs,
      };
      this.redis.publish(redisKey(this.config, PubSub.botRequest(target)), JSON.stringify(msg)).catch(() => {
        clearTimeout(timer);
        this.pending.delete(requestId);
        resolve(fail('service unavailable, try again'));
      });
    });
  }

  async close(): Promise<void> {
    this.subscriber?.disconnect();
  }
}
