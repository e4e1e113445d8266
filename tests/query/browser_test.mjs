// Headless Chromium check of pfr's SVG and HTML flame graphs (and a diff page):
// frames render, clicking a frame zooms it to the full width, search highlights, tooltips show,
// nothing is fetched from the network; pages of hostile names render them as inert text.
// Screenshots go to --out for people to look at.
//
//   node browser_test.mjs --svg f.svg --html f.html [--diff-html d.html --red NAME --green NAME]
//                         [--names-html a.html,b.html --names-svg a.svg,b.svg] --out DIR
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import path from 'node:path';

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
const outDir = args.out || '.';
fs.mkdirSync(outDir, { recursive: true });

let failures = 0;
function check(ok, what) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures++;
}

const browser = await chromium.launch({
  executablePath: process.env.PFR_CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});

async function openPage(file) {
  // a fresh context is a fresh profile (user data) for every page
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const errors = [];
  const remote = [];
  const dialogs = []; // alert() and friends: only a name that ran as script opens one
  page.on('dialog', (d) => { dialogs.push(d.message()); d.dismiss().catch(() => {}); });
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  await page.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith('file:') || url.startsWith('data:')) return route.continue();
    remote.push(url);
    return route.abort();
  });
  await page.goto('file://' + path.resolve(file));
  return { page, context, errors, remote, dialogs };
}

// Distance from the graph's top to the highest frame drawn: 0 when the graph is sized by the
// frames shown, not by the deepest stack (which may be too narrow to draw).
function topGap(page) {
  return page.evaluate(() => {
    const g = document.querySelector('.pfr-graph').getBoundingClientRect();
    let top = Infinity;
    for (const f of document.querySelectorAll('.pfr-frame')) top = Math.min(top, f.getBoundingClientRect().top);
    return top - g.top;
  });
}

async function testHtml(file) {
  const { page, context, errors, remote } = await openPage(file);
  const frames = page.locator('.pfr-frame');
  const n = await frames.count();
  check(n > 20, `html: ${n} frames rendered`);
  const graph = await page.locator('.pfr-graph').boundingBox();
  const root = await page.locator('.pfr-frame[data-id="0"]').boundingBox();
  check(root && Math.abs(root.width - graph.width) <= 2, 'html: root frame spans the width');
  check(root && Math.abs(root.y + root.height - (graph.y + graph.height)) <= 2,
    'html: root frame at the bottom');
  check(Math.abs(await topGap(page)) <= 2, 'html: graph as tall as the frames drawn');
  await page.screenshot({ path: path.join(outDir, 'flame-html.png') });

  // a frame above the root that takes between 3% and 80% of the width
  const target = await page.evaluate(() => {
    const g = document.querySelector('.pfr-graph').getBoundingClientRect();
    for (const f of document.querySelectorAll('.pfr-frame')) {
      const r = f.getBoundingClientRect();
      const depth = Math.round((g.bottom - r.bottom) / 18);
      if (depth >= 2 && r.width > g.width * 0.03 && r.width < g.width * 0.8)
        return { id: f.getAttribute('data-id'), name: f.textContent, width: r.width };
    }
    return null;
  });
  check(!!target, `html: a frame to zoom into (${target && target.name})`);
  if (target) {
    const loc = page.locator(`.pfr-frame[data-id="${target.id}"]`);
    await loc.hover();
    const tip = await page.locator('.pfr-tip').innerText();
    check(tip.includes('value:') && tip.includes('self:') && tip.includes('%'),
      'html: tooltip shows value, self and percent');
    await loc.click();
    const after = await page.locator(`.pfr-frame[data-id="${target.id}"]`).boundingBox();
    check(after && Math.abs(after.width - graph.width) <= 2,
      `html: clicked frame zoomed from ${target.width.toFixed(0)}px to ${after && after.width.toFixed(0)}px`);
    check(Math.abs(await topGap(page)) <= 2, 'html: zoomed graph as tall as the frames drawn');
    check(await page.locator('.pfr-reset').isEnabled(), 'html: reset zoom enabled');
    check((await page.evaluate(() => location.hash)).includes('zoom='), 'html: zoom kept in the URL');
    await page.screenshot({ path: path.join(outDir, 'flame-html-zoomed.png') });
    await page.locator('.pfr-reset').click();
    const back = await page.locator(`.pfr-frame[data-id="${target.id}"]`).boundingBox();
    check(back && Math.abs(back.width - target.width) <= 2, 'html: reset restores the width');

    const word = target.name.slice(0, Math.min(8, target.name.length));
    await page.locator('.pfr-search').fill(word);
    const matches = await page.locator('.pfr-match').count();
    const label = await page.locator('.pfr-matched').innerText();
    check(matches > 0 && /Matched: \d/.test(label), `html: search "${word}" highlights ${matches} frames (${label})`);
    const nonMatching = await page.evaluate((w) => {
      const re = new RegExp(w.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'i');
      return [...document.querySelectorAll('.pfr-match')].filter((f) => !re.test(
        window.pfrFlame.nodes[+f.getAttribute('data-id')].n.name)).length;
    }, word);
    check(nonMatching === 0, 'html: only matching frames highlighted');
    await page.screenshot({ path: path.join(outDir, 'flame-html-search.png') });
  }
  check(errors.length === 0, `html: no script errors ${errors.join('; ')}`);
  check(remote.length === 0, `html: no network requests ${remote.join(' ')}`);
  await context.close();
}

