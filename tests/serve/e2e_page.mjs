// Shared by the tests of the `pfr serve` page: headless Chromium (playwright-core driving
// Debian's /usr/bin/chromium) on a running server, with every script error, dialog and request
// that leaves the server recorded, and the helpers the tests use to check and report.
//
//   const t = await openServePage(process.argv);   // --url http://127.0.0.1:PORT/ --out DIR
//   await t.run(async () => { ... t.check(ok, 'what') ... }, 'error.png');
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import path from 'node:path';

export const STEP_MS = 15000; // bound on every wait

export async function openServePage(argv) {
  const args = {};
  for (let i = 2; i < argv.length; i += 2) args[argv[i].replace(/^--/, '')] = argv[i + 1];
  const base = args.url;
  const outDir = args.out || '.';
  fs.mkdirSync(outDir, { recursive: true });
  const origin = new URL(base).origin;
  const userDataDir = fs.mkdtempSync(path.join(outDir, 'chromium-profile-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: process.env.PFR_CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1280, height: 900 },
    timezoneId: 'UTC',
  });
  context.setDefaultTimeout(STEP_MS);
  const page = context.pages()[0] || await context.newPage();
  const t = { base, outDir, page, errors: [], remote: [], dialogs: [], failures: 0 };
  page.on('pageerror', (e) => t.errors.push(String(e)));
  // 4xx answers are expected in the tests (bad requests, a filter that matches nothing):
  // Chromium logs them as "Failed to load resource"; only script errors count.
  page.on('console', (m) => {
    if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) t.errors.push(m.text());
  });
  // alert() and friends: only a name that ran as script would open one
  page.on('dialog', (d) => { t.dialogs.push(d.message()); d.dismiss().catch(() => {}); });
  await page.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith(origin + '/') || url.startsWith('data:')) return route.continue();
    t.remote.push(url);
    return route.abort();
  });

  t.check = (ok, what) => {
    console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
    if (!ok) t.failures++;
  };
  t.shot = (name) => page.screenshot({ path: path.join(outDir, name), fullPage: true });
  t.ready = () => page.waitForFunction(() => document.body.dataset.state === 'ready', null, { timeout: STEP_MS });
  t.topRows = () => page.locator('#ps-top tbody tr td.ps-name').allInnerTexts();
  t.param = (name) => new URL(page.url()).searchParams.get(name);
  // Run the test's body, then report and exit (1 when a check failed or the body threw).
  t.run = async (body, errorShot) => {
    try {
      await body();
    } catch (e) {
      console.log('FAIL exception: ' + (e && e.stack || e));
      t.failures++;
      await t.shot(errorShot).catch(() => {});
    } finally {
      await context.close();
      fs.rmSync(userDataDir, { recursive: true, force: true });
    }
    console.log(t.failures ? `${t.failures} checks failed` : 'all checks passed');
    process.exit(t.failures ? 1 : 0);
  };
  return t;
}
