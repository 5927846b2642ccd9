/**
 * AIS (ITU-R M.1371) vocabulary shared by the ingesting worker and everything that reads vessels:
 * the merged state of one vessel, its push shape (spec §6 vesselsUpdate) and the code tables.
 */

/** Navigational status, ITU-R M.1371 message 1-3 field (labels as rendered by gpsd's AIVDM reference). */
export const NAV_STATUS_LABELS: Readonly<Record<number, string>> = {
  0: 'Under way using engine',
  1: 'At anchor',
  2: 'Not under command',
  3: 'Restricted manoeuverability',
  4: 'Constrained by her draught',
  5: 'Moored',
  6: 'Aground',
  7: 'Engaged in fishing',
  8: 'Under way sailing',
  9: 'Reserved for future amendment of navigational status for HSC',
  10: 'Reserved for future amendment of navigational status for WIG',
  11: 'Power-driven vessel towing astern (regional use)',
  12: 'Power-driven vessel pushing ahead or towing alongside (regional use)',
  13: 'Reserved for future use',
  14: 'AIS-SART is active',
  15: 'Not defined (default)',
};

const TYPE_GROUPS: Record<number, string> = {
  2: 'Wing in ground (WIG)',
  4: 'High speed craft (HSC)',
  6: 'Passenger',
  7: 'Cargo',
  8: 'Tanker',
  9: 'Other type',
};
const TYPE_SECOND_DIGIT = [
  'all ships of this type',
  'hazardous category A',
  'hazardous category B',
  'hazardous category C',
  'hazardous category D',
  'reserved for future use',
  'reserved for future use',
  'reserved for future use',
  'reserved for future use',
  'no additional information',
];
const TYPE_SPECIAL: Record<number, string> = {
  30: 'Fishing',
  31: 'Towing',
  32: 'Towing: length exceeds 200m or breadth exceeds 25m',
  33: 'Dredging or underwater ops',
  34: 'Diving ops',
  35: 'Military ops',
  36: 'Sailing',
  37: 'Pleasure craft',
  38: 'Reserved',
  39: 'Reserved',
  50: 'Pilot vessel',
  51: 'Search and rescue vessel',
  52: 'Tug',
  53: 'Port tender',
  54: 'Anti-pollution equipment',
  55: 'Law enforcement',
  56: 'Spare - local vessel',
  57: 'Spare - local vessel',
  58: 'Medical transport',
  59: 'Noncombatant ship according to RR Resolution No. 18',
};

/** Type of ship and cargo (ITU-R M.1371 table 53); null for 0 ("not available") and out-of-range codes. */
export function shipTypeLabel(code: number | null): string | null {
  if (code === null || code <= 0 || code > 99) return null;
  if (code < 20) return 'Reserved for future use';
  if (TYPE_SPECIAL[code]) return TYPE_SPECIAL[code];
  const group = TYPE_GROUPS[Math.floor(code / 10)];
  return group ? `${group}, ${TYPE_SECOND_DIGIT[code % 10]}` : null;
}

export function navStatusLabel(code: number | null): string | null {
  return code === null ? null : (NAV_STATUS_LABELS[code] ?? null);
}

/** What one decoded report says about a vessel; absent fields are not in the report, null means "not available". */
export interface VesselReport {
  mmsi: number;
  name?: string | null;
  ship_type?: number | null;
  nav_status?: number | null;
  length?: number | null;
  beam?: number | null;
  lat?: number | null;
  lng?: number | null;
  heading?: number | null;
  course?: number | null;
  speed_kmh?: number | null;
}

/** A vessel as pushed in vesselsUpdate (spec §6). */
export interface VesselPush {
  mmsi: number;
  name: string | null;
  ship_type: number | null;
  ship_type_label: string | null;
  nav_status: number | null;
  nav_status_label: string | null;
  length: number | null;
  beam: number | null;
  lat: number | null;
  lng: number | null;
  heading: number | null;
  course: number | null;
  speed_kmh: number | null;
}

/** Merged state: the push fields plus when it was last heard (ms since the epoch). */
export interface VesselState extends VesselPush {
  seen: number;
}

export function emptyVessel(mmsi: number, now: number): VesselState {
  return {
    mmsi,
    name: null,
    ship_type: null,
    ship_type_label: null,
    nav_status: null,
    nav_status_label: null,
    length: null,
    beam: null,
    lat: null,
    lng: null,
    heading: null,
    course: null,
    speed_kmh: null,
    seen: now,
  };
}

/** Applies a report to a state in place; true when a pushed field changed. */
export function mergeVessel(state: VesselState, r: VesselReport, now: number): boolean {
  let changed = false;
  const s = state as unknown as Record<string, unknown>;
  for (const k in r) {
    if (k === 'mmsi') continue;
    const v = (r as unknown as Record<string, unknown>)[k];
    if (v !== undefined && s[k] !== v) {
      s[k] = v;
      changed = true;
    }
  }
  if (r.ship_type !== undefined) state.ship_type_label = shipTypeLabel(state.ship_type);
  if (r.nav_status !== undefined) state.nav_status_label = navStatusLabel(state.nav_status);
  state.seen = now;
  return changed;
}

export function presentVessel(s: VesselState): VesselPush {
  return {
    mmsi: s.mmsi,
    name: s.name,
    ship_type: s.ship_type,
    ship_type_label: s.ship_type_label,
    nav_status: s.nav_status,
    nav_status_label: s.nav_status_label,
    length: s.length,
    beam: s.beam,
    lat: s.lat,
    lng: s.lng,
    heading: s.heading,
    course: s.course,
    speed_kmh: s.speed_kmh,
  };
}
