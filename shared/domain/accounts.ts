import { z, zChars } from '../zod';
import { PASSWORD_MAX, PASSWORD_MIN } from './passwords';

/** Spec §8: 3-30 characters, letters, digits, underscore. */
const USERNAME_PATTERN = /^[A-Za-z0-9_]{3,30}$/;

/** A username field (400 naming the field when invalid). */
export const zUsername = () =>
  z.string().regex(USERNAME_PATTERN, { message: 'must be 3-30 characters of letters, digits and underscore' });

/** Email addresses are compared and stored lowercased. */
export const normaliseEmail = (email: string) => email.trim().toLowerCase();

/**
 * An email field, trimmed and lowercased. At most 254 characters with at most 64 before the `@`
 * (RFC 5321's limits, which mail servers enforce): a longer address could never receive the
 * verification mail, and it is the email account's platform user id (255 characters at most).
 */
export const zEmail = () =>
  zChars({ max: 254 }, z.string().trim().email({ message: 'must be an email address' }))
    .refine((e) => e.lastIndexOf('@') <= 64, { message: 'must have at most 64 characters before the @' })
    .transform(normaliseEmail);

/**
 * An address to look a user up by: any address the service may hold, lowercased. Sign-in
 * providers' addresses are kept up to 320 characters (what they send), so a lookup must reach them
 * too; zEmail's tighter limits apply to addresses the service itself is asked to mail.
 */
export const zLookupEmail = () =>
  zChars({ max: 320 }, z.string().trim().email({ message: 'must be an email address' })).transform(normaliseEmail);

/** A new password (registration, email link, reset): the length bounds of shared/domain/passwords. */
export const zNewPassword = () => zChars({ min: PASSWORD_MIN, max: PASSWORD_MAX });

/** A token from an account mail (registration, verification, email change or link, reset). */
export const zEmailedToken = () => zChars({ min: 16, minMessage: 'is not a valid token', max: 200 });
