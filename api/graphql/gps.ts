import { Arg, Ctx, Field, Int, Mutation, ObjectType, Resolver } from 'type-graphql';
import { deleteGpsData } from '../../shared/commands/gpsPoints';
import { badRequest } from '../../shared/errors';
import { authorizePermission } from '../../shared/policies';
import type { GqlContext } from './context';

@ObjectType({ simpleResolvers: true, description: 'Outcome of deleteGpsData' })
export class DeleteGpsDataResult {
  @Field(() => Int, { description: 'Points deleted' })
  deleted!: number;

  @Field(() => Int, { description: 'Matching points kept because they belong to a trip (delete the trip first)' })
  keptOnTrips!: number;
}

@Resolver()
export class GpsResolver {
  /**
   * Bulk deletion of GPS points (spec §4.16 deleteGpsData) by device identifier and/or age. Like
   * DELETE /v1/gps/{id}, it needs gps:delete and never removes points that belong to a trip.
   */
  @Mutation(() => DeleteGpsDataResult, {
    nullable: true,
    description:
      'Delete GPS points of a device and/or older than a time; at least one filter. Points on trips are kept. Needs gps:delete.',
  })
  async deleteGpsData(
    @Ctx() ctx: GqlContext,
    @Arg('deviceId', () => String, { nullable: true }) deviceId?: string | null,
    @Arg('before', () => String, { nullable: true, description: 'ISO 8601; points with an earlier timestamp' })
    before?: string | null,
  ): Promise<DeleteGpsDataResult> {
    authorizePermission(ctx.principal, 'gps:delete');
    if (!deviceId && !before) throw badRequest('deviceId or before is required (refusing to delete every GPS point)');
    const cutoff = before ? new Date(before) : null;
    if (before && (!/^\d{4}-\d{2}-\d{2}T/.test(before) || Number.isNaN(cutoff!.getTime())))
      throw badRequest('before: must be an ISO 8601 date-time');
    return deleteGpsData(ctx.services, { deviceId: deviceId || null, before: cutoff });
  }
}