async function testSvg(file) {
  const { page, context, errors, remote } = await openPage(file);
  const n = await page.locator('g.f').count();
  check(n > 20, `svg: ${n} frames rendered`);
  const W = +(await page.locator('svg').getAttribute('width'));
  await page.screenshot({ path: path.join(outDir, 'flame-svg.png') });
  const target = await page.evaluate((W) => {
    for (const g of document.querySelectorAll('g.f')) {
      const d = +g.getAttribute('data-d'), w = +g.getAttribute('data-w');
      if (d >= 2 && w > 0.03 && w < 0.8) {
        const r = g.querySelector('rect');
        return { x: +g.getAttribute('data-x'), d, w: +r.getAttribute('width'), name: g.querySelector('title').textContent.split('\n')[0] };
      }
    }
    return null;
  }, W);
  check(!!target, `svg: a frame to zoom into (${target && target.name})`);
  if (target) {
    const sel = `g.f[data-x="${target.x}"][data-d="${target.d}"] rect`;
    await page.locator(sel).first().click({ force: true });
    const w = +(await page.locator(sel).first().getAttribute('width'));
    check(Math.abs(w - W) <= 2, `svg: clicked frame zoomed from ${target.w.toFixed(0)}px to ${w.toFixed(0)}px`);
    check(await page.locator('#reset').isVisible(), 'svg: reset zoom shown');
    await page.screenshot({ path: path.join(outDir, 'flame-svg-zoomed.png') });
    const word = target.name.slice(0, Math.min(8, target.name.length));
    await page.locator('#search').fill(word);
    const matches = await page.locator('rect.match').count();
    const label = await page.locator('#matched').textContent();
    check(matches > 0 && /Matched: \d/.test(label), `svg: search "${word}" highlights ${matches} frames (${label})`);
  }
  check(errors.length === 0, `svg: no script errors ${errors.join('; ')}`);
  check(remote.length === 0, `svg: no network requests ${remote.join(' ')}`);
  await context.close();
}

// Colour of the first frame named name: [r, g, b].
async function frameRgb(page, name) {
  return page.evaluate((name) => {
    for (const f of document.querySelectorAll('.pfr-frame')) {
      if (window.pfrFlame.nodes[+f.getAttribute('data-id')].n.name === name) {
        const m = getComputedStyle(f).backgroundColor.match(/\d+/g);
        return m ? m.slice(0, 3).map(Number) : null;
      }
    }
    return null;
  }, name);
}

async function testDiff(file, red, green) {
  const { page, context, errors } = await openPage(file);
  check(await page.locator('.pfr-frame').count() > 3, 'diff html: frames rendered');
  await page.screenshot({ path: path.join(outDir, 'diff-html.png') });
  if (red) {
    const c = await frameRgb(page, red);
    check(c && c[0] > c[1] + 40 && c[0] > c[2] + 40, `diff html: ${red} is red (${c})`);
  }
  if (green) {
    const c = await frameRgb(page, green);
    check(c && c[1] > c[0] + 20 && c[1] > c[2] + 20, `diff html: ${green} is green (${c})`);
  }
  check(errors.length === 0, `diff html: no script errors ${errors.join('; ')}`);
  await context.close();
}

