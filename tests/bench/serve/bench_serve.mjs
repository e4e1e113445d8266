// Measures the `pfr serve` page's first paint in headless Chromium: navigation start to the
// 'pfr-first-paint' mark serve.js sets once the chart and the flame graph are drawn (after the
// next animation frame). A fresh browser context per run (no cache). Also times the raw API calls
// the page makes. Prints medians next to the peer measured by bench_serve.sh.
//   node bench_serve.mjs --url URL --pid PID --from S --to S --runs N --modules DIR --peer-ms MS
//                        --peer-cpu-ms MS --chunks N
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
const require = createRequire(path.join(args.modules, 'package.json'));
const { chromium } = require('playwright-core');
const runs = +args.runs || 7;
const median = (v) => { const s = [...v].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };

// pfr serve keeps answers for repeat views while the ring is unchanged: every cold run asks for a
// range that starts 1 s later (the same chunks: the first overlaps them all), so none is cached.
const view = (i) => `service=svc-0&type=ebpf%3Acpu%3Ananoseconds&from=${+args.from + i}&to=${args.to}`;
async function firstPaint(page, q) {
  await page.goto(args.url + '?' + q, { waitUntil: 'commit', timeout: 60000 });
  await page.waitForFunction(() => performance.getEntriesByName('pfr-first-paint').length > 0, null, { timeout: 60000 });
  return page.evaluate(() => performance.getEntriesByName('pfr-first-paint')[0].startTime);
}
// The page's own share: answers received to chart and flame graph drawn.
const drawMs = (page) => page.evaluate(() => performance.getEntriesByName('pfr-first-paint')[0].startTime -
  performance.getEntriesByName('pfr-data')[0].startTime);
const browser = await chromium.launch({
  executablePath: process.env.PFR_CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
// CPU time (user + system) of the server so far, in ms: less sensitive to other load on a shared
// machine than wall times.
function serverCpuMs() {
  const f = fs.readFileSync(`/proc/${args.pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (+f[11] + +f[12]) * 1000 / 100; // utime, stime in clock ticks (USER_HZ = 100)
}
const paint = [], api = [], cpu = [], warm = [], draw = [];
let frames = 0, bytes = 0;
try {
  for (let i = 0; i < runs + 1; i++) { // the first load warms the page cache of the ring: not counted
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await ctx.newPage();
    const c0 = serverCpuMs();
    const t = await firstPaint(page, view(i));
    frames = await page.locator('.pfr-frame').count();
    if (await page.locator('#ps-chart rect.ps-bar').count() < 100 || frames < 50) throw new Error('page not drawn');
    if (i > 0) {
      paint.push(t);
      cpu.push(serverCpuMs() - c0);
      draw.push(await drawMs(page));
      const p2 = await ctx.newPage(); // the same view again: a reload or a shared link
      warm.push(await firstPaint(p2, view(i)));
    }
    await ctx.close();
  }
  for (let i = 0; i < runs; i++) { // the two calls the page makes, in parallel, bodies read
    const t0 = performance.now();
    const rs = await Promise.all([
      fetch(`${args.url}api/timeline?${view(100 + i)}&points=294`, { headers: { 'Accept-Encoding': 'gzip' } }),
      fetch(`${args.url}api/flame?${view(100 + i)}`, { headers: { 'Accept-Encoding': 'gzip' } })]);
    const bodies = await Promise.all(rs.map((r) => r.arrayBuffer()));
    api.push(performance.now() - t0);
    bytes = bodies[1].byteLength;
  }
} finally {
  await browser.close();
}
const fp = median(paint), ap = median(api), peer = +args['peer-ms'];
const date = new Date().toISOString().slice(0, 10);
console.log(`pfr serve benchmark, ${date}: 24 h range of one service, ${args.chunks} chunks of 10 s; ` +
  `medians of ${runs} runs; load average ${os.loadavg()[0].toFixed(1)}`);
console.log(`first paint (navigation start to chart + flame graph drawn): ${fp.toFixed(0)} ms ` +
  `(runs: ${paint.map((v) => v.toFixed(0)).join(' ')}; ${frames} frames drawn)`);
console.log(`  of which the page (answers received to drawn): ${median(draw).toFixed(0)} ms`);
console.log(`  the same view again (answers kept by pfr serve): ${median(warm).toFixed(0)} ms`);
console.log(`  pfr serve CPU per page load (ls + timeline + flame): ${median(cpu).toFixed(0)} ms`);
console.log(`  API alone (timeline + flame in parallel, ${(bytes / 1024).toFixed(0)} KiB flame JSON): ${ap.toFixed(0)} ms`);
console.log(`peer: pfr flame --format html of the same range to a file: ${peer.toFixed(0)} ms ` +
  `(CPU ${(+args['peer-cpu-ms']).toFixed(0)} ms)`);
console.log(`ratio first paint / peer: ${(fp / peer).toFixed(2)}; target first paint < 1000 ms: ${fp < 1000 ? 'yes' : 'NO'}`);
