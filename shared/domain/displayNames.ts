import { z, zChars } from '../zod';

/**
 * Names that other people read as an identity: a role's name (beside the system roles, in every
 * user's role list and in the rolesUpdated push) and an OAuth client's name (on the consent screen,
 * where a client named like a first-party app asks for a user's account). Such a name must look like
 * what it is: "Admin\u200B", "Ad\u00ADmin" or "\u0410dmin" (a Cyrillic А) looked exactly like the
 * system role "Admin" and were accepted beside it. Free text (descriptions, notes) is not a name
 * and keeps every character.
 */

/**
 * Characters that draw nothing or change how the text around them is drawn: controls (Cc), format
 * characters (Cf: zero-width space and joiners, soft hyphen, bidirectional marks and overrides,
 * tags), line and paragraph separators, every default-ignorable code point (variation selectors,
 * Hangul fillers, the combining grapheme joiner), and the braille blank U+2800, which draws as a
 * space but is no whitespace a trim removes.
 */
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}\u2800]/u;

/**
 * The scripts whose letters look alike (Latin a, Cyrillic а, Greek α; Latin o, Cyrillic о, Greek
 * ο): a name may use letters of one of them, never two (UTS #39's single-script rule for them).
 * Other scripts may appear beside them (`Team 東京`), and characters of no script of their own
 * (digits, punctuation, emoji, combining marks: Common and Inherited) never count.
 */
const LOOK_ALIKE_SCRIPTS: Array<[string, RegExp]> = [
  ['Latin', /\p{Script=Latin}/u],
  ['Greek', /\p{Script=Greek}/u],
  ['Cyrillic', /\p{Script=Cyrillic}/u],
];

const hex = (c: string) => `U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;

/** Why `name` cannot be shown as an identity, or null when it can. */
export function displayNameProblem(name: string): string | null {
  const invisible = INVISIBLE.exec(name);
  if (invisible) return `must not contain invisible or formatting characters (${hex(invisible[0])})`;
  const scripts = LOOK_ALIKE_SCRIPTS.filter(([, letters]) => letters.test(name)).map(([script]) => script);
  if (scripts.length > 1) return `must not mix letters of different scripts (${scripts.join(' and ')})`;
  return null;
}

/**
 * A name shown to other people as an identity (see above), of 1 to `max` characters. `base` is
 * where trimming and any normalising happen (role names are kept in NFC); the rule and the
 * length apply to its result.
 */
export const zDisplayName = (max: number, base: z.ZodType<string, z.ZodTypeDef, unknown> = z.string().trim()) =>
  zChars(
    { min: 1, max },
    base.superRefine((name, ctx) => {
      const problem = displayNameProblem(name);
      if (problem) ctx.addIssue({ code: z.ZodIssueCode.custom, message: problem });
    }),
  ).openapi({
    description:
      'A name shown to others: no invisible or formatting characters, and no mix of Latin, Greek and Cyrillic letters',
  });
