import { CHAT_BOTS_WS_CHANNEL } from '../shared/events';
import { can, Principal, refusal, subjects } from '../shared/policies';
import type { Envelope } from '../shared/proto';

/**
 * What the realtime process refuses, decided by shared/policies (channel rules of spec §4.26, the
 * chat bot channel, requests sent over the socket). A refusal is a message on the socket; the
 * policy tells an anonymous socket what it tells anyone holding nothing.
 */

/**
 * Null for a name a channel can have, else the message: subscribe and unsubscribe refuse any other
 * text alike (NUL, CR/LF, lone surrogates, 60 KB), and echo only the start of it.
 */
export function channelNameRefusal(channel: string): string | null {
  return /^[A-Za-z0-9_:.-]{1,200}$/.test(channel) ? null : `invalid channel name: ${channel.slice(0, 200)}`;
}

/** Null when the principal may join the channel, else the message it gets. */
export function subscriptionRefusal(p: Principal, channel: string): string | null {
  return channelNameRefusal(channel) ?? refusal(p, 'subscribe', subjects.channel(channel));
}

/** Channels the server subscribes connections to itself; clients can neither join nor leave them. */
export function isInternalChannel(channel: string): boolean {
  return channel === CHAT_BOTS_WS_CHANNEL;
}

/** Whether a principal may act as a chat bot connection (receive sync and moderation requests). */
export function mayBeChatBot(p: Principal): boolean {
  return can(p, 'actAsChatBot', subjects.channel(CHAT_BOTS_WS_CHANNEL));
}

/**
 * Whether a socket may keep a channel after its principal changed: the normal rule, and for the
 * internal chat bot channel the chat bot rule.
 */
export function mayRetain(p: Principal, channel: string): boolean {
  if (isInternalChannel(channel)) return mayBeChatBot(p);
  return subscriptionRefusal(p, channel) === null;
}

/** Whether a socket on its user's channel receives an account event of this type (shared/policies). */
export function mayReceiveAccountEvent(p: Principal, type: string): boolean {
  return can(p, 'receive', subjects.accountEvent(type));
}

/**
 * Null when the principal may send the request (100, 110, 120, 140), else the message: the
 * permission of the matching REST endpoint (shared/policies wsRequest rule).
 */
export function requestRefusal(p: Principal, env: Envelope): string | null {
  const body = (env.payload ? env[env.payload] : undefined) as { action?: string; scope?: string } | undefined;
  const subject = subjects.wsRequest(env.payload ?? '', { action: body?.action, scope: body?.scope });
  return refusal(p, 'send', subject);
}
