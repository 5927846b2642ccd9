import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * `text` as a client address to store, geolocate and count: an IPv4 or IPv6 address, or null for
 * anything else (a header or field the client wrote). An IPv6 zone id (`fe80::1%eth0`) is dropped:
 * it names an interface of the host that saw the address, not the client, and isIP accepts any
 * text after the `%`. An IPv4 address has no zone: `1.2.3.4%eth0` is no address. An IPv4-mapped
 * IPv6 address is the IPv4 address.
 */
export function ipAddressOf(text: string | null | undefined): string | null {
  if (!text) return null;
  const family = isIP(text);
  if (family === 4) return text;
  if (family !== 6) return null;
  const bare = text.replace(/%.*$/s, '');
  // An IPv4 client as a dual-stack socket or proxy writes it (`::ffff:198.51.100.23`, or in hex
  // `::ffff:c633:6417`) is stored as the IPv4 address it is, so a search by that address finds it.
  if (/^[0:]*:ffff:/i.test(bare)) {
    const v6 = ipaddr.IPv6.parse(bare);
    if (v6.isIPv4MappedAddress()) return v6.toIPv4Address().toString();
  }
  return bare;
}
