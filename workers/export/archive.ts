import { ZipArchive } from 'archiver';

/** The files of one export, by name in the archive. */
export interface ArchiveFiles {
  'data.json': string;
  'report.pdf': Buffer;
  'README.txt': string;
}

/** Zips the export's files into one buffer (all three fit in memory: a few hundred KB). */
export function zipExport(files: ArchiveFiles, date: Date): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const zip = new ZipArchive({ zlib: { level: 6 } });
    const chunks: Buffer[] = [];
    zip.on('data', (c: Buffer) => chunks.push(c));
    zip.on('error', reject);
    zip.on('warning', reject);
    zip.on('end', () => resolve(Buffer.concat(chunks)));
    for (const [name, content] of Object.entries(files)) zip.append(content, { name, date });
    void zip.finalize();
  });
}
