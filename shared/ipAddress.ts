import { isIP } from 'node:net';

/**
 * `text` as a client address to store, geolocate and count: an IPv4 or IPv6 address, or null for
 * anything else (a header or field the client wrote). An IPv6 zone id (`fe80::1%eth0`) is dropped:
 * it names an interface of the host that saw the address, not the client, and isIP accepts any
 * text after the `%`. An IPv4 address has no zone: `1.2.3.4%eth0` is no address.
 */
export function ipAddressOf(text: string | null | undefined): string | null {
  if (!text) return null;
  const family = isIP(text);
  if (family === 4) return text;
  return family === 6 ? text.replace(/%.*$/s, '') : null;
}
