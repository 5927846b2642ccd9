import { Arg, Ctx, Field, Int, Mutation, ObjectType, Resolver } from 'type-graphql';
import { deleteGpsData } from '../../shared/commands/gpsPoints';
import { badRequest, validationError } from '../../shared/errors';
import { authorizePermission } from '../../shared/policies';
import { z, zChars, zDateTime } from '../../shared/zod';
import type { GqlContext } from './context';

/**
 * The filters as REST spells them: a device identifier of 1 to 100 characters (an empty one is a
 * 400, never "every device") and a date-time whose day exists (2027-02-30 is a 400, not 2 March).
 */
const deleteArgs = z.object({
  deviceId: zChars({ trim: true, min: 1, max: 100 }).nullish(),
  before: zDateTime().nullish(),
});

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
    const r = deleteArgs.safeParse({ deviceId, before });
    if (!r.success) throw validationError(r.error, 'args');
    if (r.data.deviceId == null && r.data.before == null)
      throw badRequest('deviceId or before is required (refusing to delete every GPS point)');
    return deleteGpsData(ctx.services, {
      deviceId: r.data.deviceId ?? null,
      before: r.data.before == null ? null : new Date(r.data.before),
    });
  }
}
