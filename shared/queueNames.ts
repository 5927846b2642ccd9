/**
 * The BullMQ queues by name (shared/queues.ts is the registry of their payloads and options). Kept
 * apart so configuration can check QUEUE_CONCURRENCY against it without loading BullMQ.
 * Never rename a live queue value: jobs already waiting under the old name would be orphaned.
 */
export const QueueName = {
  email: 'email',
  scheduled: 'scheduled',
  geofence: 'geofence',
  realtimeRequests: 'realtimeRequests',
  passwordResets: 'passwordResets',
  dataExport: 'dataExport',
} as const;
export type QueueName = (typeof QueueName)[keyof typeof QueueName];
