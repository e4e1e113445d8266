// The `pfr serve` page: service, type and label pickers, a chart of the profile's total over
// time (drag to select, then Zoom or Compare), the flame graph (flame.js) and a top-functions
// table. The whole view lives in the URL (?service=..&from=..&to=..&mode=..&zoom=..) so it can be
// shared and reloaded. Everything comes from this server's /api/ (see docs/serve.md).
(function () {
  'use strict';
  const $ = (id) => document.getElementById(id);
  const NS = 'http://www.w3.org/2000/svg';
  const PRESETS = [['15m', 900], ['1h', 3600], ['6h', 21600], ['24h', 86400], ['7d', 604800], ['All', 0]];
  const SAMPLE_KEYS = ['pid', 'comm'];
  const CHART_H = 156, PAD_L = 64, PAD_R = 8, PAD_T = 14, PAD_B = 20, PIN_H = 11;

  // The view: everything that goes into the URL. Times are unix seconds.
  const view = {
    service: '', type: '', labels: [], from: null, to: null,
    mode: 'flame', cfrom: null, cto: null, zoom: 0, search: '',
  };
  let ls = null;        // /api/ls
  let timeline = null;  // last /api/timeline answer
  let flameApi = null;  // PfrFlame.mount() result
  let unit = '';
  let sel = null;       // chart selection {from, to}
  let seq = 0;          // drops answers of superseded loads
  // "ready" (what tests and scripts wait for) means the newest load is drawn AND the pickers
  // show the view: a view named by the URL loads before /api/ls fills the pickers.
  let loaded = false;
  let pickersSettled = false;
  function markReady() { if (loaded && pickersSettled) document.body.dataset.state = 'ready'; }
  let firstPaint = false;
  let sampleLabels = {}; // /api/labels: key -> [{value, total}]

  // A key of an object parsed from JSON (label keys, package names come from the ring): its own
  // value only, never one inherited from Object.prototype ("constructor", "__proto__").
  function own(o, k) { return o && Object.prototype.hasOwnProperty.call(o, k) ? o[k] : undefined; }

  // ---- URL ----
  function num(s) { const v = parseFloat(s); return s !== null && s !== '' && isFinite(v) ? v : null; }
  function readUrl() {
    const q = new URLSearchParams(location.search);
    view.service = q.get('service') || '';
    view.type = q.get('type') || '';
    view.labels = q.getAll('label').filter((l) => l.indexOf('=') > 0);
    view.from = num(q.get('from'));
    view.to = num(q.get('to'));
    view.mode = q.get('mode') === 'compare' ? 'compare' : 'flame';
    view.cfrom = num(q.get('cfrom'));
    view.cto = num(q.get('cto'));
    if (view.mode === 'compare' && (view.cfrom === null || view.cto === null)) view.mode = 'flame';
    view.zoom = parseInt(q.get('zoom') || '0', 10) || 0;
    view.search = q.get('search') || '';
  }
  function sec(v) { return String(Math.round(v * 1000) / 1000); }
  function writeUrl(push) {
    const q = new URLSearchParams();
    if (view.service) q.set('service', view.service);
    if (view.type) q.set('type', view.type);
    view.labels.forEach((l) => q.append('label', l));
    if (view.from !== null) q.set('from', sec(view.from));
    if (view.to !== null) q.set('to', sec(view.to));
    if (view.mode === 'compare') {
      q.set('mode', 'compare');
      q.set('cfrom', sec(view.cfrom));
      q.set('cto', sec(view.cto));
    }
    if (view.zoom) q.set('zoom', String(view.zoom));
    if (view.search) q.set('search', view.search);
    const url = location.pathname + '?' + q.toString();
    if (url === location.pathname + location.search) return;
    if (push) history.pushState(null, '', url); else history.replaceState(null, '', url);
  }

  // ---- API ----
  function filterParams() {
    const q = new URLSearchParams();
    if (view.service) q.set('service', view.service);
    if (view.type) q.set('type', view.type);
    view.labels.forEach((l) => q.append('label', l));
    return q;
  }
  async function api(path, q) {
    let res;
    try {
      res = await fetch('api/' + path + '?' + q.toString(), { headers: { Accept: 'application/json' } });
    } catch (e) {
      throw new Error('cannot reach pfr serve (' + e.message + ')');
    }
    let body = null;
    try { body = await res.json(); } catch (e) { body = null; }
    if (!res.ok) {
      const err = new Error(body && body.error ? body.error : 'HTTP ' + res.status);
      err.status = res.status;
      throw err;
    }
    return body;
  }

  // ---- formatting ----
  function pad(n) { return String(n).padStart(2, '0'); }
  // Round times (local) for the chart's axis: at most max of them inside the range.
  const TICKS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
    43200, 86400, 172800, 604800, 2592000];
  function ticks(span, max) {
    const step = TICKS.find((t) => span / t <= max) || span / max;
    const tz = new Date(view.from * 1000).getTimezoneOffset() * 60;
    const out = [];
    for (let t = Math.ceil((view.from - tz) / step) * step + tz; t <= view.to && out.length <= max; t += step) out.push(t);
    return out;
  }
  function fmtTime(s, span) {
    const d = new Date(s * 1000);
    const hms = pad(d.getHours()) + ':' + pad(d.getMinutes()) + (span <= 900 && d.getSeconds() ? ':' + pad(d.getSeconds()) : '');
    if (span < 86400 * 1.5) return hms;
    return (d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' + hms;
  }
  function fmtFull(s) {
    const d = new Date(s * 1000);
    return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' +
      pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
  }
  function fmtDur(s) {
    const parts = [];
    let r = Math.round(s);
    for (const [u, n] of [['d', 86400], ['h', 3600], ['m', 60], ['s', 1]]) {
      if (r >= n) { parts.push(Math.floor(r / n) + u); r %= n; }
    }
    return parts.slice(0, 2).join('') || Math.round(s * 1000) + 'ms';
  }
  function fmtVal(v, perSecond) { return PfrFlame.formatValue(v, unit, perSecond); }
  function pct(a, b) { return b > 0 ? (100 * a / b).toFixed(2) + '%' : '-'; }
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function svg(tag, attrs, cls) {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (cls) e.setAttribute('class', cls);
    return e;
  }
  function status(msg, isError) {
    const s = $('ps-status');
    s.textContent = msg || '';
    s.classList.toggle('ps-error', !!isError);
  }

  // ---- pickers ----
  function service() { return ls && ls.ls.services.find((s) => s.name === view.service); }
  function defaultType(s) {
    if (!s || !s.types.length) return '';
    return s.types.indexOf('ebpf:cpu:nanoseconds') >= 0 ? 'ebpf:cpu:nanoseconds' : s.types[0];
  }
  function defaults() {
    const list = ls.ls.services;
    if (!list.length) return false;
    // the busiest service of the last hour (pfr serve says which), not the first by name
    if (!service()) view.service = ls.busiest && list.some((s) => s.name === ls.busiest) ? ls.busiest : list[0].name;
    const s = service();
    if (s.types.indexOf(view.type) < 0) view.type = defaultType(s);
    if (view.from === null || view.to === null || view.to <= view.from) {
      view.to = Math.ceil(s.last_ns / 1e9);
      view.from = Math.max(Math.floor(s.first_ns / 1e9), view.to - 3600);
    }
    return true;
  }
  function fillSelect(sel, values, current) {
    sel.textContent = '';
    values.forEach((v) => {
      const o = el('option', '', v);
      o.value = v;
      if (v === current) o.selected = true;
      sel.appendChild(o);
    });
  }
  function fillPickers() {
    fillSelect($('ps-service'), ls.ls.services.map((s) => s.name), view.service);
    const s = service();
    fillSelect($('ps-type'), s ? s.types : [], view.type);
    fillKeys();
    const chips = $('ps-chips');
    chips.textContent = '';
    view.labels.forEach((l, i) => {
      const c = el('span', 'ps-chip', l);
      const x = el('button', '', '×');
      x.type = 'button';
      x.title = 'remove this filter';
      x.addEventListener('click', () => { view.labels.splice(i, 1); changed(true); });
      c.appendChild(x);
      chips.appendChild(c);
    });
    const presets = $('ps-presets');
    presets.textContent = '';
    PRESETS.forEach(([name, len]) => {
      const b = el('button', '', name);
      b.type = 'button';
      b.title = len ? 'the last ' + name + ' of data' : 'everything the ring holds for the service';
      const r = presetRange(len);
      if (r && Math.abs(r[0] - view.from) < 1 && Math.abs(r[1] - view.to) < 1) b.classList.add('ps-on');
      b.addEventListener('click', () => {
        const rr = presetRange(len);
        if (!rr) return;
        view.from = rr[0]; view.to = rr[1];
        leaveCompare();
        changed(true);
      });
      presets.appendChild(b);
    });
  }
  // Label keys: the service's profile labels, then the sample labels seen (pid and comm, what
  // pfr-recorder writes, before any were asked for).
  function fillKeys() {
    const s = service(), sel = $('ps-label-key');
    const keys = Array.from(new Set(Object.keys(s ? s.labels : {}).concat(SAMPLE_KEYS, Object.keys(sampleLabels))));
    const have = Array.from(sel.options).map((o) => o.value);
    if (have.join('\n') !== keys.join('\n')) fillSelect(sel, keys, sel.value);
    fillValues();
  }
  function fillValues() {
    const key = $('ps-label-key').value, s = service(), list = $('ps-label-values');
    list.textContent = '';
    let values = [];
    if (s && own(s.labels, key)) values = own(s.labels, key).map((v) => [v, '']);
    else if (own(sampleLabels, key)) values = own(sampleLabels, key).map((v) => [v.value, fmtVal(v.total)]);
    values.forEach(([v, label]) => {
      const o = el('option');
      o.value = v;
      if (label) o.label = label;
      list.appendChild(o);
    });
  }
  function presetRange(len) {
    const s = service();
    if (!s) return null;
    const last = Math.ceil(s.last_ns / 1e9), first = Math.floor(s.first_ns / 1e9);
    const max = ls.limits.max_range_ns / 1e9;
    let from = len ? last - len : first;
    if (last - from > max) from = last - max;
    return [from, last];
  }
  function leaveCompare() { view.mode = 'flame'; view.cfrom = view.cto = null; view.zoom = 0; sel = null; }

  // ---- chart ----
  function chartPoints() {
    const w = $('ps-chart').clientWidth || 1000;
    const max = ls ? ls.limits.max_points : 2000;
    return Math.max(20, Math.min(max, Math.floor((w - PAD_L - PAD_R) / 4)));
  }
  function geometry() {
    const w = $('ps-chart').clientWidth || 1000;
    return { w, x0: PAD_L, x1: w - PAD_R, y0: PAD_T, y1: CHART_H - PAD_B };
  }
  function xOf(g, t) { return g.x0 + (t - view.from) / (view.to - view.from) * (g.x1 - g.x0); }
  function tOf(g, x) {
    const c = Math.min(g.x1, Math.max(g.x0, x));
    return view.from + (c - g.x0) / (g.x1 - g.x0) * (view.to - view.from);
  }
  function snap(t, up) {
    if (!timeline) return t;
    const f = timeline.from_ns / 1e9, step = timeline.timeline.step_ns / 1e9;
    const k = (t - f) / step;
    return Math.min(view.to, Math.max(view.from, f + (up ? Math.ceil(k - 1e-9) : Math.floor(k + 1e-9)) * step));
  }
  function rangeRect(g, a, b, cls, label) {
    const xa = Math.max(g.x0, xOf(g, a)), xb = Math.min(g.x1, xOf(g, b));
    if (xb <= xa) return null;
    const grp = svg('g');
    grp.appendChild(svg('rect', { x: xa, y: g.y0, width: xb - xa, height: g.y1 - g.y0 }, cls));
    if (label) {
      const t = svg('text', { x: xa + 3, y: g.y0 + 11 }, 'ps-rlabel');
      t.textContent = label;
      grp.appendChild(t);
    }
    return grp;
  }
  function drawChart(err) {
    const box = $('ps-chart'), g = geometry();
    box.textContent = '';
    const root = svg('svg', { width: g.w, height: CHART_H, viewBox: '0 0 ' + g.w + ' ' + CHART_H });
    root.appendChild(svg('line', { x1: g.x0, y1: g.y1, x2: g.x1, y2: g.y1 }, 'ps-axis'));
    root.appendChild(svg('line', { x1: g.x0, y1: g.y0, x2: g.x0, y2: g.y1 }, 'ps-axis'));
    const span = view.to - view.from;
    ticks(span, Math.max(2, Math.floor((g.x1 - g.x0) / 110))).forEach((t) => {
      const x = xOf(g, t);
      root.appendChild(svg('line', { x1: x, y1: g.y1, x2: x, y2: g.y1 + 3 }, 'ps-axis'));
      const anchor = x < g.x0 + 24 ? 'start' : x > g.x1 - 24 ? 'end' : 'middle';
      const tx = svg('text', { x: x, y: CHART_H - 6, 'text-anchor': anchor }, 'ps-tick');
      tx.textContent = fmtTime(t, span);
      root.appendChild(tx);
    });
    let max = 0;
    const pts = !err && timeline ? timeline.timeline.points : [];
    pts.forEach((p) => { if (p.value > max) max = p.value; });
    if (pts.length && max > 0) {
      const step = timeline.timeline.step_ns / 1e9;
      for (const frac of [0.5, 1]) {
        const y = g.y1 - frac * (g.y1 - g.y0);
        root.appendChild(svg('line', { x1: g.x0, y1: y, x2: g.x1, y2: y }, 'ps-grid'));
        const ty = svg('text', { x: g.x0 - 4, y: y + 4, 'text-anchor': 'end' }, 'ps-tick');
        ty.textContent = fmtVal(max * frac);
        root.appendChild(ty);
      }
      const bars = svg('g', {}, 'ps-bars');
      pts.forEach((p) => {
        if (!p.chunks || max <= 0) return;
        const t = p.time_ns / 1e9, xa = Math.max(g.x0, xOf(g, t)), xb = Math.min(g.x1, xOf(g, t + step));
        const h = (g.y1 - g.y0) * p.value / max;
        if (xb <= xa) return;
        const r = svg('rect', { x: xa, y: g.y1 - h, width: Math.max(0.8, xb - xa - (xb - xa > 3 ? 1 : 0)), height: h }, 'ps-bar');
        const tip = svg('title');
        tip.textContent = fmtFull(t) + ': ' + fmtVal(p.value) + ' (' + p.chunks + ' chunks)';
        r.appendChild(tip);
        bars.appendChild(r);
      });
      root.appendChild(bars);
      $('ps-chart-info').textContent = 'per ' + fmtDur(step) + ', peak ' + fmtVal(max) +
        (timeline.timeline.gauge ? ' (mean level)' : '') + ' · ' + timeline.chunks + ' chunks';
    } else {
      const t = svg('text', { x: (g.x0 + g.x1) / 2, y: (g.y0 + g.y1) / 2, 'text-anchor': 'middle' }, 'ps-empty');
      t.textContent = err ? err.message : pts.length ? 'nothing matches the filters in this range' : 'no data in this range';
      root.appendChild(t);
      $('ps-chart-info').textContent = '';
    }
    if (view.mode === 'compare') {
      const b = rangeRect(g, view.cfrom - (view.cto - view.cfrom), view.cfrom, 'ps-base', 'baseline');
      const c = rangeRect(g, view.cfrom, view.cto, 'ps-comp', 'comparison');
      if (b) root.appendChild(b);
      if (c) root.appendChild(c);
    }
    drawPins(root, g);
    const selRect = svg('rect', { x: 0, y: g.y0, width: 0, height: g.y1 - g.y0 }, 'ps-sel');
    selRect.setAttribute('id', 'ps-sel');
    selRect.setAttribute('visibility', sel ? 'visible' : 'hidden');
    if (sel) placeSel(selRect, g, sel.from, sel.to);
    root.appendChild(selRect);
    box.appendChild(root);
    bindDrag(root, selRect, g);
  }
  // Pins (pfr pin; trigger events are pins with origin trigger:*) of this service in the view:
  // a band each; a click opens the flame graph of its window, selected, so Compare sets it
  // against the same length before it.
  function pinsShown() {
    const pins = (ls && ls.pins) || [];
    return pins.filter((p) => (p.service === null || p.service === view.service) &&
      p.to_ns / 1e9 > view.from && p.from_ns / 1e9 < view.to);
  }
  function openPin(p) {
    view.from = p.from_ns / 1e9;
    view.to = p.to_ns / 1e9;
    leaveCompare();
    changed(true);
    setSelection({ from: view.from, to: view.to });
  }
  function drawPins(root, g) {
    pinsShown().forEach((p) => {
      const a = p.from_ns / 1e9, b = p.to_ns / 1e9;
      const xa = Math.max(g.x0, xOf(g, a)), xb = Math.min(g.x1, xOf(g, b));
      const grp = svg('g', {}, 'ps-pin' + (p.automatic ? ' ps-pin-auto' : ''));
      grp.setAttribute('data-pin', String(p.id));
      grp.appendChild(svg('rect', { x: xa, y: g.y0 - PIN_H, width: Math.max(2, xb - xa), height: PIN_H }, 'ps-pin-band'));
      grp.appendChild(svg('rect', { x: xa, y: g.y0, width: Math.max(1, xb - xa), height: g.y1 - g.y0 }, 'ps-pin-area'));
      const tip = svg('title');
      tip.textContent = (p.automatic ? 'event ' : 'pin ') + p.id + ': ' + fmtFull(a) + ' to ' + fmtFull(b) +
        '\n' + p.reason + '\n' + p.origin + ' (click: its flame graph; Compare: against the ' + fmtDur(b - a) + ' before)';
      grp.appendChild(tip);
      grp.addEventListener('pointerdown', (ev) => ev.stopPropagation());
      grp.addEventListener('click', (ev) => { ev.stopPropagation(); openPin(p); });
      root.appendChild(grp);
    });
  }
  function placeSel(r, g, a, b) {
    const xa = xOf(g, Math.min(a, b)), xb = xOf(g, Math.max(a, b));
    r.setAttribute('x', xa);
    r.setAttribute('width', Math.max(1, xb - xa));
  }
  function bindDrag(root, selRect, g) {
    let start = null;
    const xOfEvent = (ev) => ev.clientX - root.getBoundingClientRect().left;
    root.addEventListener('pointerdown', (ev) => {
      if (ev.button !== 0) return;
      start = xOfEvent(ev);
      root.setPointerCapture(ev.pointerId);
      ev.preventDefault();
    });
    root.addEventListener('pointermove', (ev) => {
      if (start === null) return;
      const x = xOfEvent(ev);
      selRect.setAttribute('visibility', 'visible');
      placeSel(selRect, g, tOf(g, start), tOf(g, x));
    });
    const end = (ev) => {
      if (start === null) return;
      const x = xOfEvent(ev), s = start;
      start = null;
      if (Math.abs(x - s) < 3) { setSelection(null); return; }
      const a = tOf(g, Math.min(s, x)), b = tOf(g, Math.max(s, x));
      const from = snap(a, false), to = snap(b, true);
      setSelection(to > from ? { from, to } : null);
    };
    root.addEventListener('pointerup', end);
    root.addEventListener('pointercancel', () => { start = null; });
  }
  function setSelection(s) {
    sel = s;
    const r = document.getElementById('ps-sel');
    if (r) {
      r.setAttribute('visibility', s ? 'visible' : 'hidden');
      if (s) placeSel(r, geometry(), s.from, s.to);
    }
    $('ps-zoom').disabled = $('ps-compare').disabled = $('ps-clear').disabled = !s;
    $('ps-sel-text').textContent = s
      ? 'Selected ' + fmtFull(s.from) + ' to ' + fmtFull(s.to) + ' (' + fmtDur(s.to - s.from) + ')'
      : 'Drag over the chart to select a range';
  }

  // ---- flame graph and top table ----
  function flameMessage(msg) {
    if (flameApi && flameApi.destroy) flameApi.destroy();
    flameApi = null;
    const box = $('ps-flame');
    box.textContent = '';
    box.appendChild(el('div', 'ps-flame-msg', msg));
    $('ps-top').textContent = '';
  }
  function drawFlame(data) {
    if (!data.flame.total) {
      flameMessage('nothing matches in this range: ' + data.chunks + ' chunks read, none has samples that match the filters');
      return;
    }
    if (flameApi && flameApi.destroy) flameApi.destroy();
    flameApi = PfrFlame.mount($('ps-flame'), data.flame, {
      noHash: true, zoom: view.zoom, search: view.search,
      onChange: (s) => { view.zoom = s.zoom; view.search = s.search; writeUrl(false); },
    });
    drawTop(data);
  }
  function escapeRe(s) { return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'); }
  function cell(row, text, cls) { const td = el('td', cls || '', text); row.appendChild(td); return td; }
  function drawTop(data) {
    const t = $('ps-top'), diff = data.flame.kind === 'diff';
    const total = diff ? 0 : data.flame.total;
    t.textContent = '';
    $('ps-top-title').textContent = diff ? 'Largest changes (per second)' : 'Top functions (by self)';
    const head = el('tr');
    const cols = diff
      ? ['Function', 'Baseline self', 'Comparison self', 'Change', 'Baseline total', 'Comparison total']
      : ['Function', 'Self', 'Self %', 'Total', 'Total %'];
    cols.forEach((c, i) => head.appendChild(el('th', i ? '' : 'ps-name', c)));
    const thead = el('thead');
    thead.appendChild(head);
    t.appendChild(thead);
    const body = el('tbody');
    const colors = new Map();
    (data.flame.packages || []).forEach((p) => { colors.set(p.name, p.color); });
    data.top.forEach((r) => {
      const tr = el('tr');
      const name = cell(tr, '', 'ps-name');
      const sw = el('span', 'ps-swatch');
      sw.style.background = colors.get(r.package) || '#ccc';
      name.appendChild(sw);
      name.appendChild(document.createTextNode(r.name));
      name.title = r.name + '\npackage: ' + r.package;
      if (diff) {
        cell(tr, fmtVal(r.base_self, true));
        cell(tr, fmtVal(r.comp_self, true));
        const ch = r.base_self > 0 ? (100 * (r.comp_self - r.base_self) / r.base_self).toFixed(1) + '%'
          : r.comp_self > 0 ? 'new' : '=';
        cell(tr, (ch[0] !== '-' && ch !== '=' && ch !== 'new' ? '+' : '') + ch,
          r.comp_self > r.base_self ? 'ps-up' : r.comp_self < r.base_self ? 'ps-down' : '');
        cell(tr, fmtVal(r.base_total, true));
        cell(tr, fmtVal(r.comp_total, true));
      } else {
        cell(tr, fmtVal(r.self));
        cell(tr, pct(r.self, total));
        cell(tr, fmtVal(r.total));
        cell(tr, pct(r.total, total));
      }
      tr.addEventListener('click', () => { if (flameApi) flameApi.search('^' + escapeRe(r.name) + '$'); });
      body.appendChild(tr);
    });
    t.appendChild(body);
  }

  // ---- loading ----
  function rangeText() {
    let s = fmtFull(view.from) + ' to ' + fmtFull(view.to) + ' (' + fmtDur(view.to - view.from) + ')';
    if (view.labels.length) s += ' · ' + view.labels.join(', ');
    $('ps-range-text').textContent = s;
    $('ps-mode').textContent = view.mode === 'compare'
      ? 'Comparing ' + fmtFull(view.cfrom) + ' to ' + fmtFull(view.cto) + ' with the ' + fmtDur(view.cto - view.cfrom) + ' before'
      : '';
    $('ps-back').hidden = view.mode !== 'compare';
  }
  async function load() {
    const my = ++seq;
    loaded = false;
    document.body.dataset.state = 'loading';
    status('Loading…');
    rangeText();
    const q = filterParams();
    const tq = new URLSearchParams(q);
    tq.set('from', sec(view.from));
    tq.set('to', sec(view.to));
    tq.set('points', String(chartPoints()));
    const fq = new URLSearchParams(q);
    if (view.mode === 'compare') {
      fq.set('from', sec(view.cfrom));
      fq.set('to', sec(view.cto));
    } else {
      fq.set('from', sec(view.from));
      fq.set('to', sec(view.to));
    }
    const t0 = performance.now();
    // The flame graph first: the heaviest query gets a query slot of pfr serve at once.
    const flP = api(view.mode === 'compare' ? 'diff' : 'flame', fq);
    const [fl, tl] = await Promise.allSettled([flP, api('timeline', tq)]);
    if (my !== seq) return;
    if (!firstPaint) performance.mark('pfr-data');
    timeline = tl.status === 'fulfilled' ? tl.value : null;
    if (timeline) unit = timeline.timeline.unit;
    if (fl.status === 'fulfilled') unit = fl.value.flame.unit || unit;
    drawChart(tl.status === 'rejected' ? tl.reason : null);
    if (fl.status === 'fulfilled') drawFlame(fl.value); else flameMessage(fl.reason.message);
    const errs = [tl, fl].filter((r) => r.status === 'rejected').map((r) => r.reason.message);
    status(errs.length ? errs[0] : 'Loaded in ' + Math.round(performance.now() - t0) + ' ms' +
      (fl.status === 'fulfilled' ? ' · ' + fl.value.chunks + ' chunks merged' : ''), errs.length > 0);
    loaded = true;
    markReady();
    if (!firstPaint) {
      firstPaint = true;
      requestAnimationFrame(() => setTimeout(() => performance.mark('pfr-first-paint'), 0));
    }
  }
  let labelsKey = '';
  // Sample label values (pid, comm) of the range, for the value picker, once per view. Asked
  // without the sample label filters, so other values stay pickable.
  async function loadLabels() {
    const s = service();
    const q = new URLSearchParams();
    if (view.service) q.set('service', view.service);
    if (view.type) q.set('type', view.type);
    view.labels.forEach((l) => { if (s && own(s.labels, l.slice(0, l.indexOf('=')))) q.append('label', l); });
    q.set('from', sec(view.from));
    q.set('to', sec(view.to));
    q.set('values', '100');
    if (q.toString() === labelsKey) return;
    labelsKey = q.toString();
    try {
      const r = await api('labels', q);
      sampleLabels = r.sample_labels || {};
    } catch (e) {
      sampleLabels = {};
    }
    if (ls) fillKeys();
  }
  // A change of the view: URL, pickers, data.
  function changed(push) {
    if (ls) defaults();
    setSelection(null);
    writeUrl(push);
    if (ls) fillPickers();
    load();
  }

  // ---- wiring ----
  $('ps-service').addEventListener('change', (e) => {
    view.service = e.target.value;
    view.labels = [];
    const s = service();
    if (s && s.types.indexOf(view.type) < 0) view.type = defaultType(s);
    leaveCompare();
    changed(true);
  });
  $('ps-type').addEventListener('change', (e) => { view.type = e.target.value; view.zoom = 0; changed(true); });
  $('ps-label-key').addEventListener('change', fillValues);
  // The values of sample labels cost a merge of the range with its labels: asked for only when
  // someone goes for the label picker.
  for (const id of ['ps-label-key', 'ps-label-value']) {
    $(id).addEventListener('focus', () => { if (ls) loadLabels(); });
    $(id).addEventListener('pointerdown', () => { if (ls) loadLabels(); });
  }
  $('ps-label-add').addEventListener('click', () => {
    const k = $('ps-label-key').value, v = $('ps-label-value').value.trim();
    if (!k || !v) return;
    view.labels.push(k + '=' + v);
    $('ps-label-value').value = '';
    view.zoom = 0;
    changed(true);
  });
  $('ps-zoom').addEventListener('click', () => {
    if (!sel) return;
    view.from = sel.from;
    view.to = sel.to;
    leaveCompare();
    changed(true);
  });
  $('ps-compare').addEventListener('click', () => {
    if (!sel) return;
    view.mode = 'compare';
    view.cfrom = sel.from;
    view.cto = sel.to;
    view.zoom = 0;
    changed(true);
  });
  $('ps-clear').addEventListener('click', () => setSelection(null));
  $('ps-back').addEventListener('click', () => { leaveCompare(); changed(true); });
  window.addEventListener('popstate', () => { readUrl(); sel = null; changed(false); });
  let lastW = 0;
  window.addEventListener('resize', () => {
    const w = $('ps-chart').clientWidth;
    if (w !== lastW && view.from !== null) { lastW = w; drawChart(null); }
  });

  async function start() {
    readUrl();
    const complete = view.service && view.from !== null && view.to !== null && view.to > view.from;
    // A view named by the URL asks for its data before the list of services (ls), which only
    // fills the pickers: the data requests go out first and get pfr serve's query slots first.
    let loading = null;
    if (complete) { rangeText(); loading = load(); }
    const lsP = api('ls', new URLSearchParams());
    try {
      ls = await lsP;
    } catch (e) {
      status(e.message, true);
      pickersSettled = true;
      document.body.dataset.state = 'ready';
      return;
    }
    if (!defaults()) {
      status('The ring holds no profiles yet.', true);
      flameMessage('no profiles recorded yet');
      pickersSettled = true;
      document.body.dataset.state = 'ready';
      return;
    }
    fillPickers();
    pickersSettled = true;
    markReady();
    if (!complete) { writeUrl(false); loading = load(); }
    lastW = $('ps-chart').clientWidth;
    await loading;
  }

  // For tests and the console.
  window.pfrServe = { view, flame: () => flameApi, selection: () => sel, setSelection };
  start();
})();
