import test from 'ava';
import { ipAddressOf } from '../../shared/ipAddress';

test('an IPv4-mapped IPv6 address is stored as the IPv4 address it is, in either spelling', (t) => {
  t.is(ipAddressOf('::ffff:198.51.100.23'), '198.51.100.23');
  t.is(ipAddressOf('::FFFF:c633:6417'), '198.51.100.23');
  t.is(ipAddressOf('0:0:0:0:0:ffff:198.51.100.23'), '198.51.100.23');
  t.is(ipAddressOf('198.51.100.23'), '198.51.100.23');
});

test('other addresses keep their form; a zone id is dropped; anything else is no address', (t) => {
  t.is(ipAddressOf('2001:db8::1'), '2001:db8::1');
  t.is(ipAddressOf('fe80::1%eth0'), 'fe80::1');
  t.is(ipAddressOf('::1'), '::1');
  t.is(ipAddressOf('1.2.3.4%eth0'), null);
  t.is(ipAddressOf('not-an-ip'), null);
  t.is(ipAddressOf(''), null);
});
