import test from 'ava';
import { createLogger } from '../../shared/logger';
import { PdfRenderer } from '../../workers/export/pdfRenderer';
import { pdfText } from './archive';

test('one browser and reused pages for every render, at most EXPORT_PDF_MAX_PAGES pages at once', async (t) => {
  const renderer = new PdfRenderer({
    executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
    maxPages: 2,
    logger: createLogger('test', 'silent'),
  });
  let rendering = 0;
  let most = 0;
  const pages = new Set<unknown>();
  renderer.on('render', (page: unknown) => {
    pages.add(page);
    most = Math.max(most, ++rendering);
  });
  renderer.on('rendered', () => rendering--);
  try {
    const pdfs = await Promise.all(
      Array.from({ length: 5 }, (_, i) => renderer.render(`<!doctype html><p>render number ${i}</p>`)),
    );
    t.is(renderer.launches, 1);
    t.is(most, 2);
    // Pages are reused: five renders on two pages.
    t.is(pages.size, 2);
    for (const [i, pdf] of pdfs.entries()) t.true((await pdfText(pdf)).includes(`render number ${i}`));
  } finally {
    await renderer.close();
  }
});
