import { Arg, Args, Ctx, Field, FieldResolver, Float, Int, ObjectType, Query, Resolver, Root } from 'type-graphql';
import { TRIP_STATUSES } from '../../shared/domain/tripStatus';
import { badRequest } from '../../shared/errors';
import { Trip } from '../../shared/models/Trip';
import { authorizePermission } from '../../shared/policies';
import { camelKeys, CamelKeys } from '../../shared/presenters/camel';
import { GpsPoint, presentGpsPoint } from '../../shared/presenters/gpsPoint';
import { presentTrip, presentTripHistory, tripHistorySchema, tripSchema } from '../../shared/presenters/trip';
import { tripStats } from '../../shared/queries/gpsPoints';
import { findOr404 } from '../../shared/rowLoader';
import { isUuid, z } from '../../shared/zod';
import { GqlContext, idArg } from './context';
import { listCost, PageArgs, pageOf, PageOf } from './pagination';

type TripShape = CamelKeys<z.infer<typeof tripSchema>>;

@ObjectType('GpsPoint', { simpleResolvers: true, description: 'A GPS point, as GET /v1/gps/{id} shows it' })
export class GqlGpsPoint implements CamelKeys<GpsPoint> {
  @Field(() => String) id!: string;
  @Field(() => String, { nullable: true }) deviceId!: string | null;
  @Field(() => String, { nullable: true }) tripId!: string | null;
  @Field(() => Float) latitude!: number;
  @Field(() => Float) longitude!: number;
  @Field(() => Float, { nullable: true }) altitude!: number | null;
  @Field(() => Float, { nullable: true }) heading!: number | null;
  @Field(() => String, { description: 'ISO 8601' }) timestamp!: string;
  @Field(() => Float) speedKmh!: number;
  @Field(() => Float) speedMps!: number;
  @Field(() => Float) speedMph!: number;
  @Field(() => Float) speedKnots!: number;
  @Field(() => Float, { nullable: true }) pdop!: number | null;
  @Field(() => Float, { nullable: true }) hdop!: number | null;
  @Field(() => Float, { nullable: true }) vdop!: number | null;
  @Field(() => String, { description: 'ISO 8601' }) createdAt!: string;
}

@ObjectType('GpsPointPageInfo', { simpleResolvers: true })
export class GqlGpsPointPageInfo {
  @Field(() => Boolean) hasNextPage!: boolean;
  @Field(() => String, { nullable: true, description: 'Pass as `after` for the next page' }) endCursor!: string | null;
}

@ObjectType('GpsPointConnection', {
  simpleResolvers: true,
  description: "A trip's points in track order (timestamp, then insertion)",
})
export class GqlGpsPointConnection {
  @Field(() => [GqlGpsPoint]) nodes!: GqlGpsPoint[];
  @Field(() => GqlGpsPointPageInfo) pageInfo!: GqlGpsPointPageInfo;
}

@ObjectType('TripStatusHistoryEntry', { simpleResolvers: true })
export class GqlTripHistory implements CamelKeys<z.infer<typeof tripHistorySchema>> {
  @Field(() => String) id!: string;
  @Field(() => String) tripId!: string;
  @Field(() => String) oldStatus!: string;
  @Field(() => String) newStatus!: string;
  @Field(() => String, { nullable: true }) changedBy!: string | null;
  @Field(() => Float, { nullable: true }) latitude!: number | null;
  @Field(() => Float, { nullable: true }) longitude!: number | null;
  @Field(() => String, { description: 'ISO 8601' }) changedAt!: string;
}

@ObjectType('Trip', { simpleResolvers: true, description: 'A trip, as GET /v1/trips/{id} shows it' })
export class GqlTrip implements TripShape {
  @Field(() => String) id!: string;
  @Field(() => String) name!: string;
  @Field(() => String, { nullable: true }) description!: string | null;
  @Field(() => String, { description: TRIP_STATUSES.join(', ') }) status!: TripShape['status'];
  @Field(() => Boolean) gpsLoggingEnabled!: boolean;
  @Field(() => String, { nullable: true }) deviceId!: string | null;
  @Field(() => String, { nullable: true }) categoryId!: string | null;
  @Field(() => String, { nullable: true }) originId!: string | null;
  @Field(() => String, { nullable: true }) destinationId!: string | null;
  @Field(() => Float, { nullable: true }) weightKg!: number | null;
  @Field(() => String, { nullable: true }) notes!: string | null;
  @Field(() => [String]) tags!: string[];
  @Field(() => Float, { nullable: true }) startLatitude!: number | null;
  @Field(() => Float, { nullable: true }) startLongitude!: number | null;
  @Field(() => Float, { nullable: true }) endLatitude!: number | null;
  @Field(() => Float, { nullable: true }) endLongitude!: number | null;
  @Field(() => String, { nullable: true }) startedAt!: string | null;
  @Field(() => String, { nullable: true }) endedAt!: string | null;
  @Field(() => String) createdAt!: string;
  @Field(() => String) updatedAt!: string;
  @Field(() => Float, { nullable: true, description: 'trip(id) only' }) distanceKm?: number;
  @Field(() => Int, { nullable: true, description: 'trip(id) only' }) durationSeconds?: number;
}

