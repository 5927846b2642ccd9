import type { RawData } from 'ws';
import { decodeEnvelope, encodeEnvelope, Envelope, InvalidUtf8Error, PayloadCase } from '../shared/proto';
import { channelNameRefusal, isInternalChannel, subscriptionRefusal } from './access';
import { CloseCode } from './frames';
import type { Client, Hub } from './hub';
import type { RpcBroker } from './rpc';

export interface MessageDeps {
  hub: Hub;
  rpc: RpcBroker;
  maxMessagesPer10s: number;
}

const WINDOW_MS = 10_000;
/** Channels one connection may hold: channel names are open-ended (gps:*, public:*…). */
const MAX_CHANNELS_PER_CLIENT = 200;

/**
 * One frame from a client. The format is detected per frame (text = JSON, binary = protobuf) and
 * remembered: replies, and account events on the user channel, follow the client's latest format.
 * A client sending more than `maxMessagesPer10s` frames in a 10-second window is closed (1008).
 */
export function handleClientMessage(deps: MessageDeps, c: Client, data: RawData, isBinary: boolean): void {
  if (c.closing) return;
  const now = Date.now();
  if (now - c.windowStart >= WINDOW_MS) {
    c.windowStart = now;
    c.windowCount = 0;
  }
  // A chat bot answering a request may need many frames (a large guild's members, 64 KiB each).
  // They are not rate limited, and they count as signs of life: its Pong may queue behind them.
  const serving = c.chatBot && deps.rpc.isServing(c);
  if (serving) c.lastPong = now;
  if (++c.windowCount > deps.maxMessagesPer10s && !serving) {
    deps.hub.close(c, CloseCode.policyViolation, 'too many messages');
    return;
  }
  const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
  // While the connection's access is re-checked (a narrowing change reached this instance), its
  // requests wait for the result, in order, as its pushes do.
  if (c.recheck) {
    (c.heldIncoming ??= []).push({ buf, isBinary });
    return;
  }
  handleFrame(deps, c, buf, isBinary);
}

/** Handles the frames held during a re-check, in the order they came, with the access it found. */
export function handleHeldFrames(deps: MessageDeps, c: Client): void {
  const held = c.heldIncoming ?? [];
  c.heldIncoming = undefined;
  for (let i = 0; i < held.length; i++) {
    if (c.closing) return;
    if (c.recheck) {
      // Another re-check started meanwhile: the rest waits for it, still in order.
      c.heldIncoming = [...held.slice(i), ...(c.heldIncoming ?? [])];
      return;
    }
    handleFrame(deps, c, held[i].buf, held[i].isBinary);
  }
}

function handleFrame(deps: MessageDeps, c: Client, buf: Buffer, isBinary: boolean): void {
  if (c.revoked) {
    // The credential no longer authenticates; the socket closes in a moment (after the account
    // event that explains it, if one comes). Nothing it asks for is done.
    const message = `credentials no longer valid: ${c.revoked}`;
    if (isBinary) deps.hub.sendBinary(c, encodeEnvelope('error', { message, code: 'forbidden' }));
    else deps.hub.sendJson(c, { type: 'error', message });
    return;
  }
  if (isBinary) {
    c.format = 'protobuf';
    handleBinary(deps, c, buf);
  } else {
    c.format = 'json';
    handleJson(deps, c, buf);
  }
}

function subscribeRefusal(c: Client, channel: string): string | null {
  if (isInternalChannel(channel)) return `unknown channel ${channel}`;
  const refusal = subscriptionRefusal(c.principal, channel);
  if (refusal) return refusal;
  if (!c.channels.has(channel) && c.channels.size >= MAX_CHANNELS_PER_CLIENT)
    return `too many subscriptions (at most ${MAX_CHANNELS_PER_CLIENT})`;
  return null;
}

