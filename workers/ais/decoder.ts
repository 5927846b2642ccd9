import { AisDecode } from 'ggencoder';
import { emptyVessel, mergeVessel, VesselReport, VesselState } from '../../shared/domain/ais';

/** How long the parts of a multi-part message wait for the rest before they are dropped (and counted). */
export const MULTIPART_TIMEOUT_MS = 2000;

/** XOR of the characters between `!` and `*`, as two upper-case hex digits. */
export function nmeaChecksum(body: string): string {
  let x = 0;
  for (let i = 0; i < body.length; i++) x ^= body.charCodeAt(i);
  return (x < 16 ? '0' : '') + x.toString(16).toUpperCase();
}

interface Pending {
  parts: string[];
  got: number;
  first: number;
}

/**
 * Fewest payload bits of a complete message of each tracked type (ITU-R M.1371): 168 for position
 * reports (1–3, 18) and for part B of type 24, 160 for part A, 312 for type 19 and 420 for type 5
 * (424 with its spare bits, which some transmitters leave out). A shorter payload decodes into
 * zeros where its fields are missing: a position report cut off after the MMSI put a vessel at
 * 0°N 0°E. It is counted as an error and skipped.
 */
function minimumBits(type: number, part: number | undefined): number {
  if (type === 5) return 420;
  if (type === 19) return 312;
  if (type === 24) return part === 0 ? 160 : 168;
  if (type <= 3 || type === 18) return 168;
  return 0; // a type we do not track: not decoded into a vessel, whatever its length
}

/** Bits in a message's payload: 6 per character of every part, less the last part's fill bits. */
function payloadBits(parts: string[]): number {
  let bits = 0;
  for (const p of parts) bits += 6 * (p.split(',')[5]?.length ?? 0);
  const fill = Number(parts[parts.length - 1].split(',')[6]?.[0]);
  return bits - (Number.isInteger(fill) ? fill : 0);
}

const KNOTS_TO_KMH = 1.852;
const round = (n: number, digits: number) => Math.round(n * 10 ** digits) / 10 ** digits;

/** Converts a ggencoder decode into what it says about the vessel; null for types we do not track. */
export function toReport(d: AisDecode): VesselReport | null {
  const mmsi = d.immsi;
  if (d.aistype === undefined || mmsi === undefined || mmsi <= 0) return null;
  const r: VesselReport = { mmsi };
  const type = d.aistype;
  if (type === 1 || type === 2 || type === 3 || type === 18 || type === 19) {
    // "Not available" (91 / 181) and every other value outside ±90 / ±180 is no position:
    // ggencoder leaves lat/lon unset only past the positive limits and passes −95 / −181.5 on.
    r.lat = d.lat === undefined || !(Math.abs(d.lat) <= 90) ? null : round(d.lat, 6);
    r.lng = d.lon === undefined || !(Math.abs(d.lon) <= 180) ? null : round(d.lon, 6);
    r.heading = d.hdg === undefined || d.hdg >= 360 ? null : d.hdg; // 511 = not available
    r.course = d.cog === undefined || d.cog >= 360 ? null : round(d.cog, 1); // 3600 = not available
    r.speed_kmh = d.sog === undefined || d.sog >= 102.3 ? null : round(d.sog * KNOTS_TO_KMH, 2); // 1023 = n/a
    if (type <= 3) r.nav_status = d.navstatus ?? null;
  }
  if (type === 5 || type === 19 || (type === 24 && d.part === 0)) {
    const name = (d.shipname ?? '').replace(/@+$/, '').trim();
    r.name = name === '' ? null : name;
  }
  if (type === 5 || type === 19 || (type === 24 && d.part === 1)) {
    r.ship_type = d.cargo ? d.cargo : null;
    if (d.dimA !== undefined && d.dimB !== undefined) {
      const length = d.dimA + d.dimB;
      const beam = (d.dimC ?? 0) + (d.dimD ?? 0);
      r.length = length > 0 ? length : null;
      r.beam = beam > 0 ? beam : null;
    }
  }
  if (type !== 1 && type !== 2 && type !== 3 && type !== 5 && type !== 18 && type !== 19 && type !== 24) return null;
  return r;
}

/**
 * The decoding half of AIS ingestion: NMEA framing (checksum, multi-part reassembly by sequence id
 * and channel with a timeout), decoding with ggencoder, and the merge of every report into the
 * latest state per MMSI. Pure and synchronous: the feed connection and Redis live elsewhere.
 */
