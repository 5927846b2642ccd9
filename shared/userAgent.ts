import { LRUCache } from 'lru-cache';
import { UAParser } from 'ua-parser-js';

export interface ParsedUserAgent {
  browser: string | null;
  os: string | null;
  device_type: 'desktop' | 'mobile' | 'tablet';
}

// Parsing is the costly part and clients send few distinct strings: cache the results.
const cache = new LRUCache<string, ParsedUserAgent>({ max: 2000 });

/** Browser, OS and device class of a User-Agent string (ua-parser-js). */
export function parseUserAgent(ua: string | undefined | null): ParsedUserAgent {
  const key = ua ?? '';
  const hit = cache.get(key);
  if (hit) return hit;
  const r = new UAParser(key).getResult();
  const join = (name?: string, version?: string) => (name ? (version ? `${name} ${version}` : name) : null);
  const parsed: ParsedUserAgent = {
    browser: join(r.browser.name, r.browser.major),
    os: join(r.os.name, r.os.version),
    device_type: r.device.type === 'mobile' ? 'mobile' : r.device.type === 'tablet' ? 'tablet' : 'desktop',
  };
  cache.set(key, parsed);
  return parsed;
}
