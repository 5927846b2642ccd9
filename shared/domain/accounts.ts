import { z } from '../zod';
import { PASSWORD_MAX, PASSWORD_MIN } from './passwords';

/** Spec §8: 3-30 characters, letters, digits, underscore. */
const USERNAME_PATTERN = /^[A-Za-z0-9_]{3,30}$/;

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

/** A new password (registration, email link, reset): the length bounds of shared/domain/passwords. */
export const zNewPassword = () =>
  z
    .string()
    .min(PASSWORD_MIN, { message: `must be at least ${PASSWORD_MIN} characters` })
    .max(PASSWORD_MAX);

/** A token from an account mail (registration, verification, email change or link, reset). */
export const zEmailedToken = () => z.string().min(16, { message: 'is not a valid token' }).max(200);