function handleJson(deps: MessageDeps, c: Client, buf: Buffer): void {
  const { hub } = deps;
  let msg: { type?: unknown; channel?: unknown };
  try {
    msg = JSON.parse(buf.toString('utf8'));
  } catch {
    return hub.sendJson(c, { type: 'error', message: 'invalid JSON message' });
  }
  if (!msg || typeof msg !== 'object')
    return hub.sendJson(c, { type: 'error', message: 'a message must be a JSON object with a type' });
  switch (msg.type) {
    case 'ping':
      return hub.sendJson(c, { type: 'pong' });
    case 'subscribe':
    case 'unsubscribe': {
      if (typeof msg.channel !== 'string' || !msg.channel)
        return hub.sendJson(c, { type: 'error', message: 'channel: required string' });
      const channel = msg.channel;
      if (msg.type === 'unsubscribe') {
        if (isInternalChannel(channel))
          return hub.sendJson(c, { type: 'error', message: `unknown channel ${channel}` });
        const invalid = channelNameRefusal(channel);
        if (invalid) return hub.sendJson(c, { type: 'error', message: invalid });
        hub.unsubscribe(c, channel);
        return hub.sendJson(c, { type: 'message', channel, data: `Unsubscribed from ${channel}` });
      }
      const refusal = subscribeRefusal(c, channel);
      if (refusal) return hub.sendJson(c, { type: 'error', message: refusal });
      hub.subscribe(c, channel);
      return hub.sendJson(c, { type: 'message', channel, data: `Subscribed to ${channel}` });
    }
    default:
      return hub.sendJson(c, {
        type: 'error',
        message: `unknown message type ${typeof msg.type === 'string' ? msg.type.slice(0, 50) : ''}`.trim(),
      });
  }
}

function handleBinary(deps: MessageDeps, c: Client, buf: Buffer): void {
  const { hub, rpc } = deps;
  const reply = (payload: PayloadCase, body: Record<string, unknown>, requestId?: string) =>
    hub.sendBinary(c, encodeEnvelope(payload, body, requestId));
  let env: Envelope;
  try {
    env = decodeEnvelope(buf);
  } catch (err) {
    const why = err instanceof InvalidUtf8Error ? `: ${err.message}` : '';
    return reply('error', { message: `invalid protobuf WsEnvelope${why}`, code: 'bad_request' });
  }
  const rid = env.requestId;
  switch (env.payload) {
    case 'ping': {
      const ts = (env.ping as { timestamp?: number }).timestamp;
      return reply('pong', { timestamp: ts || Date.now() }, rid);
    }
    case 'pong':
      return;
    case 'subscribe':
    case 'unsubscribe': {
      const channel = String((env[env.payload] as { channel?: string }).channel ?? '');
      if (!channel) return reply('error', { message: 'channel: required', code: 'bad_request' }, rid);
      if (env.payload === 'unsubscribe') {
        if (isInternalChannel(channel))
          return reply('error', { message: `unknown channel ${channel}`, code: 'unknown_channel' }, rid);
        const invalid = channelNameRefusal(channel);
        if (invalid) return reply('error', { message: invalid, code: 'unknown_channel' }, rid);
        hub.unsubscribe(c, channel);
        return reply('unsubscribe', { channel }, rid);
      }
      const refusal = subscribeRefusal(c, channel);
      if (refusal) {
        const code = refusal.startsWith('access denied')
          ? 'forbidden'
          : refusal.startsWith('too many')
            ? 'bad_request'
            : 'unknown_channel';
        return reply('error', { message: refusal, code }, rid);
      }
      hub.subscribe(c, channel);
      return reply('subscribe', { channel }, rid);
    }
    case 'createAuditEvent':
    case 'chatSyncRequest':
    case 'chatSettingsRequest':
    case 'moderationRequest':
      void rpc.handleRequest(c, env);
      return;
    case 'chatSyncResponse':
    case 'moderationResponse':
      if (!c.chatBot)
        return reply('error', { message: 'only a chat bot connection answers chat requests', code: 'forbidden' }, rid);
      return rpc.handleBotResponse(c, env, buf);
    case 'gpsUpdate':
      return reply(
        'error',
        { message: 'GpsUpdate is not accepted on /v1/ws; trackers send points with POST /v1/gps', code: 'bad_request' },
        rid,
      );
    default:
      return reply(
        'error',
        { message: `${env.payload ?? env.type} is not a client message`, code: 'bad_request' },
        rid,
      );
  }
}
