// End-to-end test of the `pfr serve` page with service names as Coroot gives them
// (/system.slice/nginx.service, /docker/web, /k8s/<ns>/<name>, /k8s-cronjob/...), a name with
// URL-significant characters, and hostile ones (markup, quotes, control characters, bytes that
// are not UTF-8, 2,000 characters): the "names" ring of tests/query/make_ring.c (FX_NAMES in
// ring_fixture.c), in headless Chromium against a running server.
//
//   node serve_names_e2e.mjs --url http://127.0.0.1:PORT/ --out DIR
//
// Checks: the picker offers every name exactly; picking one shows its flame graph and puts it in
// the URL, percent-encoded, and a reload or a link brings it back; a container.id filter selects
// one instance of a Deployment; hostile names show as text, run nothing, and do not widen the
// page; a name that is not UTF-8 gets a clear error. Screenshots go to DIR.
import { openServePage } from './e2e_page.mjs';

const t = await openServePage(process.argv);
const { page, base, check, shot, ready, topRows, param, errors, remote, dialogs } = t;

const API = '/k8s/default/api';
const X2B5K = '/k8s/default/api-7d4f9c6b8d-x2b5k/app';
const WEIRD = '/weird/a+b %2F c?d=e&f#g:8080';
const MARKUP = '<!--<script><img src=x onerror=alert(1)>"\'&amp;</script>';
const CONTROL = 'semi;colon\nnew line\x1b[31mred\x1b[0m';
const LONG = '/k8s/long/' + 'x'.repeat(2000);
const BYTES = 'bytes\\xff\\xfe'; // not UTF-8 in the ring: its bad bytes as \xHH (docs/query.md)
const FROM = '1714564800', TO = '1714565100';

const picked = () => page.locator('#ps-service').inputValue();
async function pick(name) {
  await page.locator('#ps-service').selectOption(name);
  await ready();
}
async function noOverflow(what) {
  const over = await page.evaluate(() => document.scrollingElement.scrollWidth - window.innerWidth);
  check(over <= 1, `${what}: the page is no wider than the window (${over}px over)`);
}
async function inert(what) {
  const made = await page.evaluate(() => document.getElementsByTagName('img').length +
    document.querySelectorAll('#ps-flame svg, #ps-top svg, .ps-head svg').length);
  check(made === 0, `${what}: no element made of a name (${made})`);
  check(dialogs.length === 0, `${what}: no script of a name ran ${dialogs.join('; ')}`);
}

