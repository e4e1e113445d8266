// End-to-end test of the `pfr serve` page in headless Chromium (playwright-core driving Debian's
// /usr/bin/chromium) against a running server on the "shift" ring (tests/query/make_ring.c:
// hot_before is hot in the first half of the ring, hot_after in the second half).
//
//   node serve_e2e.mjs --url http://127.0.0.1:PORT/ --out DIR
//
// Checks: the chart renders; a drag selects a range; Zoom shows the flame graph of that range
// with hot_before on top; Compare of the second half shows hot_after red and hot_before green;
// the view survives a reload (URL); flame click-zoom, search and tooltips work; label filters;
// pins are marked on the timeline and a click opens the pin's window, Compare against the
// window before; the page opens on the busiest service (app), not the first by name (aaa-idle);
// a bad API request gets a JSON 4xx and the server keeps serving; nothing is fetched from
// anywhere but the server. Screenshots go to DIR.
import { openServePage } from './e2e_page.mjs';

const t = await openServePage(process.argv);
const { page, base, check, shot, ready, topRows, param, errors, remote } = t;

// Name of the widest frame at depth d of the flame graph.
async function widestAt(d) {
  return page.evaluate((d) => {
    const api = window.pfrServe.flame();
    let best = null;
    for (const n of api.nodes) if (n.d === d && (!best || n.n.value > best.n.value)) best = n;
    return best && best.n.name;
  }, d);
}
async function frameRgb(name) {
  return page.evaluate((name) => {
    const api = window.pfrServe.flame();
    for (const f of document.querySelectorAll('.pfr-frame')) {
      if (api.nodes[+f.getAttribute('data-id')].n.name === name) {
        const m = getComputedStyle(f).backgroundColor.match(/\d+/g);
        return m ? m.slice(0, 3).map(Number) : null;
      }
    }
    return null;
  }, name);
}
// Drag over the chart's plot area from fraction a to fraction b of its width.
async function drag(a, b) {
  const box = await page.locator('#ps-chart svg').boundingBox();
  const x0 = box.x + 64, x1 = box.x + box.width - 8, y = box.y + box.height / 2;
  await page.mouse.move(x0 + a * (x1 - x0), y);
  await page.mouse.down();
  await page.mouse.move(x0 + ((a + b) / 2) * (x1 - x0), y, { steps: 4 });
  await page.mouse.move(x0 + b * (x1 - x0), y, { steps: 4 });
  await page.mouse.up();
}
await t.run(async () => {
  // 1. The page on a bare URL: defaults picked, chart and flame graph drawn.
  const resp = await page.goto(base);
  check(resp.status() === 200, 'page served (200)');
  check(!!resp.headers()['content-security-policy'], 'page has a Content-Security-Policy');
  await ready();
  check(await page.locator('#ps-service').inputValue() === 'app',
    'service picked: app, the busiest (aaa-idle comes first by name)');
  check(await page.locator('#ps-type').inputValue() === 'ebpf:cpu:nanoseconds', 'type picked');
  const bars = await page.locator('#ps-chart rect.ps-bar').count();
  check(bars >= 20, `chart renders (${bars} bars)`);
  const frames = await page.locator('.pfr-frame').count();
  check(frames >= 5, `flame graph renders (${frames} frames)`);
  check((await topRows()).length >= 3, 'top-functions table filled');
  check(param('service') === 'app' && param('from') && param('to'), `view in the URL (${page.url()})`);
  const full = { from: param('from'), to: param('to') };
  await shot('01-page.png');

  // 2. Drag over the first half, Zoom: the flame graph of that range has hot_before on top.
  await drag(0.01, 0.45);
  const selText = await page.locator('#ps-sel-text').innerText();
  check(selText.startsWith('Selected'), `drag selects a range (${selText})`);
  check(await page.locator('#ps-sel').getAttribute('visibility') === 'visible', 'selection drawn');
  check(await page.locator('#ps-zoom').isEnabled(), 'Zoom enabled');
  await shot('02-selected.png');
  await page.locator('#ps-zoom').click();
  await ready();
  const zf = +param('from'), zt = +param('to');
  check(zf >= +full.from && zt < +full.to && zt - zf < (+full.to - +full.from) * 0.6,
    `Zoom narrows the range to ${zf}..${zt}`);
  const top1 = (await topRows())[0];
  check(top1 === 'hot_before', `Zoom: top function is hot_before (${top1})`);
  const w3 = await widestAt(3);
  check(w3 === 'hot_before', `Zoom: widest leaf frame is hot_before (${w3})`);
  const sub = await page.locator('.pfr-sub').innerText();
  check(/chunks/.test(sub), `flame subtitle names the range (${sub})`);
  await shot('03-zoom.png');

  // 3. Back to the whole range (browser history), select the second half, Compare.
  await page.goBack();
  await ready();
  check(param('from') === full.from && param('to') === full.to, 'Back restores the whole range');
  await drag(0.55, 0.999);
  await page.locator('#ps-compare').click();
  await ready();
  check(param('mode') === 'compare', 'Compare is in the URL');
  check(await page.locator('.pfr-legend').count() === 1, 'Compare shows a diff flame graph');
  const red = await frameRgb('hot_after');
  check(red && red[0] > red[1] + 40 && red[0] > red[2] + 40, `Compare: hot_after is red (${red})`);
  const green = await frameRgb('hot_before');
  check(green && green[1] > green[0] + 20 && green[1] > green[2] + 20, `Compare: hot_before is green (${green})`);
  const upRow = await page.locator('#ps-top tbody tr', { hasText: 'hot_after' }).locator('td.ps-up').count();
  check(upRow === 1, 'Compare: the changes table marks hot_after as up');
  check(await page.locator('#ps-chart rect.ps-comp').count() === 1 &&
    await page.locator('#ps-chart rect.ps-base').count() === 1, 'chart shows comparison and baseline');
  await shot('04-compare.png');

  // 4. Reload: the comparison comes back from the URL alone.
  await page.reload();
  await ready();
  check(await page.locator('.pfr-legend').count() === 1, 'reload keeps the comparison');
  const red2 = await frameRgb('hot_after');
  check(red2 && red2[0] > red2[1] + 40, 'reload: hot_after still red');
  await page.locator('#ps-back').click();
  await ready();
  check(param('mode') === null && await page.locator('.pfr-legend').count() === 0, 'Exit comparison');

  // 5. Flame interactions: click-zoom, tooltip, search; kept in the URL and across a reload.
  const target = await page.evaluate(() => {
    const api = window.pfrServe.flame();
    for (const f of document.querySelectorAll('.pfr-frame')) {
      const n = api.nodes[+f.getAttribute('data-id')];
      if (n.n.name === 'hot_after') return f.getAttribute('data-id');
    }
    return null;
  });
  check(!!target, 'hot_after frame found');
  const loc = page.locator(`.pfr-frame[data-id="${target}"]`);
  await loc.hover();
  const tip = await page.locator('.pfr-tip').innerText();
  check(tip.includes('hot_after') && tip.includes('value:') && tip.includes('%'), 'tooltip shows name, value, percent');
  await loc.click();
  const gw = (await page.locator('.pfr-graph').boundingBox()).width;
  const zw = (await loc.boundingBox()).width;
  check(Math.abs(zw - gw) <= 2, 'click zooms the frame to the full width');
  check(param('zoom') === target, `frame zoom in the URL (zoom=${param('zoom')})`);
  await page.locator('.pfr-search').fill('hot_');
  check(await page.locator('.pfr-match').count() >= 1, 'search highlights frames');
  await page.waitForFunction(() => new URL(location.href).searchParams.get('search') === 'hot_');
  await page.reload();
  await ready();
  check(await page.locator('.pfr-search').inputValue() === 'hot_', 'search survives a reload');
  const zw2 = (await page.locator(`.pfr-frame[data-id="${target}"]`).boundingBox()).width;
  check(Math.abs(zw2 - gw) <= 2, 'frame zoom survives a reload');
  await shot('05-flame-zoom-search.png');

  // 6. Label filter pid=100 (every sample of the shift ring has it).
  await page.waitForFunction(() => [...document.querySelectorAll('#ps-label-key option')].some((o) => o.value === 'pid'));
  await page.locator('#ps-label-key').selectOption('pid');
  await page.locator('#ps-label-value').focus();
  await page.waitForFunction(() => [...document.querySelectorAll('#ps-label-values option')].some((o) => o.value === '100'));
  check(true, 'label values offered once the picker is used (pid 100)');
  await page.locator('#ps-label-value').fill('100');
  await page.locator('#ps-label-add').click();
  await ready();
  check(new URL(page.url()).searchParams.getAll('label').includes('pid=100'), 'label filter in the URL');
  check(await page.locator('.ps-chip').count() === 1, 'label filter shown as a chip');
  check(await page.locator('.pfr-frame').count() >= 5, 'filtered flame graph renders');
  await page.locator('#ps-label-value').fill('999999');
  await page.locator('#ps-label-add').click();
  await ready();
  const msg = await page.locator('.ps-flame-msg').innerText().catch(() => '');
  check(/nothing matches|no data/.test(msg), `a filter matching nothing says so (${msg.slice(0, 60)})`);
  check(await page.locator('#ps-label-key option[value="pid"]').count() === 1, 'label keys stay pickable');
  await shot('06-labels.png');

  // 7. Pins on the timeline (serve_e2e.sh pinned app's minute T0+420..T0+480, and an
  // automatic pin of every service at T0+100..T0+130): a band each; a click opens the flame
  // graph of the pin's window, selected, and Compare sets it against the minute before.
  await page.goto(base);
  await ready();
  const bands = await page.locator('#ps-chart g.ps-pin').count();
  check(bands === 2, `pins marked on the timeline (${bands})`);
  check(await page.locator('#ps-chart g.ps-pin.ps-pin-auto').count() === 1, 'the trigger pin is marked apart');
  const pinTip = await page.locator('#ps-chart g.ps-pin[data-pin="1"] title').textContent();
  check(pinTip.includes('e2e incident') && pinTip.includes('manual:'), `pin tooltip: reason and who (${pinTip.split('\n')[1]})`);
  await page.locator('#ps-chart g.ps-pin[data-pin="1"] rect.ps-pin-band').click();
  await ready();
  check(+param('from') === 1714565220 && +param('to') === 1714565280,
    `a click opens the pin's window (${param('from')}..${param('to')})`);
  check(await page.locator('.pfr-frame').count() >= 5, 'the pin window\'s flame graph renders');
  const top2 = (await topRows())[0];
  check(top2 === 'hot_after', `pin window: top function is hot_after (${top2})`);
  check(await page.locator('#ps-compare').isEnabled(), 'the pin window is selected: Compare enabled');
  await shot('07-pin.png');
  await page.locator('#ps-compare').click();
  await ready();
  check(param('mode') === 'compare' && +param('cfrom') === 1714565220 && +param('cto') === 1714565280,
    `Compare: the pin's window against the minute before (${page.url()})`);
  check(await page.locator('.pfr-legend').count() === 1, 'pin Compare shows a diff flame graph');
  await shot('08-pin-compare.png');

  // 8. Bad requests: JSON 4xx, and the server keeps serving.
  const bad = await page.evaluate(async () => {
    const out = [];
    for (const q of ['api/flame?service=nope', 'api/flame?from=yesterday-ish', 'api/flame?from=0&to=now',
      'api/timeline?from=-1h&step=1ms', 'api/nothing', 'api/flame?bogus=1']) {
      const r = await fetch(q);
      let j = null;
      try { j = await r.json(); } catch (e) { j = null; }
      out.push([q, r.status, j && typeof j.error === 'string']);
    }
    const ok = await fetch('api/ls');
    return { out, after: ok.status };
  });
  for (const [q, st, json] of bad.out) check(st >= 400 && st < 500 && json, `${q}: ${st} with a JSON error`);
  check(bad.after === 200, 'server still serves after bad requests');
  check(errors.length === 0, `no script errors ${errors.join('; ')}`);
  check(remote.length === 0, `no request left the server ${remote.join(' ')}`);
}, 'error.png');
