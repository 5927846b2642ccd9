import dgram from 'node:dgram';
import net from 'node:net';
import { AisEncode } from 'ggencoder';

/**
 * Published AIVDM sample sentences with their published decodes (Eric S. Raymond, "AIVDM/AIVDO
 * protocol decoding", gpsd, and gpsd's test/sample.aivdm). The expected values come from those
 * documents, not from the decoder under test.
 */
export const SAMPLES = {
  /** Type 1: MMSI 477553000, status 5 (moored), SOG 0, lon -122.345833, lat 47.582833, COG 51, HDG 181. */
  type1: ['!AIVDM,1,1,,B,177KQJ5000G?tO`K>RA1wUbN0TKH,0*5C'],
  /** Type 1: MMSI 371798000, status 0, SOG 12.3 kn, lon -123.395383, lat 48.381633, COG 224, HDG 215. */
  type1b: ['!AIVDM,1,1,,A,15RTgt0PAso;90TKcjM8h6g208CQ,0*4A'],
  /** Type 5 in two parts: MMSI 351759000 "EVER DIADEM", ship type 70, A 225 B 70 C 1 D 31. */
  type5: [
    '!AIVDM,2,1,1,A,55?MbV02;H;s<HtKR20EHE:0@T4@Dn2222222216L961O5Gf0NSQEp6ClRp8,0*1C',
    '!AIVDM,2,2,1,A,88888888880,2*25',
  ],
  /** Type 18: MMSI 338087471, SOG 0.1 kn, lon -74.072132, lat 40.68454, COG 79.6, heading 511 (n/a). */
  type18: ['!AIVDM,1,1,,A,B52K>;h00Fc>jpUlNV@ikwpUoP06,0*4C'],
  /** Type 19: MMSI 367059850 "CAPT.J.RIMES", type 70, SOG 8.7 kn, COG 335.9, lat 29.543695, lon -88.810392, A 5 B 21 C 4 D 4. */
  type19: ['!AIVDM,1,1,,B,C5N3SRgPEnJGEBT>NhWAwwo862PaLELTBJ:V00000000S0D:R220,0*0B'],
  /** Type 24 part A: MMSI 271041815, name "PROGUY". */
  type24a: ['!AIVDM,1,1,,A,H42O55i18tMET00000000000000,2*6D'],
  /** Type 24 part B: MMSI 271041815, ship type 60, A 0 B 15 C 0 D 5. */
  type24b: ['!AIVDM,1,1,,A,H42O55lti4hhhilD3nink000?050,0*40'],
};

/** The type-1 sample with its checksum changed: must be skipped and counted. */
export const CORRUPT = '!AIVDM,1,1,,B,177KQJ5000G?tO`K>RA1wUbN0TKH,0*5D';

/**
 * A minimal, independent reading of a single-part payload's leading fields (6-bit armouring, ITU-R
 * M.1371 bit offsets of messages 1-3), to cross-check the library against the raw bits.
 */
export function rawPosition(sentence: string): { type: number; mmsi: number; lat: number; lng: number } {
  const payload = sentence.split(',')[5];
  let bits = '';
  for (const ch of payload) {
    let v = ch.charCodeAt(0) - 48;
    if (v > 40) v -= 8;
    bits += v.toString(2).padStart(6, '0');
  }
  const u = (start: number, len: number) => parseInt(bits.slice(start, start + len), 2);
  const s = (start: number, len: number) => {
    const n = u(start, len);
    return n >= 2 ** (len - 1) ? n - 2 ** len : n;
  };
  return { type: u(0, 6), mmsi: u(8, 30), lng: s(61, 28) / 600000, lat: s(89, 27) / 600000 };
}

/** A TCP NMEA server: `onConnection` decides what each connection gets; counts connections. */
export async function tcpNmeaServer(onConnection: (socket: net.Socket, index: number) => void) {
  const sockets = new Set<net.Socket>();
  let connections = 0;
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    onConnection(socket, connections++);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `tcp://127.0.0.1:${port}`,
    get connections() {
      return connections;
    },
    get open() {
      return sockets.size;
    },
    sockets,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** A free UDP port on loopback (bound once and released). */
export async function freeUdpPort(): Promise<number> {
  const s = dgram.createSocket('udp4');
  await new Promise<void>((r) => s.bind(0, '127.0.0.1', r));
  const port = s.address().port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** Sends NMEA lines as one datagram to a UDP port. */
export async function sendUdp(port: number, lines: string[]): Promise<void> {
  const s = dgram.createSocket('udp4');
  await new Promise<void>((resolve, reject) =>
    s.send(Buffer.from(lines.join('\r\n') + '\r\n', 'latin1'), port, '127.0.0.1', (err) =>
      err ? reject(err) : resolve(),
    ),
  );
  s.close();
}

export const lines = (...groups: string[][]) => groups.flat().join('\r\n') + '\r\n';

/** Synthetic traffic (for load, not for checking decodes): a type-1 position of vessel `i` at step `step`. */
export function positionSentence(i: number, step: number): string {
  return new AisEncode({
    aistype: 1,
    repeat: 0,
    mmsi: String(211000000 + i),
    navstatus: 0,
    lon: 9 + (i % 100) / 100 + step / 10000,
    lat: 53 + Math.floor(i / 100) / 100,
    sog: (step % 200) / 10,
    cog: (step * 7) % 360,
    hdg: (step * 7) % 360,
    utc: step % 60,
  }).nmea;
}
