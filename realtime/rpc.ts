import { randomUUID } from 'node:crypto';
import type Redis from 'ioredis';
import type { Config } from '../shared/config';
import { CHAT_BOTS_WS_CHANNEL, PubSub } from '../shared/events';
import type { Logger } from '../shared/logger';
import { actorIdOf } from '../shared/policies';
import { decodeEnvelope, encodeEnvelope, Envelope, PayloadCase } from '../shared/proto';
import {
  botRequestProblem,
  BotRequestMessage,
  failureReply,
  isPartialReply,
  pickChatBotInstance,
  requestTimeoutMs,
  RpcReplyMessage,
} from '../shared/proto/rpc';
import type { Queues } from '../shared/queues';
import { redisKey } from '../shared/redis';
import { requestRefusal } from './access';
import type { Client, Hub } from './hub';

/**
 * The realtime side of the request/reply transport (shared/proto/rpc.ts): requests of local
 * clients (queued or relayed to a chat bot) awaiting replies, and requests this instance handed to
 * one of its chat bots. Replies reach the client with its own request_id.
 */

interface PendingClient {
  client: Client;
  clientRequestId: string;
  request: PayloadCase;
  original: Record<string, unknown>;
  timer: NodeJS.Timeout;
}

interface PendingBot {
  replyTo: string;
  bot: Client;
  request: PayloadCase;
  original: Record<string, unknown>;
  timer: NodeJS.Timeout;
}

/** A bot request not handed out yet: `until` is when its requester stops waiting (ms). */
interface DeferredBotRequest {
  msg: BotRequestMessage;
  payload: PayloadCase;
  original: Record<string, unknown>;
  until: number;
}

export class RpcBroker {
  /** Requests of local clients awaiting a reply (from a worker or a chat bot). */
  private readonly pending = new Map<string, PendingClient>();
  /** Requests relayed to a local chat bot, awaiting its answer. */
  private readonly botPending = new Map<string, PendingBot>();
  private botCursor = 0;

  constructor(
    private readonly instanceId: string,
    private readonly hub: Hub,
    private readonly redis: Redis,
    private readonly queues: Queues,
    private readonly config: Config,
    private readonly logger: Logger,
  ) {}

  /** Pub/sub channels this instance must listen on (unprefixed names resolved here). */
  channels(): { reply: string; bot: string } {
    return {
      reply: redisKey(this.config, PubSub.rpcReply(this.instanceId)),
      bot: redisKey(this.config, PubSub.botRequest(this.instanceId)),
    };
  }

  private sendEnvelope(c: Client, payload: PayloadCase, body: Record<string, unknown>, requestId?: string): void {
    this.hub.sendBinary(c, encodeEnvelope(payload, body, requestId));
  }

  /** A client's request (100, 110, 120, 140): authorise, then queue or relay it. */
  async handleRequest(c: Client, env: Envelope): Promise<void> {
    const payload = env.payload as PayloadCase;
    const clientRequestId = env.requestId ?? '';
    const original = (env[payload] ?? {}) as Record<string, unknown>;
    const refusal = requestRefusal(c.principal, env);
    if (refusal) {
      this.sendEnvelope(c, 'error', { message: refusal, code: 'forbidden' }, clientRequestId);
      return;
    }
    const problem = botRequestProblem(env);
    if (problem) {
      const [response, body] = failureReply(payload, problem, original);
      this.sendEnvelope(c, response, body, clientRequestId);
      return;
    }
    const requestId = randomUUID();
    const timeoutMs = requestTimeoutMs(env, this.config);
    const timer = setTimeout(
      () => this.answer(requestId, failureReply(payload, 'request timed out', original)),
      timeoutMs,
    );
    timer.unref();
    this.pending.set(requestId, { client: c, clientRequestId, request: payload, original, timer });
    try {
      if (payload === 'createAuditEvent' || payload === 'chatSettingsRequest') {
        const p = c.principal;
        await this.queues.enqueue('realtimeRequests', {
          requestId,
          instanceId: this.instanceId,
          principal: {
            kind: p.kind === 'anonymous' ? 'system' : p.kind,
            userId: p.kind === 'user' || p.kind === 'apiKey' ? p.userId : null,
            apiKeyId: p.kind === 'apiKey' || p.kind === 'system' ? p.apiKeyId : null,
            sessionId: p.kind === 'user' ? p.sessionId : null,
          },
          sourceService: c.sourceService,
          envelope: Buffer.from(encodeEnvelope(payload, original)).toString('base64'),
        });
      } else {
        let body = original;
        if (payload === 'moderationRequest') {
          // The actor is who asked, never what the client claims.
          body = { ...original, actorId: actorIdOf(c.principal) ?? '' };
        }
        const target = await pickChatBotInstance(this.redis, this.config);
        if (!target) {
          this.answer(requestId, failureReply(payload, 'no chat bot is connected', original));
          return;
        }
        const msg: BotRequestMessage = {
          requestId,
          replyTo: this.instanceId,
          envelope: Buffer.from(encodeEnvelope(payload, body)).toString('base64'),
          timeoutMs,
        };
        await this.redis.publish(redisKey(this.config, PubSub.botRequest(target)), JSON.stringify(msg));
      }
    } catch (err) {
      this.logger.warn({ err: (err as Error).message }, 'could not forward a realtime request');
      this.answer(requestId, failureReply(payload, 'service unavailable, try again', original));
    }
  }