// Pages of services and functions named with markup, quotes, control characters, or very long
// names (tests/query/ring_fixture.c, FX_NAMES): every name shows as text, nothing in them runs,
// the page is no wider than the window.
const MARKUP = '<img src=x onerror=alert(1)>', FRAME = '<svg/onload=alert(2)>';
async function inert(page, what, errors, remote, dialogs) {
  const injected = await page.evaluate(() => document.getElementsByTagName('img').length +
    document.querySelectorAll('.pfr svg, #frames svg').length);
  check(injected === 0, `${what}: no element made of a name (${injected})`);
  check(dialogs.length === 0, `${what}: no script of a name ran ${dialogs.join('; ')}`);
  check(errors.length === 0, `${what}: no script errors ${errors.join('; ')}`);
  check(remote.length === 0, `${what}: no network requests ${remote.join(' ')}`);
}

async function testNamesHtml(file) {
  const { page, context, errors, remote, dialogs } = await openPage(file);
  const what = 'names html ' + path.basename(file);
  const n = await page.locator('.pfr-frame').count();
  check(n >= 3, `${what}: ${n} frames rendered`);
  const names = await page.evaluate(() => window.pfrFlame.nodes.map((x) => x.n.name));
  const title = await page.locator('.pfr-title').textContent();
  check(names.includes(FRAME) || title.includes(MARKUP) || /long\/x{100}/.test(title),
    `${what}: names shown as text (${title.slice(0, 80)})`);
  const hostile = names.indexOf(FRAME);
  if (hostile >= 0) {
    // hover the frame (it may be narrow: search for it first, then read the tooltip)
    await page.locator('.pfr-search').fill('^<svg');
    check(await page.locator('.pfr-match').count() >= 1, `${what}: the hostile frame is found by search`);
    await page.locator('.pfr-match').first().hover({ force: true });
    const tip = await page.locator('.pfr-tip').innerText();
    check(tip.startsWith(FRAME), `${what}: tooltip shows the name as text`);
  }
  const wide = await page.evaluate(() => document.scrollingElement.scrollWidth - window.innerWidth);
  check(wide <= 1, `${what}: no wider than the window (${wide}px over)`);
  await page.screenshot({ path: path.join(outDir, path.basename(file, '.html') + '.png') });
  await inert(page, what, errors, remote, dialogs);
  await context.close();
}

async function testNamesSvg(file) {
  const { page, context, errors, remote, dialogs } = await openPage(file);
  const what = 'names svg ' + path.basename(file);
  check(await page.locator('g.f').count() >= 3, `${what}: frames rendered`);
  const title = await page.locator('#title').textContent();
  const frames = await page.evaluate(() => [...document.querySelectorAll('g.f title')].map((t) => t.textContent.split('\n')[0]));
  check(title.includes(MARKUP) || frames.includes(FRAME) || title.includes('semi;colon?new line?[31mred?[0m'),
    `${what}: names shown as text (${title.slice(0, 80)})`);
  await page.screenshot({ path: path.join(outDir, path.basename(file, '.svg') + '-svg.png') });
  await inert(page, what, errors, remote, dialogs);
  await context.close();
}

try {
  for (const f of (args['names-html'] || '').split(',').filter(Boolean)) await testNamesHtml(f);
  for (const f of (args['names-svg'] || '').split(',').filter(Boolean)) await testNamesSvg(f);
  if (args.html) await testHtml(args.html);
  if (args.svg) await testSvg(args.svg);
  if (args['diff-html']) await testDiff(args['diff-html'], args.red, args.green);
} catch (e) {
  console.log('FAIL exception: ' + (e && e.stack || e));
  failures++;
} finally {
  await browser.close();
}
console.log(failures ? `${failures} checks failed` : 'all checks passed');
process.exit(failures ? 1 : 0);
