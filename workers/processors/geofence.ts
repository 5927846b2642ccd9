import { evaluateGeofences } from '../../shared/commands/evaluateGeofences';
import type { Processor } from './types';

/** Evaluates the job's GPS points against the active geofences and publishes enter/exit events. */
export const geofenceProcessor: Processor<'geofence'> = async (job, ctx) => {
  const events = await evaluateGeofences(ctx, job.data.gpsPointIds);
  return { points: job.data.gpsPointIds.length, events: events.length };
};
