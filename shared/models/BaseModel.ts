import { AppModel } from './AppModel';

/**
 * Common base for tables with updated_at: keeps it current on every update and patch, unless the
 * change names its own instant (a trip's status change: the database clock its started_at/ended_at
 * and history entry carry too).
 */
export class BaseModel extends AppModel {
  updated_at?: Date;

  override $beforeUpdate(): void {
    if (this.updated_at === undefined) this.updated_at = new Date();
  }
}
