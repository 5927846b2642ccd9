import { Arg, Args, Ctx, Field, FieldResolver, Float, Int, ObjectType, Query, Resolver, Root } from 'type-graphql';
import { Device } from '../../shared/models/Device';
import { Geofence } from '../../shared/models/Geofence';
import { Location } from '../../shared/models/Location';
import { TripCategory } from '../../shared/models/TripCategory';
import { TripTemplate } from '../../shared/models/TripTemplate';
import { authorizePermission } from '../../shared/policies';
import { camelKeys, CamelKeys } from '../../shared/presenters/camel';
import { deviceSchema, presentDevice } from '../../shared/presenters/device';
import { geofenceSchema, presentGeofence } from '../../shared/presenters/geofence';
import {
  locationContactSchema,
  locationSchema,
  presentLocation,
  presentLocationContact,
} from '../../shared/presenters/location';
import { presentTripCategory, tripCategorySchema } from '../../shared/presenters/tripCategory';
import { presentTripTemplate, tripTemplateSchema } from '../../shared/presenters/tripTemplate';
import { findOr404 } from '../../shared/rowLoader';
import { versionedValue } from '../../shared/caches/tableVersions';
import type { z } from '../../shared/zod';
import { GqlContext, idArg } from './context';
import { JSONScalar, listCost, pageOf, PageOf, SmallPageArgs } from './pagination';
import { byName } from '../../shared/queries/byName';

type Shape<S extends z.ZodTypeAny> = CamelKeys<z.infer<S>>;

@ObjectType('Device', { simpleResolvers: true })
export class GqlDevice implements Shape<typeof deviceSchema> {
  @Field(() => String) id!: string;
  @Field(() => String) name!: string;
  @Field(() => String, { nullable: true }) description!: string | null;
  @Field(() => String, { nullable: true }) deviceType!: string | null;
  @Field(() => Boolean) isActive!: boolean;
  @Field(() => String, { nullable: true, description: 'Id of the linked tracker API key' }) apiKeyId!: string | null;
  @Field(() => String) createdAt!: string;
  @Field(() => String) updatedAt!: string;
}

@ObjectType('DevicePage', { simpleResolvers: true })
export class GqlDevicePage extends PageOf(GqlDevice) {}

@ObjectType('Geofence', { simpleResolvers: true })
export class GqlGeofence implements Shape<typeof geofenceSchema> {
  @Field(() => String) id!: string;
  @Field(() => String) name!: string;
  @Field(() => String, { nullable: true }) description!: string | null;
  @Field(() => Float) latitude!: number;
  @Field(() => Float) longitude!: number;
  @Field(() => Float) radiusKm!: number;
  @Field(() => Boolean) isActive!: boolean;
  @Field(() => Int) minDwellSeconds!: number;
  @Field(() => JSONScalar, { nullable: true }) metadata!: Record<string, unknown> | null;
  @Field(() => String) createdAt!: string;
  @Field(() => String) updatedAt!: string;
}

@ObjectType('GeofencePage', { simpleResolvers: true })
export class GqlGeofencePage extends PageOf(GqlGeofence) {}

@ObjectType('LocationContact', { simpleResolvers: true })
export class GqlLocationContact implements Shape<typeof locationContactSchema> {
  @Field(() => String) id!: string;
  @Field(() => String) locationId!: string;
  @Field(() => String) name!: string;
  @Field(() => String, { nullable: true }) phone!: string | null;
  @Field(() => String, { nullable: true }) email!: string | null;
  @Field(() => String, { nullable: true }) role!: string | null;
  @Field(() => String) createdAt!: string;
}

@ObjectType('Location', { simpleResolvers: true })
export class GqlLocation implements Omit<Shape<typeof locationSchema>, 'contacts'> {
  @Field(() => String) id!: string;
  @Field(() => String) name!: string;
  @Field(() => String, { nullable: true }) street!: string | null;
  @Field(() => String, { nullable: true }) zip!: string | null;
  @Field(() => String, { nullable: true }) city!: string | null;
  @Field(() => String, { nullable: true }) country!: string | null;
  @Field(() => Float, { nullable: true }) latitude!: number | null;
  @Field(() => Float, { nullable: true }) longitude!: number | null;
  @Field(() => String, { nullable: true }) notes!: string | null;
  @Field(() => Boolean) isActive!: boolean;
  @Field(() => String) createdAt!: string;
  @Field(() => String) updatedAt!: string;
}

