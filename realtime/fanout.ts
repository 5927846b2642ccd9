import { CHAT_BOTS_WS_CHANNEL, MIRRORED_WS_CHANNELS } from '../shared/events';
import { mayReceiveAccountEvent } from './access';
import { ACCOUNT_EVENT_TYPES, AccountEvents } from './accountEvents';
import { hasProtobufTwin, parseType, peekType, PROTOBUF_ONLY_TYPES, protobufTwin } from './frames';
import type { Hub } from './hub';

/**
 * Fan-out of one published message to the local subscribers of its channel. The JSON text frame
 * arrives serialised by the publisher and is sent as-is (one Buffer shared by every socket); the
 * protobuf twin of an account or bot event is encoded at most once, and only if a receiver needs
 * it. Data broadcasts (gpsUpdate, vesselsUpdate, geofenceEvent) have no twin and always go out as
 * JSON text. Account events then take effect on the sockets (closing, re-checking).
 */
export function fanOut(hub: Hub, accountEvents: AccountEvents): (channel: string, payload: Buffer) => void {
  return (channel, payload) => {
    let type = peekType(payload);
    // Account and bot events are rare: parse them fully when the cheap peek cannot tell.
    if (type === null && (channel.startsWith('user:') || channel === CHAT_BOTS_WS_CHANNEL)) type = parseType(payload);
    const set = hub.channels.get(channel);
    if (set && set.size) {
      // A push on `gps:<device>` also arrives on `gps`: a connection reading both gets it from there.
      const colon = channel.indexOf(':');
      const base = colon > 0 ? channel.slice(0, colon) : undefined;
      const mirror = base !== undefined && MIRRORED_WS_CHANNELS.has(base) ? hub.channels.get(base) : undefined;
      const twin = hasProtobufTwin(type);
      const protoOnly = twin && PROTOBUF_ONLY_TYPES.has(type!);
      // An account event on a user's channel goes only to the sockets whose credential may see it.
      const accountEvent = type !== null && channel.startsWith('user:') ? type : null;
      let binary: Uint8Array | null | undefined;
      for (const c of set) {
        if (mirror?.has(c)) continue;
        if (accountEvent !== null && !mayReceiveAccountEvent(c.principal, accountEvent)) continue;
        const hold = hub.mustHold(c, channel);
        if (twin && (protoOnly || c.format === 'protobuf')) {
          if (binary === undefined) binary = protobufTwin(payload);
          if (binary) {
            if (hold) hub.hold(c, channel, binary, true);
            else hub.sendBinary(c, binary);
            continue;
          }
          if (protoOnly) continue;
        }
        if (hold) hub.hold(c, channel, payload, false);
        else hub.sendText(c, payload);
      }
    }
    // Effects come after delivery, so a closed socket has received the event first.
    if (type && ACCOUNT_EVENT_TYPES.has(type)) accountEvents.handle(type, payload);
  };
}
