import { AppModel } from './AppModel';

/** Common base for tables with updated_at: keeps it current on every update and patch. */
export class BaseModel extends AppModel {
  updated_at?: Date;

  override $beforeUpdate(): void {
    this.updated_at = new Date();
  }
}