@ObjectType('TripPage', { simpleResolvers: true })
export class GqlTripPage extends PageOf(GqlTrip) {}

/** Largest `first` of gpsPoints. */
const MAX_POINTS = 1000;

/** Trips (needs trips:read, like GET /v1/trips): the list, one trip, and each trip's points and history. */
@Resolver(() => GqlTrip)
export class TripResolver {
  @Query(() => GqlTripPage, {
    nullable: true,
    description: 'Trips, newest first. Needs trips:read.',
    complexity: listCost(20),
  })
  async trips(
    @Args(() => PageArgs) args: PageArgs,
    @Ctx() ctx: GqlContext,
    @Arg('status', () => String, { nullable: true, description: TRIP_STATUSES.join(', ') }) status?: string | null,
  ): Promise<GqlTripPage> {
    authorizePermission(ctx.principal, 'trips:read');
    const q = Trip.query(ctx.services.db).orderBy([
      { column: 'created_at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ]);
    if (status != null) {
      if (!(TRIP_STATUSES as readonly string[]).includes(status))
        throw badRequest(`status: must be one of ${TRIP_STATUSES.join(', ')}`);
      q.where('status', status);
    }
    const counter = status != null ? { keyed: 'trips_by_status' as const, key: status } : undefined;
    return pageOf(q, args, (t) => camelKeys(presentTrip(t)), { counter });
  }

  @Query(() => GqlTrip, { nullable: true, description: 'A trip with its distance and duration. Needs trips:read.' })
  async trip(@Arg('id', () => String) id: string, @Ctx() ctx: GqlContext): Promise<GqlTrip> {
    authorizePermission(ctx.principal, 'trips:read');
    idArg(id);
    // Both reads in the same turn's batches (as REST does); a missing trip's 404 decides the answer.
    const stats = tripStats(ctx.services.db, id);
    stats.catch(() => undefined);
    const trip = await findOr404(Trip, id, 'trip');
    return camelKeys(presentTrip(trip, await stats));
  }

  @FieldResolver(() => GqlGpsPointConnection, {
    // Nullable: a refused page (a bad \`first\`) is null with its error, the trip still answers.
    nullable: true,
    description: `Points in track order: \`first\` (1 to ${MAX_POINTS}, default 100) after the cursor \`after\``,
    complexity: listCost(100),
  })
  async gpsPoints(
    // The id alone: a whole @Root() of a class type is copied into a new instance per call.
    @Root('id') tripId: string,
    @Ctx() ctx: GqlContext,
    @Arg('first', () => Int, { defaultValue: 100 }) first: number,
    @Arg('after', () => String, { nullable: true }) after?: string | null,
  ): Promise<GqlGpsPointConnection> {
    if (!Number.isInteger(first) || first < 1 || first > MAX_POINTS)
      throw badRequest(`first: must be an integer from 1 to ${MAX_POINTS}`);
    if (after != null && !isUuid(after)) throw badRequest('after: not a cursor of this list');
    const page = await ctx.loaders.tripPoints.load({ tripId, first, after: after ?? null });
    const nodes = page.rows.map((r) => camelKeys(presentGpsPoint(r)));
    return { nodes, pageInfo: { hasNextPage: page.hasNextPage, endCursor: nodes.at(-1)?.id ?? null } };
  }

  @FieldResolver(() => [GqlTripHistory], { description: 'Status changes, oldest first' })
  async history(@Root('id') tripId: string, @Ctx() ctx: GqlContext): Promise<GqlTripHistory[]> {
    const rows = await ctx.loaders.tripHistory.load(tripId);
    return rows.map((h) => camelKeys(presentTripHistory(h)));
  }
}
