// check_svg.js — opens a flame graph SVG (`vcattach convert --format svg`) in headless
// Chromium (playwright-core) from a file:// URL, with the network off, and exercises it the
// way a person would: look, search (the Search button's prompt), click a frame to zoom,
// Reset zoom.  For tests/system/test_viewer.py.
//
// usage: node check_svg.js '<json options>'
//   file        the SVG's absolute path
//   userDataDir an empty directory for Chromium's profile
//   screenshot  PNG path prefix: writes PREFIX-full.png, PREFIX-search.png, PREFIX-zoom.png
//   search      the text to type into the search prompt
// Prints one JSON object: {ok, error, title, frames, visible, widest, search: {matched,
// highlighted, names}, zoom: {name, width, visible, hiddenOutside}, reset: {visible},
// requests, consoleErrors, pageErrors}.  Exit code 0 whenever a report was produced.
'use strict';
const { chromium } = require('playwright-core');

const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

async function state(page) {
  return page.evaluate(() => {
    const gs = Array.from(document.querySelectorAll('g.f'));
    const vis = gs.filter((g) => g.style.display !== 'none');
    const widths = vis.map((g) => +g.querySelector('rect').getAttribute('width'));
    return {
      frames: gs.length, visible: vis.length, widest: Math.max(0, ...widths),
      highlighted: vis.filter((g) => g.classList.contains('match')).length,
      matched: document.getElementById('matched').textContent,
      labelled: vis.filter((g) => g.querySelector('text').textContent.length > 0).length,
    };
  });
}

async function main() {
  const opts = JSON.parse(process.argv[2]);
  const report = { ok: false, error: null, requests: [], consoleErrors: [], pageErrors: [] };
  let context;
  try {
    context = await chromium.launchPersistentContext(opts.userDataDir, {
      executablePath: opts.executablePath || '/usr/bin/chromium', headless: true,
      args: CHROMIUM_ARGS, viewport: { width: 1240, height: 900 }, timeout: 30000,
      offline: true,
    });
  } catch (e) {
    report.error = 'launch: ' + String(e && e.message || e).split('\n')[0];
    process.stdout.write(JSON.stringify(report));
    return;
  }
  try {
    const page = context.pages()[0] || await context.newPage();
    page.on('request', (r) => { if (!r.url().startsWith('file:')) report.requests.push(r.url()); });
    page.on('console', (m) => { if (m.type() === 'error') report.consoleErrors.push(m.text()); });
    page.on('pageerror', (e) => report.pageErrors.push(String(e)));
    page.on('dialog', async (d) => { await d.accept(opts.search); });
    await page.goto('file://' + opts.file, { timeout: 30000 });
    await page.waitForFunction(() => document.querySelectorAll('g.f rect[width]').length > 0,
                               null, { timeout: 15000 });
    report.title = await page.evaluate(() => document.getElementById('title').textContent);
    Object.assign(report, await state(page));
    await page.screenshot({ path: opts.screenshot + '-full.png' });

    await page.click('#search');
    await page.waitForFunction(() => document.getElementById('matched').textContent.length > 1,
                               null, { timeout: 5000 });
    const s = await state(page);
    report.search = { matched: s.matched, highlighted: s.highlighted,
      names: await page.evaluate(() => Array.from(document.querySelectorAll('g.match title'))
        .map((t) => t.textContent)) };
    await page.screenshot({ path: opts.screenshot + '-search.png' });

    // zoom: click the first highlighted frame (force: text on top of rects is not clickable)
    const target = await page.$('g.match');
    const name = await target.evaluate((g) => g.querySelector('title').textContent);
    const before = +(await target.evaluate((g) => g.querySelector('rect').getAttribute('width')));
    await target.click({ force: true });
    const z = await state(page);
    report.zoom = { name, before,
      width: +(await target.evaluate((g) => g.querySelector('rect').getAttribute('width'))),
      visible: z.visible, resetShown: await page.evaluate(
        () => document.getElementById('reset').style.display !== 'none') };
    await page.screenshot({ path: opts.screenshot + '-zoom.png' });
    await page.click('#reset');
    report.reset = await state(page);
    report.ok = true;
  } catch (e) {
    report.error = String(e && e.message || e).split('\n')[0];
  } finally {
    await context.close();
  }
  process.stdout.write(JSON.stringify(report));
}

main();