@ObjectType('LocationPage', { simpleResolvers: true })
export class GqlLocationPage extends PageOf(GqlLocation) {}

@ObjectType('TripCategory', { simpleResolvers: true, description: 'A node of the category tree' })
export class GqlTripCategory implements Shape<typeof tripCategorySchema> {
  @Field(() => String) id!: string;
  @Field(() => String, { nullable: true }) parentId!: string | null;
  @Field(() => String) name!: string;
  @Field(() => String, { nullable: true }) description!: string | null;
  @Field(() => String, { nullable: true }) color!: string | null;
  @Field(() => Boolean) isActive!: boolean;
  @Field(() => Int) sortOrder!: number;
  @Field(() => String) createdAt!: string;
  @Field(() => String) updatedAt!: string;
  @Field(() => [GqlTripCategory], { description: 'Sub-categories by sort order, then name' })
  children!: GqlTripCategory[];
}

@ObjectType('TripTemplate', { simpleResolvers: true })
export class GqlTripTemplate implements Shape<typeof tripTemplateSchema> {
  @Field(() => String) id!: string;
  @Field(() => String) name!: string;
  @Field(() => String, { nullable: true }) description!: string | null;
  @Field(() => String, { nullable: true }) categoryId!: string | null;
  @Field(() => String, { nullable: true }) originId!: string | null;
  @Field(() => String, { nullable: true }) destinationId!: string | null;
  @Field(() => String, { nullable: true }) deviceId!: string | null;
  @Field(() => Boolean) gpsLoggingEnabled!: boolean;
  @Field(() => Float, { nullable: true }) defaultWeightKg!: number | null;
  @Field(() => String, { nullable: true }) notes!: string | null;
  @Field(() => [String]) tags!: string[];
  @Field(() => String) createdAt!: string;
  @Field(() => String) updatedAt!: string;
}

/** Devices and geofences, each with the permission of its REST reads. */
@Resolver()
export class DeviceGeofenceResolver {
  @Query(() => GqlDevicePage, {
    nullable: true,
    description: 'Devices by name. Needs devices:read.',
    complexity: listCost(10),
  })
  devices(@Args(() => SmallPageArgs) args: SmallPageArgs, @Ctx() ctx: GqlContext): Promise<GqlDevicePage> {
    authorizePermission(ctx.principal, 'devices:read');
    return pageOf(Device.query(ctx.services.db).orderByRaw(byName()), args, (d) => camelKeys(presentDevice(d)));
  }

  @Query(() => GqlDevice, { nullable: true, description: 'Needs devices:read.' })
  async device(@Arg('id', () => String) id: string, @Ctx() ctx: GqlContext): Promise<GqlDevice> {
    authorizePermission(ctx.principal, 'devices:read');
    return camelKeys(presentDevice(await findOr404(Device, idArg(id), 'device')));
  }

  @Query(() => GqlGeofencePage, {
    nullable: true,
    description: 'Geofences by name. Needs geofences:read.',
    complexity: listCost(10),
  })
  geofences(@Args(() => SmallPageArgs) args: SmallPageArgs, @Ctx() ctx: GqlContext): Promise<GqlGeofencePage> {
    authorizePermission(ctx.principal, 'geofences:read');
    return pageOf(Geofence.query(ctx.services.db).orderByRaw(byName()), args, (g) => camelKeys(presentGeofence(g)));
  }

  @Query(() => GqlGeofence, { nullable: true, description: 'Needs geofences:read.' })
  async geofence(@Arg('id', () => String) id: string, @Ctx() ctx: GqlContext): Promise<GqlGeofence> {
    authorizePermission(ctx.principal, 'geofences:read');
    return camelKeys(presentGeofence(await findOr404(Geofence, idArg(id), 'geofence')));
  }
}

