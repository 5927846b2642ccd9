/** The first-party client (REST and WebSocket); see README "First-party client" and docs/api.md. */
export * from './http';
export * from './ws';
export type { WsClientMessage, WsServerMessage } from '../wsMessages';
export * from './typed';
