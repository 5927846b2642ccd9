import type { Job } from 'bullmq';
import type { ServiceContext } from '../../shared/context';
import type { JobOf, QueueName } from '../../shared/queues';

/** A queue's processor: gets the typed job and the worker process's context. */
export type Processor<N extends QueueName> = (job: Job<JobOf<N>>, ctx: ServiceContext) => Promise<unknown>;
