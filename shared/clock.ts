/**
 * The time the two-factor rules (TOTP steps, setup expiry) and the public statistics' per-process
 * one-minute copy read. Production uses the system clock;
 * a test that runs the api in-process moves it forward with `setClockOffset` instead of sleeping.
 */
let offsetMs = 0;

export const clock = {
  now(): number {
    return Date.now() + offsetMs;
  },
  date(): Date {
    return new Date(Date.now() + offsetMs);
  },
};

/** Shifts `clock` by `ms` from the system time (0 restores it). */
export function setClockOffset(ms: number): void {
  offsetMs = ms;
}
