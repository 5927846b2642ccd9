import { z } from '../zod';

/** Spec §8: 3-30 characters, letters, digits, underscore. */
export const USERNAME_PATTERN = /^[A-Za-z0-9_]{3,30}$/;

/** A username field (400 naming the field when invalid). */
export const zUsername = () =>
  z.string().regex(USERNAME_PATTERN, { message: 'must be 3-30 characters of letters, digits and underscore' });

/** Email addresses are compared and stored lowercased. */
export const normaliseEmail = (email: string) => email.trim().toLowerCase();

/** An email field, trimmed and lowercased. */
export const zEmail = () =>
  z
    .string()
    .trim()
    .max(320, { message: 'must be at most 320 characters' })
    .email({ message: 'must be an email address' })
    .transform(normaliseEmail);
