import { readdirSync, readFileSync } from 'node:fs';

/** CPU time (user + system, µs) of each local PostgreSQL and Redis server process, by pid. */
export type StoreCpu = Map<string, number>;

/**
 * CPU time spent so far by the local PostgreSQL and Redis server processes, read from /proc: the
 * share of a route's cost that the api's own CPU figure leaves out. On a machine without /proc (or
 * stores on another host) it is undefined.
 */
export function storeCpu(): StoreCpu | undefined {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return undefined;
  }
  const ticksPerSecond = 100; // USER_HZ, 100 on every Linux the service runs on
  const out: StoreCpu = new Map();
  for (const pid of entries) {
    if (pid.charCodeAt(0) > 57) continue; // not a process
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    } catch {
      continue; // exited meanwhile
    }
    const open = stat.indexOf('(');
    const close = stat.lastIndexOf(')');
    const name = stat.slice(open + 1, close);
    if (name !== 'postgres' && name !== 'redis-server') continue;
    // Fields after the name: state is field 3, utime 14 and stime 15 (man 5 proc).
    const fields = stat.slice(close + 2).split(' ');
    out.set(pid, ((Number(fields[11]) + Number(fields[12])) / ticksPerSecond) * 1e6);
  }
  return out.size ? out : undefined;
}

/**
 * CPU time the stores spent between two readings (µs). A process that started meanwhile counts
 * whole; one that exited meanwhile took its time with it (the api's pool keeps its connections
 * through a run, so that is rare), so this is a lower bound, never negative.
 */
export function storeCpuBetween(before: StoreCpu | undefined, after: StoreCpu | undefined): number | undefined {
  if (!before || !after) return undefined;
  let micros = 0;
  for (const [pid, t] of after) micros += Math.max(0, t - (before.get(pid) ?? 0));
  return micros;
}