/** Locations with their contacts (batched per request). */
@Resolver(() => GqlLocation)
export class LocationResolver {
  @Query(() => GqlLocationPage, {
    nullable: true,
    description: 'Locations by name. Needs locations:read.',
    complexity: listCost(10),
  })
  locations(@Args(() => SmallPageArgs) args: SmallPageArgs, @Ctx() ctx: GqlContext): Promise<GqlLocationPage> {
    authorizePermission(ctx.principal, 'locations:read');
    return pageOf(Location.query(ctx.services.db).orderByRaw(byName()), args, (l) => camelKeys(presentLocation(l)));
  }

  @Query(() => GqlLocation, { nullable: true, description: 'Needs locations:read.' })
  async location(@Arg('id', () => String) id: string, @Ctx() ctx: GqlContext): Promise<GqlLocation> {
    authorizePermission(ctx.principal, 'locations:read');
    return camelKeys(presentLocation(await findOr404(Location, idArg(id), 'location')));
  }

  @FieldResolver(() => [GqlLocationContact], { description: 'By name' })
  async contacts(@Root('id') locationId: string, @Ctx() ctx: GqlContext): Promise<GqlLocationContact[]> {
    const rows = await ctx.loaders.locationContacts.load(locationId);
    return rows.map((c) => camelKeys(presentLocationContact(c)));
  }
}

interface CategoryTree {
  roots: GqlTripCategory[];
  nodes: Map<string, GqlTripCategory>;
}

/**
 * The category tree and the template list, kept while their table is unchanged (versionedValue): a
 * repeat costs one version read, not a read and presentation of every row. Never changed once built.
 */
const categoryTrees = versionedValue<CategoryTree>(['trip_categories']);
const templateLists = versionedValue<GqlTripTemplate[]>(['trip_templates']);

/** Every category in one statement, linked into a tree (ordered by sort order, then name). */
function categoryTree(ctx: GqlContext): Promise<CategoryTree> {
  const db = ctx.services.db;
  return categoryTrees(db, () => buildCategoryTree(db));
}

async function buildCategoryTree(db: GqlContext['services']['db']): Promise<CategoryTree> {
  const rows = await TripCategory.query(db).orderByRaw(`sort_order, ${byName()}`);
  const nodes = new Map<string, GqlTripCategory>(
    rows.map((r) => [r.id, { ...camelKeys(presentTripCategory(r)), children: [] }]),
  );
  const roots: GqlTripCategory[] = [];
  for (const n of nodes.values()) {
    const parent = n.parentId ? nodes.get(n.parentId) : undefined;
    (parent ? parent.children : roots).push(n);
  }
  return { roots, nodes };
}

/** Trip categories (a tree) and trip templates. */
@Resolver()
export class TripCatalogResolver {
  @Query(() => [GqlTripCategory], {
    nullable: true,
    description: 'The category tree: top-level categories with their children. Needs trip_categories:read.',
  })
  async tripCategories(@Ctx() ctx: GqlContext): Promise<GqlTripCategory[]> {
    authorizePermission(ctx.principal, 'trip_categories:read');
    return (await categoryTree(ctx)).roots;
  }

  @Query(() => GqlTripCategory, {
    nullable: true,
    description: 'One category with its subtree. Needs trip_categories:read.',
  })
  async tripCategory(@Arg('id', () => String) id: string, @Ctx() ctx: GqlContext): Promise<GqlTripCategory> {
    authorizePermission(ctx.principal, 'trip_categories:read');
    const row = await findOr404(TripCategory, idArg(id), 'trip category');
    return (await categoryTree(ctx)).nodes.get(row.id)!;
  }

  @Query(() => [GqlTripTemplate], { nullable: true, description: 'Trip templates by name. Needs trips:read.' })
  async tripTemplates(@Ctx() ctx: GqlContext): Promise<GqlTripTemplate[]> {
    authorizePermission(ctx.principal, 'trips:read');
    const db = ctx.services.db;
    return templateLists(db, async () =>
      (await TripTemplate.query(db).orderByRaw(byName())).map((t) => camelKeys(presentTripTemplate(t))),
    );
  }
}
