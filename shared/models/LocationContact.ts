import { AppModel } from './AppModel';

/** A person to reach at a location (spec §2 Location contact). */
export class LocationContact extends AppModel {
  static override tableName = 'location_contacts';
  id!: string;
  location_id!: string;
  name!: string;
  phone!: string | null;
  email!: string | null;
  role!: string | null;
  created_at!: Date;
}
