import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import yauzl from 'yauzl';

/** The files of a ZIP, by name. */
export function unzip(buf: Buffer): Promise<Map<string, Buffer>> {
  return new Promise((resolve, reject) => {
    yauzl.fromBuffer(buf, { lazyEntries: true }, (err, zip) => {
      if (err || !zip) return reject(err);
      const files = new Map<string, Buffer>();
      zip.on('error', reject);
      zip.on('end', () => resolve(files));
      zip.on('entry', (entry: yauzl.Entry) => {
        zip.openReadStream(entry, (e, stream) => {
          if (e || !stream) return reject(e);
          const chunks: Buffer[] = [];
          stream.on('data', (c: Buffer) => chunks.push(c));
          stream.on('error', reject);
          stream.on('end', () => {
            files.set(entry.fileName, Buffer.concat(chunks));
            zip.readEntry();
          });
        });
      });
      zip.readEntry();
    });
  });
}

/** What a poppler tool (installed by scripts/provision.sh for tests) prints for a PDF, between `before` and `after`. */
async function poppler(tool: string, pdf: Buffer, before: string[] = [], after: string[] = []): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'export-pdf-'));
  try {
    const file = path.join(dir, 'report.pdf');
    await writeFile(file, pdf);
    const { stdout } = await promisify(execFile)(tool, [...before, file, ...after]);
    return stdout;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The text of a PDF, extracted by poppler's pdftotext. */
export const pdfText = (pdf: Buffer): Promise<string> => poppler('pdftotext', pdf, ['-enc', 'UTF-8'], ['-']);

/** The fonts a PDF embeds, as poppler's pdffonts lists them (one line each, names first). */
export const pdfFonts = (pdf: Buffer): Promise<string> => poppler('pdffonts', pdf);

/** A binary GET: status, headers and the raw body. */
export async function download(
  url: string,
  token?: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; body: Buffer }> {
  const res = await fetch(url, { headers: { ...headers, ...(token ? { authorization: `Bearer ${token}` } : {}) } });
  return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
}
