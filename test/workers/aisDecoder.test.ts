import test from 'ava';
import { AisPipeline, nmeaChecksum } from '../../workers/ais/decoder';
import { SAMPLES } from '../helpers/nmea';

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