export class AisPipeline {
  /** Sentences accepted (a multi-part message counts each part). */
  sentences = 0;
  /** Sentences skipped: bad checksum, bad framing, undecodable payload, incomplete multi-part. */
  errors = 0;
  readonly vessels = new Map<number, VesselState>();
  /** MMSIs whose pushed fields changed since the last takeDirty(). */
  private dirty = new Set<number>();
  private readonly pending = new Map<string, Pending>();

  constructor(private readonly multipartTimeoutMs = MULTIPART_TIMEOUT_MS) {}

  /** One line from the feed (CR/LF already stripped or not). Never throws. */
  line(raw: string, now = Date.now()): void {
    const start = raw.indexOf('!');
    if (start < 0) {
      if (raw.trim() !== '') this.errors++;
      return;
    }
    const star = raw.lastIndexOf('*');
    const sentence = raw.slice(start, star + 3);
    if (
      star < start ||
      star + 3 > raw.length ||
      nmeaChecksum(raw.slice(start + 1, star)) !== raw.slice(star + 1, star + 3).toUpperCase()
    ) {
      this.errors++;
      return;
    }
    const f = sentence.split(',');
    const tag = f[0];
    if (f.length !== 7 || (tag.slice(3) !== 'VDM' && tag.slice(3) !== 'VDO')) {
      this.errors++;
      return;
    }
    const count = Number(f[1]);
    const num = Number(f[2]);
    if (!(count >= 1 && count <= 9 && num >= 1 && num <= count)) {
      this.errors++;
      return;
    }
    this.sentences++;
    if (count === 1) {
      this.decode([sentence], now);
      return;
    }
    const key = `${tag},${f[3]},${f[4]},${count}`;
    let p = this.pending.get(key);
    if (num === 1) {
      if (p) this.errors += p.got; // a new message under the same id: the old one never completed
      p = { parts: new Array<string>(count), got: 0, first: now };
      this.pending.set(key, p);
    } else if (!p || p.parts[num - 1] !== undefined || now - p.first > this.multipartTimeoutMs) {
      // A part without its beginning, a repeated part, or a message that took too long.
      this.errors++;
      if (p) {
        this.errors += p.got;
        this.pending.delete(key);
      }
      return;
    }
    p.parts[num - 1] = sentence;
    p.got++;
    if (p.got === count) {
      this.pending.delete(key);
      this.decode(p.parts, now);
    }
  }

  /** Drops multi-part messages that waited longer than the timeout (their parts count as errors). */
  expirePending(now = Date.now()): void {
    for (const [key, p] of this.pending) {
      if (now - p.first > this.multipartTimeoutMs) {
        this.errors += p.got;
        this.pending.delete(key);
      }
    }
  }

  private decode(parts: string[], now: number): void {
    let d: AisDecode;
    try {
      if (parts.length === 1) d = new AisDecode(parts[0]);
      else {
        const session: Record<string, unknown> = {};
        d = new AisDecode(parts[0], session);
        for (let i = 1; i < parts.length; i++) d = new AisDecode(parts[i], session);
      }
    } catch {
      this.errors++;
      return;
    }
    if (d.aistype !== undefined && payloadBits(parts) < minimumBits(d.aistype, d.part)) {
      this.errors++;
      return;
    }
    const report = toReport(d);
    if (report === null) {
      // A well-formed sentence of a type we do not track (4, 21, …) is not an error; garbage is.
      if (d.aistype === undefined || d.error) this.errors++;
      return;
    }
    this.apply(report, now);
  }

  /** Merges a report into the vessel's state. */
  apply(report: VesselReport, now = Date.now()): void {
    let v = this.vessels.get(report.mmsi);
    if (!v) {
      v = emptyVessel(report.mmsi, now);
      this.vessels.set(report.mmsi, v);
    }
    if (mergeVessel(v, report, now)) this.dirty.add(report.mmsi);
  }

  /** The vessels changed since the previous call. */
  takeDirty(): VesselState[] {
    const out: VesselState[] = [];
    for (const mmsi of this.dirty) {
      const v = this.vessels.get(mmsi);
      if (v) out.push(v);
    }
    this.dirty = new Set();
    return out;
  }

  /** Forgets vessels not heard since `cutoff`; returns their MMSIs. */
  expireVessels(cutoff: number): number[] {
    const gone: number[] = [];
    for (const [mmsi, v] of this.vessels) {
      if (v.seen < cutoff) {
        this.vessels.delete(mmsi);
        this.dirty.delete(mmsi);
        gone.push(mmsi);
      }
    }
    return gone;
  }
}
