import { EARTH_RADIUS_KM, haversineKm } from '../geo';

export interface IndexedFence {
  id: string;
  name: string;
  latitude: number;
  longitude: number;
  radius_km: number;
  min_dwell_seconds: number;
  metadata: Record<string, unknown> | null;
}

/** Grid cell size in degrees (about 28 km north-south). */
const CELL_DEG = 0.25;
/** A fence whose bounding box covers more cells than this is checked for every point instead. */
const MAX_CELLS_PER_FENCE = 256;
/** Degrees of arc per km on the sphere the exact test (haversineKm) measures on. */
const DEG_PER_KM = 180 / (Math.PI * EARTH_RADIUS_KM);
/** Slack added to the box, so that rounding never leaves out a point the exact test counts. */
const BOX_PAD_DEG = 1e-9;
const rad = (deg: number) => (deg * Math.PI) / 180;

const cellOf = (deg: number) => Math.floor(deg / CELL_DEG);
const cellKey = (row: number, col: number) => row * 4096 + col;

/**
 * Spatial pre-filter of circular fences: a uniform latitude/longitude grid where each fence is
 * listed in every cell its bounding box touches; very large fences (or ones near a pole or the
 * antimeridian) go in a short list checked for every point. `candidates()` returns a superset of the
 * fences containing the point; `contains()`/`distanceKm()` give the exact answer.
 */
export class GeofenceIndex {
  readonly byId = new Map<string, IndexedFence>();
  private readonly cells = new Map<number, IndexedFence[]>();
  private readonly everywhere: IndexedFence[] = [];

  constructor(fences: IndexedFence[]) {
    for (const f of fences) this.add(f);
  }

  get size(): number {
    return this.byId.size;
  }

  private add(f: IndexedFence): void {
    this.byId.set(f.id, f);
    // The circle's bounding box on the sphere: its angular radius north and south, and east and
    // west the widest longitude it reaches, asin(sin δ / cos φ) (a fence around a pole reaches
    // every longitude: north or south of the poles below sends it to the short list).
    const delta = f.radius_km * DEG_PER_KM;
    const dLat = delta + BOX_PAD_DEG;
    const reach = Math.sin(rad(Math.min(delta, 90))) / Math.max(Math.cos(rad(f.latitude)), 1e-12);
    const dLng = reach >= 1 ? 360 : (Math.asin(reach) * 180) / Math.PI + BOX_PAD_DEG;
    const south = f.latitude - dLat;
    const north = f.latitude + dLat;
    const west = f.longitude - dLng;
    const east = f.longitude + dLng;
    const rows = cellOf(north) - cellOf(south) + 1;
    const cols = cellOf(east) - cellOf(west) + 1;
    if (north >= 90 || south <= -90 || west < -180 || east >= 180 || rows * cols > MAX_CELLS_PER_FENCE) {
      this.everywhere.push(f);
      return;
    }
    for (let r = cellOf(south); r <= cellOf(north); r++)
      for (let c = cellOf(west); c <= cellOf(east); c++) {
        const k = cellKey(r, c);
        const list = this.cells.get(k);
        if (list) list.push(f);
        else this.cells.set(k, [f]);
      }
  }

  /** Fences whose bounding box may contain the point. */
  candidates(lat: number, lng: number): IndexedFence[] {
    const cell = this.cells.get(cellKey(cellOf(lat), cellOf(lng)));
    if (!cell) return this.everywhere;
    return this.everywhere.length ? cell.concat(this.everywhere) : cell;
  }

  /** Fences that contain the point (exact haversine test on the candidates). */
  containing(lat: number, lng: number): IndexedFence[] {
    return this.candidates(lat, lng).filter((f) => distanceKm(f, lat, lng) <= f.radius_km);
  }
}

export const distanceKm = (f: IndexedFence, lat: number, lng: number) => haversineKm(lat, lng, f.latitude, f.longitude);

/** The reference: every fence tested for every point (what the index replaces; kept for the benchmark). */
export function containingNaive(fences: IndexedFence[], lat: number, lng: number): IndexedFence[] {
  return fences.filter((f) => distanceKm(f, lat, lng) <= f.radius_km);
}