await t.run(async () => {
  // 1. The picker offers every service of the ring, each exactly as /api/ls names it.
  await page.goto(base);
  await ready();
  const ls = await page.evaluate(async () => (await (await fetch('api/ls')).json()).ls.services.map((s) => s.name));
  const opts = await page.evaluate(() => [...document.querySelectorAll('#ps-service option')].map((o) => [o.value, o.textContent]));
  check(ls.length === 11 && ls.includes(API) && ls.includes(MARKUP) && ls.includes(CONTROL) &&
    ls.includes(LONG) && ls.includes(BYTES), `api/ls names every service (${ls.length})`);
  check(JSON.stringify(opts.map((o) => o[0])) === JSON.stringify(ls), 'picker values = the names, in order');
  check(opts.every(([v, t]) => v === t), 'picker texts = the names');
  // the busiest service, not the first by name: /k8s/default/api (5 s of CPU per interval in two
  // instances; /k8s/prod/db-0/postgres has as much CPU, in half the chunks)
  check(await picked() === API, `the busiest service picked (${await picked()})`);
  check(param('service') === API && page.url().includes('service=%2Fk8s%2Fdefault%2Fapi'),
    `the name in the URL, encoded (${page.url()})`);
  check((await topRows()).includes('api_x2b5k'), 'its flame graph: api_x2b5k');
  await noOverflow('first page');
  await shot('names-01-page.png');

  // 2. A Deployment: both instances, then one by its container.id (Coroot's per-instance view).
  await pick(API);
  check(param('service') === API && page.url().includes('service=%2Fk8s%2Fdefault%2Fapi'), `picked ${API}: in the URL`);
  let rows = await topRows();
  check(rows.includes('api_x2b5k') && rows.includes('api_q9zzm'), `both instances (${rows.join(', ')})`);
  check((await page.locator('.pfr-title').textContent()).endsWith(': ' + API), 'flame title names the service');
  await page.waitForFunction(() => [...document.querySelectorAll('#ps-label-key option')].some((o) => o.value === 'container.id'));
  await page.locator('#ps-label-key').selectOption('container.id');
  await page.locator('#ps-label-value').focus();
  const offered = await page.evaluate(() => [...document.querySelectorAll('#ps-label-values option')].map((o) => o.value));
  check(offered.includes(X2B5K) && offered.length === 2, `container.id values offered (${offered.join(' ')})`);
  await page.locator('#ps-label-value').fill(X2B5K);
  await page.locator('#ps-label-add').click();
  await ready();
  check(new URL(page.url()).searchParams.getAll('label').includes('container.id=' + X2B5K),
    'container.id filter in the URL');
  rows = await topRows();
  check(rows.includes('api_x2b5k') && !rows.includes('api_q9zzm'), `one instance only (${rows.join(', ')})`);
  check((await page.locator('.ps-chip').innerText()).includes(X2B5K), 'filter chip shows the container.id');
  await shot('names-02-instance.png');
  await page.reload();
  await ready();
  rows = await topRows();
  check(await picked() === API && rows.includes('api_x2b5k') && !rows.includes('api_q9zzm'),
    'reload: same service, same instance');

  // 3. A name with '+', '%2F', a space, '?', '&', '=', '#', ':' survives the URL both ways.
  await pick(WEIRD);
  check(param('service') === WEIRD, `URL round trip of ${WEIRD} (${page.url()})`);
  check((await topRows()).includes('weird_fn'), 'its flame graph: weird_fn');
  // The list of services answers late (a busy server): the page is ready only once the picker
  // shows the view of the URL, not as soon as the flame graph is drawn.
  const lateLs = async (route) => { await new Promise((r) => setTimeout(r, 700)); await route.fallback(); };
  await page.route('**/api/ls*', lateLs);
  await page.reload();
  await ready();
  check(await picked() === WEIRD && (await topRows()).includes('weird_fn'), 'reload keeps it, the list late');
  await page.unroute('**/api/ls*', lateLs);

  // 4. A link to a view: the service comes from the URL alone.
  const q = new URLSearchParams({ service: '/k8s/prod/db-0/postgres', from: FROM, to: TO });
  await page.goto(base + '?' + q.toString());
  await ready();
  check(await picked() === '/k8s/prod/db-0/postgres' && (await topRows())[0] === 'pg_exec',
    'a link opens /k8s/prod/db-0/postgres');

  // 5. Hostile names: shown as text, nothing runs, the page keeps its width.
  await pick(MARKUP);
  check((await page.locator('.pfr-title').textContent()).endsWith(': ' + MARKUP), 'markup name: the title shows it as text');
  check((await topRows()).includes('<svg/onload=alert(2)>'), 'markup function name: a row of text');
  await inert('markup name');
  await noOverflow('markup name');
  await shot('names-03-markup.png');
  await pick(CONTROL);
  check((await topRows()).includes('hostile_control') && param('service') === CONTROL, 'name with a newline and ESC');
  await pick(LONG);
  check((await topRows()).includes('long_fn') && param('service') === LONG, 'name of 2,010 characters');
  const selW = (await page.locator('#ps-service').boundingBox()).width;
  check(selW < 500, `the picker stays narrow (${Math.round(selW)}px)`);
  await noOverflow('long name');
  await shot('names-04-long.png');
  await pick(BYTES);
  check((await topRows()).includes('bytes_fn\\xff'), 'a name that is not UTF-8 opens: its flame graph');
  // a label value that is markup, from a link
  const ql = new URLSearchParams({ service: API, from: FROM, to: TO });
  ql.append('label', 'container.id=<img src=x onerror=alert(4)>');
  await page.goto(base + '?' + ql.toString());
  await ready();
  check((await page.locator('.ps-chip').innerText()).includes('<img src=x onerror=alert(4)>'), 'markup label value: a chip of text');
  await inert('markup label');
  check(errors.length === 0, `no script errors ${errors.join('; ')}`);
  check(remote.length === 0, `no request left the server ${remote.join(' ')}`);
}, 'names-error.png');
