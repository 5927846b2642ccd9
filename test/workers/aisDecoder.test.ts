import test from 'ava';
import { AisEncode } from 'ggencoder';
import { AisPipeline, nmeaChecksum } from '../../workers/ais/decoder';
import { rawPosition, SAMPLES } from '../helpers/nmea';

/** A single-part sentence of `payload` with a valid checksum. */
const sentence = (payload: string, fill = 0) => {
  const body = `AIVDM,1,1,,A,${payload},${fill}`;
  return `!${body}*${nmeaChecksum(body)}`;
};

test('every published sample decodes with no error (complete payloads pass the length check)', (t) => {
  const p = new AisPipeline();
  for (const parts of Object.values(SAMPLES)) for (const line of parts) p.line(line, 1000);
  t.is(p.errors, 0);
  t.deepEqual([...p.vessels.keys()].sort(), [271041815, 338087471, 351759000, 367059850, 371798000, 477553000].sort());
});

test('a payload cut short is an error, not a vessel at 0°N 0°E', (t) => {
  const p = new AisPipeline();
  // The type-1 sample's payload cut after the MMSI and status (42 of 168 bits), and after 150 bits.
  const full = SAMPLES.type1[0].split(',')[5];
  for (const payload of [full.slice(0, 7), full.slice(0, 25), '1']) p.line(sentence(payload), 1000);
  t.is(p.errors, 3);
  t.is(p.vessels.size, 0);
  // A type-5 message missing its second part's characters.
  const p5 = new AisPipeline();
  const [first, second] = SAMPLES.type5;
  const cut = second.split(',');
  const body = `AIVDM,2,2,1,A,${cut[5].slice(0, 3)},2`;
  p5.line(first, 1000);
  p5.line(`!${body}*${nmeaChecksum(body)}`, 1000);
  t.is(p5.errors, 1);
  t.is(p5.vessels.size, 0);
  // The complete sentence still decodes afterwards.
  p.line(SAMPLES.type1[0], 1000);
  t.like(p.vessels.get(477553000), { lat: 47.582833, lng: -122.345833 });
});

test('a multi-part message is dropped when its rest does not arrive within 2 s', (t) => {
  const [first, second] = SAMPLES.type5;
  const late = new AisPipeline();
  late.line(first, 10_000);
  late.line(second, 10_000 + 2500);
  t.is(late.vessels.size, 0);
  // Both parts were skipped: the one that waited and the one that came too late.
  t.is(late.errors, 2);
  t.is(late.sentences, 2);
  // The same pair within the 2 s decodes, also right at the limit.
  for (const gap of [0, 1999, 2000]) {
    const inTime = new AisPipeline();
    inTime.line(first, 10_000);
    inTime.line(second, 10_000 + gap);
    t.is(inTime.errors, 0, `gap ${gap}`);
    t.is(inTime.vessels.size, 1, `gap ${gap}`);
  }
});

test('a position outside ±90 / ±180, on either side, is no position (null), like "not available"', (t) => {
  const position = (aistype: number, mmsi: number, lat: number, lon: number) =>
    new AisEncode({
      aistype,
      repeat: 0,
      mmsi: String(mmsi),
      navstatus: 0,
      lat,
      lon,
      sog: 10,
      cog: 10,
      hdg: 10,
      utc: 10,
    }).nmea;
  const p = new AisPipeline();
  const cases: Array<[number, number, number, number, number | null, number | null]> = [
    // type, mmsi, latitude, longitude sent → latitude, longitude kept
    [1, 211000021, -95, -181.5, null, null],
    [1, 211000024, -91, -181, null, null],
    [1, 211000025, -95, 13.5, null, 13.5],
    [1, 211000026, 53.5, -180.5, 53.5, null],
    [18, 211000027, -92, -200, null, null],
    [1, 211000028, -90, -180, -90, -180],
    [1, 211000029, 90, 180, 90, 180],
  ];
  for (const [type, mmsi, lat, lon] of cases) {
    const line = position(type, mmsi, lat, lon);
    // The sentence carries the raw values (the encoder does not clamp them).
    if (type === 1) t.like(rawPosition(line), { mmsi, lat, lng: lon });
    p.line(line, 1000);
  }
  t.is(p.errors, 0);
  for (const [, mmsi, , , lat, lng] of cases) t.like(p.vessels.get(mmsi), { lat, lng }, String(mmsi));
  // Pushed as such too.
  const pushed = new Map(p.takeDirty().map((v) => [v.mmsi, v]));
  t.like(pushed.get(211000021), { lat: null, lng: null });
});