  /** Delivers a reply to the waiting client (once; later duplicates are dropped). */
  private answer(requestId: string, reply: [PayloadCase, Record<string, unknown>] | Uint8Array): void {
    const p = this.pending.get(requestId);
    if (!p) return;
    if (reply instanceof Uint8Array) {
      let env: Envelope;
      try {
        env = decodeEnvelope(reply);
      } catch {
        return;
      }
      // A frame of a split ChatSyncResponse: forward it and keep waiting for the last one.
      if (!isPartialReply(env)) {
        this.pending.delete(requestId);
        clearTimeout(p.timer);
      }
      const payload = env.payload as PayloadCase;
      this.sendEnvelope(p.client, payload, (env[payload] ?? {}) as Record<string, unknown>, p.clientRequestId);
    } else {
      this.pending.delete(requestId);
      clearTimeout(p.timer);
      this.sendEnvelope(p.client, reply[0], reply[1], p.clientRequestId);
    }
  }

  /** Whether one of this chat bot's answers is awaited (its answer frames are then not rate limited). */
  isServing(c: Client): boolean {
    if (!c.chatBot) return false;
    for (const p of this.botPending.values()) if (p.bot === c) return true;
    return false;
  }

  /** A message on PubSub.rpcReply(this instance). */
  onReply(raw: string): void {
    try {
      const msg = JSON.parse(raw) as RpcReplyMessage;
      this.answer(msg.requestId, Buffer.from(msg.envelope, 'base64'));
    } catch (err) {
      this.logger.warn({ err: (err as Error).message }, 'bad rpc reply');
    }
  }

  private async publishReply(
    replyTo: string,
    requestId: string,
    reply: [PayloadCase, Record<string, unknown>] | Uint8Array,
  ): Promise<void> {
    const bytes = reply instanceof Uint8Array ? reply : encodeEnvelope(reply[0], reply[1]);
    const msg: RpcReplyMessage = { requestId, envelope: Buffer.from(bytes).toString('base64') };
    await this.redis
      .publish(redisKey(this.config, PubSub.rpcReply(replyTo)), JSON.stringify(msg))
      .catch((err) => this.logger.warn({ err: err.message }, 'could not publish rpc reply'));
  }

  /** A message on PubSub.botRequest(this instance): hand it to one local chat bot. */
  onBotRequest(raw: string): void {
    let msg: BotRequestMessage;
    let env: Envelope;
    try {
      msg = JSON.parse(raw) as BotRequestMessage;
      env = decodeEnvelope(Buffer.from(msg.envelope, 'base64'));
    } catch (err) {
      this.logger.warn({ err: (err as Error).message }, 'bad bot request');
      return;
    }
    const payload = env.payload as PayloadCase;
    const original = (env[payload] ?? {}) as Record<string, unknown>;
    this.dispatchBotRequest({ msg, payload, original, until: Date.now() + (msg.timeoutMs || 60_000) });
  }

