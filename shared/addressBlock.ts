import ipaddr from 'ipaddr.js';

/**
 * The address a per-client counter (rate limits, sign-in and registration counters) is kept under.
 * An IPv4 address counts alone. An IPv6 address counts as its /64: one subscriber is routinely
 * given a whole /64 (RFC 6177, and SLAAC hands every host one), so per-address counters would let a
 * single client rotate through 2^64 addresses and never reach a limit. An IPv4-mapped IPv6 address
 * (`::ffff:192.0.2.1`, what a dual-stack socket reports for an IPv4 client) counts as the IPv4
 * address it is; a zone id is dropped. Text that is not an address is kept as it is.
 */
export function counterAddress(ip: string): string {
  if (!ip.includes(':')) return ip; // IPv4 as the socket or isIP gave it
  // A zone id (`fe80::1%eth0`) names an interface, not another client: any text after `%` passes
  // node's isIP, and would otherwise make each spelling a counter of its own.
  const bare = ip.replace(/%.*$/s, '');
  if (!ipaddr.isValid(bare)) return ip;
  const parsed = ipaddr.parse(bare);
  if (parsed.kind() === 'ipv4') return parsed.toString();
  const v6 = parsed as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address().toString();
  const block = v6.parts.slice(0, 4).map((p) => p.toString(16));
  return `${block.join(':')}::/64`;
}
