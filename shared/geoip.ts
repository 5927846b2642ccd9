import { BlockList, isIP } from 'node:net';

/** Where an address is, as audit events store it (spec §2): all null when unknown. */
export interface GeoFields {
  country_code: string | null;
  country_name: string | null;
  city: string | null;
  region: string | null;
}

const NONE: GeoFields = { country_code: null, country_name: null, city: null, region: null };

/** Private, loopback, link-local and other non-routable ranges: never looked up. */
const NON_PUBLIC = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.168.0.0', 16],
] as const)
  NON_PUBLIC.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
] as const)
  NON_PUBLIC.addSubnet(net, bits, 'ipv6');

interface GeoIpLite {
  lookup(ip: string): { country: string; region: string; city: string } | null;
}
let geoip: GeoIpLite | undefined;
const countryNames = new Intl.DisplayNames(['en'], { type: 'region' });

/**
 * Loads geoip-lite's local database (about a second and 150 MB, once per process). In production the
 * api and workers call it at start so the first audit write does not pay for it; otherwise the first
 * lookup of a public address does.
 */
export function loadGeoIp(): void {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  geoip ??= require('geoip-lite') as GeoIpLite;
}

/** The address as a plain IPv4/IPv6 literal (IPv4-mapped IPv6 unwrapped), or null. */
function plainAddress(ip: string): string | null {
  const a = ip.trim().replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, '');
  return isIP(a) ? a : null;
}

/**
 * Country, city and region of a public address from geoip-lite's database, shipped in the package
 * (no network at run time). Private and loopback addresses, and anything that is not an address, give nulls.
 */
export function geoLookup(ip: string | null | undefined): GeoFields {
  if (!ip) return NONE;
  const a = plainAddress(ip);
  if (!a) return NONE;
  const family = isIP(a) === 4 ? 'ipv4' : 'ipv6';
  if (NON_PUBLIC.check(a, family)) return NONE;
  loadGeoIp();
  const hit = geoip!.lookup(a);
  if (!hit || !hit.country) return NONE;
  let name: string | null = null;
  try {
    name = countryNames.of(hit.country) ?? null;
  } catch {
    name = null;
  }
  return {
    country_code: hit.country.slice(0, 2),
    country_name: name?.slice(0, 100) ?? null,
    city: hit.city ? hit.city.slice(0, 100) : null,
    region: hit.region ? hit.region.slice(0, 100) : null,
  };
}
