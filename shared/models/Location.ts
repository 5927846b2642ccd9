import { Model } from 'objection';
import { BaseModel } from './BaseModel';
import { LocationContact } from './LocationContact';

/** A place trips start or end at (spec §2 Location), with its contacts. */
export class Location extends BaseModel {
  static override tableName = 'locations';
  id!: string;
  name!: string;
  street!: string | null;
  zip!: string | null;
  city!: string | null;
  country!: string | null;
  latitude!: number | null;
  longitude!: number | null;
  notes!: string | null;
  is_active!: boolean;
  created_at!: Date;
  declare updated_at: Date;

  contacts?: LocationContact[];

  static override get relationMappings() {
    return {
      contacts: {
        relation: Model.HasManyRelation,
        modelClass: LocationContact,
        join: { from: 'locations.id', to: 'location_contacts.location_id' },
      },
    };
  }
}
