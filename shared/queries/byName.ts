/**
 * The one order of every list "by name": without regard to case first (`alpha` beside `Alpha`,
 * before `beta`), then the exact name, then the id, so ties come back in a stable order page after
 * page. `table` qualifies the columns in a join (`roles` in a user's roles).
 */
export function byName(table?: string, tieBreak = 'id'): string {
  const t = table ? `${table}.` : '';
  return `lower(${t}name), ${t}name, ${t}${tieBreak}`;
}