  /**
   * Hands a bot request to one of the chat bots that may take it now. A bot whose access is being
   * re-checked (a narrowing change was just acknowledged: it may have lost chat:sync, or its key
   * may be revoked) gets nothing until the re-check ends, as channel pushes wait (`Hub.mustHold`):
   * when no other bot is ready, the request waits for the re-check (`onBotReleased`) and then goes
   * to a bot that kept its access, or fails as if none were connected. A revoked bot, closed a
   * moment later, gets nothing.
   */
  private dispatchBotRequest(r: DeferredBotRequest): void {
    const { msg, payload, original } = r;
    const live = [...this.hub.chatBots].filter((b) => !b.closing && b.revoked === undefined);
    const ready = live.filter((b) => !this.hub.mustHold(b, CHAT_BOTS_WS_CHANNEL));
    if (!ready.length && live.length) {
      // Past its timeout the requester has given up already: nothing to wait for.
      if (Date.now() < r.until) this.deferredBotRequests.push(r);
      return;
    }
    if (!ready.length) {
      void this.publishReply(msg.replyTo, msg.requestId, failureReply(payload, 'no chat bot is connected', original));
      return;
    }
    const bot = ready[this.botCursor++ % ready.length];
    const timer = setTimeout(() => this.botPending.delete(msg.requestId), Math.max(0, r.until - Date.now()));
    timer.unref();
    this.botPending.set(msg.requestId, { replyTo: msg.replyTo, bot, request: payload, original, timer });
    this.sendEnvelope(bot, payload, original, msg.requestId);
  }

  /** Bot requests waiting for a re-check of the bots that might take them (`dispatchBotRequest`). */
  private deferredBotRequests: DeferredBotRequest[] = [];

  /** A connection's re-check ended (`Hub.release`): bot requests that waited for it are handed out again. */
  onBotReleased(): void {
    if (!this.deferredBotRequests.length) return;
    const waiting = this.deferredBotRequests;
    this.deferredBotRequests = [];
    for (const r of waiting) this.dispatchBotRequest(r);
  }

  /** A chat bot answered (111 or 141): route the answer to whoever asked. */
  handleBotResponse(c: Client, env: Envelope, raw: Uint8Array): void {
    const requestId = env.requestId ?? '';
    const p = this.botPending.get(requestId);
    if (!p || p.bot !== c) {
      this.sendEnvelope(
        c,
        'error',
        { message: 'no pending request with this request_id', code: 'not_found' },
        requestId,
      );
      return;
    }
    // Every frame of a split answer goes on; the request is settled by the last one.
    if (!isPartialReply(env)) {
      this.botPending.delete(requestId);
      clearTimeout(p.timer);
    }
    // The bot's frame goes on as it came (requesters match the server-side requestId, not the
    // envelope's): no re-encoding of large answers.
    void this.publishReply(p.replyTo, requestId, raw);
  }

  /** A client went away: forget its requests; requests its bot was serving fail now, not at timeout. */
  onClientGone(c: Client): void {
    for (const [id, p] of this.pending) {
      if (p.client === c) {
        clearTimeout(p.timer);
        this.pending.delete(id);
      }
    }
    this.failBotRequests(c, 'the chat bot disconnected');
  }

  /**
   * The requests `c` was serving as a chat bot fail now, not at their timeout: it went away, or it
   * lost its access (`Hub.demoteChatBot`), after which its answers are refused.
   */
  failBotRequests(c: Client, reason: string): void {
    for (const [id, p] of this.botPending) {
      if (p.bot !== c) continue;
      clearTimeout(p.timer);
      this.botPending.delete(id);
      void this.publishReply(p.replyTo, id, failureReply(p.request, reason, p.original));
    }
  }

  close(): void {
    this.deferredBotRequests = [];
    for (const p of this.pending.values()) clearTimeout(p.timer);
    for (const p of this.botPending.values()) clearTimeout(p.timer);
    this.pending.clear();
    this.botPending.clear();
  }
}
