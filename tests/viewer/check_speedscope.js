// check_speedscope.js — opens a trace in the real speedscope viewer (headless Chromium,
// driven by playwright-core) and reports what the page shows, for tests/system/test_viewer.py.
//
// usage: node check_speedscope.js '<json options>'
//   url           speedscope page with #profileURL=<trace URL> (served from 127.0.0.1)
//   userDataDir   an empty directory for Chromium's profile
//   screenshot    PNG path prefix: writes PREFIX-flame.png and PREFIX-sandwich.png
//   wantProfiles  substrings of profile (thread) names to visit ('' = the first profile);
//                 each visited profile's Sandwich view (a DOM table of functions) is read
//                 as text
//   timeoutMs     overall budget for loading (default 30000)
// Prints one JSON object on stdout: {ok, error, profileCount, firstTitle, visited: [{title,
// text}], dialogs, consoleErrors, pageErrors}.  Exit code 0 whenever a report was produced;
// the test decides what passes.
'use strict';
const { chromium } = require('playwright-core');

const CHROMIUM_ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--disable-quic',
];

// speedscope's toolbar shows the active profile as "NAME (i/N)" when there are several.
async function toolbarTitle(page) {
  return page.evaluate(() => {
    const all = Array.from(document.querySelectorAll('div, span'));
    for (const el of all) {
      const t = (el.innerText || '').trim();
      if (/\(\d+\/\d+\)$/.test(t) && el.children.length <= 2 && t.length < 400) return t;
    }
    return null;
  });
}

async function main() {
  const opts = JSON.parse(process.argv[2]);
  const report = { ok: false, error: null, profileCount: null, firstTitle: null, visited: [],
                   dialogs: [], consoleErrors: [], pageErrors: [] };
  let context;
  try {
    context = await chromium.launchPersistentContext(opts.userDataDir, {
      executablePath: opts.executablePath || '/usr/bin/chromium',
      headless: true,
      args: CHROMIUM_ARGS,
      viewport: { width: 1400, height: 900 },
      timeout: 30000,
    });
  } catch (e) {
    report.error = 'launch: ' + String(e && e.message || e).split('\n')[0];
    process.stdout.write(JSON.stringify(report));
    return;
  }
  try {
    const page = context.pages()[0] || await context.newPage();
    page.on('dialog', async (d) => { report.dialogs.push(d.message()); await d.dismiss(); });
    page.on('console', (m) => { if (m.type() === 'error') report.consoleErrors.push(m.text()); });
    page.on('pageerror', (e) => report.pageErrors.push(String(e)));
    const timeout = opts.timeoutMs || 30000;
    await page.goto(opts.url, { timeout });

    // Loaded when the view-mode tabs appear; failed when the error banner or a dialog does.
    const deadline = Date.now() + timeout;
    let state = 'loading';
    while (Date.now() < deadline) {
      state = await page.evaluate(() => {
        const text = document.body ? document.body.innerText : '';
        if (text.includes('Something went wrong')) return 'error';
        if (text.includes('Sandwich') && text.includes('Time Order')) return 'loaded';
        return 'loading';
      });
      if (state !== 'loading' || report.dialogs.length) break;
      await page.waitForTimeout(100);
    }
    if (state !== 'loaded') {
      report.error = report.dialogs.length ? 'dialog: ' + report.dialogs[0]
                                           : 'speedscope did not load the profile (' + state + ')';
      if (opts.screenshot) await page.screenshot({ path: opts.screenshot + '-error.png' });
      return;
    }
    await page.waitForTimeout(300); // let the flame graph canvas paint
    if (opts.screenshot) await page.screenshot({ path: opts.screenshot + '-flame.png' });

    const first = await toolbarTitle(page);
    report.firstTitle = first;
    const m = first && first.match(/\((\d+)\/(\d+)\)$/);
    report.profileCount = m ? Number(m[2]) : 1;

    // Sandwich view ("3"); back to the first profile ("p": speedscope may open on another),
    // then walk the profiles with "n", reading the wanted ones.
    await page.keyboard.press('3');
    await page.waitForTimeout(200);
    const index = m ? Number(m[1]) : 1;
    for (let k = 1; k < index; k++) {
      const before = await toolbarTitle(page);
      await page.keyboard.press('p');
      for (let w = 0; w < 50 && (await toolbarTitle(page)) === before; w++)
        await page.waitForTimeout(20);
    }
    const want = new Set(opts.wantProfiles || []);
    let shotTaken = false;
    for (let i = 0; i < report.profileCount && want.size; i++) {
      const title = report.profileCount > 1 ? await toolbarTitle(page) : first;
      for (const w of Array.from(want)) {
        if (w === '' || (title && title.includes(w))) {
          want.delete(w);
          await page.waitForTimeout(150);
          const text = await page.evaluate(() => document.body.innerText);
          report.visited.push({ want: w, title, text });
          if (opts.screenshot && !shotTaken) {
            await page.screenshot({ path: opts.screenshot + '-sandwich.png' });
            shotTaken = true;
          }
        }
      }
      if (i + 1 < report.profileCount) {
        await page.keyboard.press('n');
        const before = title;
        for (let k = 0; k < 50 && (await toolbarTitle(page)) === before; k++)
          await page.waitForTimeout(20);
      }
    }
    report.ok = true;
  } catch (e) {
    report.error = String(e && e.message || e).split('\n')[0];
  } finally {
    await context.close();
    process.stdout.write(JSON.stringify(report));
  }
}

main();
